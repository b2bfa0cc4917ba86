// Package tasks tests tasks end to end: replay, cancel races, terminal states, the existence oracle, quotas and rate limits.
package tasks
