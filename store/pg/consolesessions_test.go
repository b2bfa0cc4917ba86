package pg_test

import (
	"testing"

	"github.com/agentgw/agentgw/console/sessiondb"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestConsoleSessionsConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseConsoleSessions(t, func(t *testing.T) (sessiondb.Driver, func() sessiondb.Driver) {
		dsn := srv.NewDatabase(t)
		open := func() sessiondb.Driver { return pg.NewConsoleSessions(pgharness.Open(t, dsn)) }
		return open(), open
	})
}
