package bindingpg

import (
	"context"
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/connectorbridge/bindingdbtest"
	"github.com/agentgw/agentgw/internal/pgharness"
	"github.com/agentgw/agentgw/internal/pgstore"
)

func TestConformance(t *testing.T) {
	srv := pgharness.Start(t)
	bindingdbtest.Exercise(t, func(t *testing.T) (bindingdb.Driver, bindingdb.Driver) {
		dsn := srv.NewDatabase(t)
		var out [2]bindingdb.Driver
		for i := range out {
			db, err := pgstore.Open(context.Background(), dsn, Migrations)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			out[i] = New(db)
		}
		return out[0], out[1]
	})
}
