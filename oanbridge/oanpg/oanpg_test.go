package oanpg

import (
	"context"
	"testing"

	"github.com/agentgw/agentgw/internal/pgharness"
	"github.com/agentgw/agentgw/internal/pgstore"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/oandbtest"
)

func TestConformance(t *testing.T) {
	srv := pgharness.Start(t)
	oandbtest.Exercise(t, func(t *testing.T) (oandb.Driver, oandb.Driver) {
		dsn := srv.NewDatabase(t)
		var out [2]oandb.Driver
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
