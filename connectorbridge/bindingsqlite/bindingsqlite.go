// Package bindingsqlite keeps the xAgent Connector bindings in the
// gateway's SQLite store (migrations/0004_connector.sql).
package bindingsqlite
