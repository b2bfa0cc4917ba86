// Package messaging tests human messaging end to end: blocking, IM connectors, the inbox.
package messaging
