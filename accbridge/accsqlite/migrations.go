package accsqlite

import (
	"embed"

	"github.com/agentgw/agentgw/internal/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations is this driver's schema history, for store.Open.
var Migrations = store.Migrations{Owner: "accsqlite", FS: migrationFS}
