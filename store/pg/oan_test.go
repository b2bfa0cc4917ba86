package pg_test

import (
	"testing"

	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestOANConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseOAN(t, func(t *testing.T) (oandb.Driver, oandb.Driver) {
		dsn := srv.NewDatabase(t)
		var out [2]oandb.Driver
		for i := range out {
			out[i] = pg.NewOAN(pgharness.Open(t, dsn))
		}
		return out[0], out[1]
	})
}
