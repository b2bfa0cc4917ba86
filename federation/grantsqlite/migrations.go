package grantsqlite

import (
	"embed"

	"github.com/agentgw/agentgw/internal/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations is this driver's schema history, for store.Open. The files
// keep the names (and so the recorded identities) they had when every
// migration lived in internal/store.
var Migrations = store.Migrations{Owner: "grantsqlite", FS: migrationFS}
