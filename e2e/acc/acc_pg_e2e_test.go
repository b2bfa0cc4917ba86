package acc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// TestACCPostgresKill9 is TestACCGatewayKill9 on [store] driver =
// "postgres", behind a real Prosody: `agentgw acc init|enroll|list` record
// the connector in PostgreSQL, `agentgw serve` reads it there and maps the
// run to its task there, and after a kill -9 the restarted gateway settles
// the task agentgw:interrupted and sends cancel_run for its one run — no
// second run, and no SQLite file anywhere.
func TestACCPostgresKill9(t *testing.T) {
	t.Parallel()
	pg := pgharness.Start(t)
	dsn := strings.Replace(pg.NewDatabase(t), pgharness.User+"@", pgharness.User+":"+e2e.PgDSNPassword+"@", 1)
	e, dir := prepareACCOn(t, e2e.Options{PostgresDSN: dsn, Instance: "gw-acc-pg"})
	accKill9(t, e, dir)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var connectors, runs, open int
	read := func() {
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM acc_connectors WHERE name = 'farm'),
			(SELECT count(*) FROM acc_runs), (SELECT count(*) FROM acc_runs WHERE state <> 'done')`).Scan(&connectors, &runs, &open); err != nil {
			t.Fatal(err)
		}
	}
	// The run is recorded done right after cancel_run is sent.
	testkit.WaitFor(t, 10*time.Second, "the cancelled run recorded done in PostgreSQL", func() bool { read(); return open == 0 })
	if connectors != 1 || runs != 1 {
		t.Fatalf("PostgreSQL holds %d connectors named farm and %d runs; want 1 and 1", connectors, runs)
	}
	e.Agentgw(0, "acc", "revoke", "--config", e.ConfigPath, "farm")
	if out := e.Agentgw(0, "acc", "list", "--config", e.ConfigPath); !strings.Contains(out, "revoked") {
		t.Fatalf("acc list on PostgreSQL after revoke: %s", out)
	}
	if _, err := os.Stat(filepath.Join(e.Dir, "agentgw.db")); err == nil {
		t.Fatal("a SQLite store was created beside a postgres config")
	}
	if strings.Contains(e.Log.String(), e2e.PgDSNPassword) {
		t.Fatal("the DSN's password reached the log")
	}
}
