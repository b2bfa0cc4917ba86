package pg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentgw/agentgw/cluster/clustertest"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestClusterConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	clustertest.Exercise(t, func(t *testing.T, n int) ([]clustertest.Member, bool) {
		dsn := srv.NewDatabase(t)
		ms := make([]clustertest.Member, n)
		for i := range ms {
			// One pool per member: separate sessions, as separate
			// instances would have.
			pool, err := pgxpool.New(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			st, err := pg.OpenCluster(context.Background(), pool, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close(); pool.Close() })
			ms[i] = st
		}
		return ms, true
	})
}
