package chatsqlite

import (
	"embed"

	"github.com/agentgw/agentgw/internal/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations is this driver's schema history, for store.Open. The name
// 0016b keeps clear of the numbers other drivers take.
var Migrations = store.Migrations{Owner: "chatsqlite", FS: migrationFS}
