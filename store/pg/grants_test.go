package pg_test

import (
	"context"
	"testing"

	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestGrantsConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseGrants(t, func(t *testing.T) (federation.GrantStore, federation.GrantStore) {
		dsn := srv.NewDatabase(t)
		var out [2]federation.GrantStore
		for i := range out {
			out[i] = pg.NewGrants(pgharness.Open(t, dsn))
		}
		return out[0], out[1]
	})
}

func TestGrantsSchemaRefusesBadScope(t *testing.T) {
	t.Parallel()
	db := pgharness.Shared(t).Open(t)
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO trust_grants VALUES ('a.test', '', 4, now())`); err == nil {
		t.Fatal("scope 4 stored")
	}
}
