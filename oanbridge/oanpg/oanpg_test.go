package oanpg

import (
	"testing"

	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/oandbtest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestConformance(t *testing.T) {
	srv := pgharness.Start(t)
	oandbtest.Exercise(t, func(t *testing.T) (oandb.Driver, oandb.Driver) {
		dsn := srv.NewDatabase(t)
		var out [2]oandb.Driver
		for i := range out {
			out[i] = New(pgharness.Open(t, dsn, Migrations))
		}
		return out[0], out[1]
	})
}
