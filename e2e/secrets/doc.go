// Package secrets tests the secrets audit end to end (SQLite, host, PostgreSQL DSN).
package secrets
