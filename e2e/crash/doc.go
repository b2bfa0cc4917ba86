// Package crash tests kill -9 mid-run and after admission, disk full and read-only, XMPP server restart, MCP child isolation.
package crash
