package pg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func openACC(t *testing.T, dsn string) (*pg.ACC, *pg.DB) {
	t.Helper()
	db := pgharness.Open(t, dsn)
	return pg.NewACC(db), db
}

func TestACCConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseACC(t, func(t *testing.T) (accdb.Driver, accdb.Driver) {
		dsn := srv.NewDatabase(t)
		a, _ := openACC(t, dsn)
		b, _ := openACC(t, dsn)
		return a, b
	})
}

// The schema's CHECKs and keys hold for a writer that skips the driver
// (the same list as store/sqlite's tables).
func TestACCStoreGuards(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	_, db := openACC(t, srv.NewDatabase(t))
	ctx := context.Background()
	const fp = "0000000000000000000000000000000000000000000000000000000000000001"
	conn := `INSERT INTO acc_connectors (name, id, cert_sha256, created_at) VALUES ($1, $2, $3, '2026-01-01T00:00:00Z')`
	if _, err := db.Pool.Exec(ctx, conn, "farm", "id-1", fp); err != nil {
		t.Fatalf("a valid connector was refused: %v", err)
	}
	for name, args := range map[string][]any{
		"empty name":        {"", "id-2", fp},
		"long name":         {strings.Repeat("n", 65), "id-3", fp},
		"short fingerprint": {"x", "id-4", "00"},
		"taken id":          {"y", "id-1", fp},
	} {
		if _, err := db.Pool.Exec(ctx, conn, args...); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	run := `INSERT INTO acc_runs (task_id, run_id, connector_id, agent_id, state) VALUES ($1, $2, 'id-1', 'ag', $3)`
	if _, err := db.Pool.Exec(ctx, run, "t1", "r1", "created"); err != nil {
		t.Fatalf("a valid run was refused: %v", err)
	}
	for name, args := range map[string][]any{
		"second run of a task": {"t1", "r2", "created"},
		"taken run id":         {"t2", "r1", "created"},
		"unknown state":        {"t3", "r3", "lost"},
	} {
		if _, err := db.Pool.Exec(ctx, run, args...); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
