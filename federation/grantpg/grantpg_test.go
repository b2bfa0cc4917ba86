package grantpg

import (
	"context"
	"testing"

	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/federation/grantstoretest"
	"github.com/agentgw/agentgw/internal/pgharness"
	"github.com/agentgw/agentgw/internal/pgstore"
)

func TestConformance(t *testing.T) {
	srv := pgharness.Start(t)
	grantstoretest.Exercise(t, func(t *testing.T) (federation.GrantStore, federation.GrantStore) {
		dsn := srv.NewDatabase(t)
		var out [2]federation.GrantStore
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

func TestSchemaRefusesBadScope(t *testing.T) {
	srv := pgharness.Start(t)
	db, err := pgstore.Open(context.Background(), srv.NewDatabase(t), Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO trust_grants VALUES ('a.test', '', 4, now())`); err == nil {
		t.Fatal("scope 4 stored")
	}
}
