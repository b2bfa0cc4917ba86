package pg_test

import (
	"testing"

	"github.com/agentgw/agentgw/directory/presencedb"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestPresenceConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExercisePresence(t, func(t *testing.T) (presencedb.Driver, func() presencedb.Driver) {
		dsn := srv.NewDatabase(t)
		open := func() presencedb.Driver { return pg.NewPresence(pgharness.Open(t, dsn)) }
		return open(), open
	})
}
