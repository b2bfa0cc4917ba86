// Package acc tests agent-control-center end to end: frames, kill -9, PostgreSQL, the secrets audit.
package acc
