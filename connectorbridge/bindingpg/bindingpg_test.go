package bindingpg

import (
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/connectorbridge/bindingdbtest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestConformance(t *testing.T) {
	srv := pgharness.Start(t)
	bindingdbtest.Exercise(t, func(t *testing.T) (bindingdb.Driver, bindingdb.Driver) {
		dsn := srv.NewDatabase(t)
		var out [2]bindingdb.Driver
		for i := range out {
			out[i] = New(pgharness.Open(t, dsn, Migrations))
		}
		return out[0], out[1]
	})
}
