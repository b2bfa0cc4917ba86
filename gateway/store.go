package gateway

import (
	"context"

	"github.com/agentgw/agentgw/accbridge/accsqlite"
	"github.com/agentgw/agentgw/connectorbridge/bindingsqlite"
	"github.com/agentgw/agentgw/connectorbridge/chatsqlite"
	"github.com/agentgw/agentgw/directory/dirsqlite"
	"github.com/agentgw/agentgw/federation/grantsqlite"
	"github.com/agentgw/agentgw/internal/store"
	"github.com/agentgw/agentgw/tasks/tasksqlite"
)

// migrations are the migration sets of every SQLite driver the gateway
// assembles. Each set lives beside its driver.
var migrations = []store.Migrations{
	dirsqlite.Migrations,
	tasksqlite.Migrations,
	grantsqlite.Migrations,
	bindingsqlite.Migrations,
	accsqlite.Migrations,
	chatsqlite.Migrations,
}

// OpenStore opens (creating if needed) the SQLite store at path with every
// driver's migrations applied. The gateway and the operator commands
// (admin, trust, connector, doctor) open the store this way, so whichever
// opens a database first gives it the whole schema.
func OpenStore(ctx context.Context, path string) (*store.DB, error) {
	return store.Open(ctx, path, migrations...)
}
