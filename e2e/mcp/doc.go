// Package mcp tests the MCP bridge end to end, its acceptance suite, input sessions, delegation depth.
package mcp
