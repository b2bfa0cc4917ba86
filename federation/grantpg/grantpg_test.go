package grantpg

import (
	"context"
	"testing"

	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/federation/grantstoretest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestConformance(t *testing.T) {
	srv := pgharness.Start(t)
	grantstoretest.Exercise(t, func(t *testing.T) (federation.GrantStore, federation.GrantStore) {
		dsn := srv.NewDatabase(t)
		var out [2]federation.GrantStore
		for i := range out {
			out[i] = New(pgharness.Open(t, dsn, Migrations))
		}
		return out[0], out[1]
	})
}

func TestSchemaRefusesBadScope(t *testing.T) {
	db := pgharness.Start(t).Open(t, Migrations)
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO trust_grants VALUES ('a.test', '', 4, now())`); err == nil {
		t.Fatal("scope 4 stored")
	}
}
