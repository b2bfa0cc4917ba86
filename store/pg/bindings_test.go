package pg_test

import (
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestBindingsConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseBindings(t, func(t *testing.T) (bindingdb.Driver, bindingdb.Driver) {
		dsn := srv.NewDatabase(t)
		var out [2]bindingdb.Driver
		for i := range out {
			out[i] = pg.NewBindings(pgharness.Open(t, dsn))
		}
		return out[0], out[1]
	})
}
