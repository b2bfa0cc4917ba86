package pg_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/agentgw/agentgw/store/migrate"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// set is a migration set whose files fail when applied twice (plain
// CREATE TABLE, an INSERT into a primary key).
var set = migrate.Set{Owner: "test", FS: fstest.MapFS{
	"migrations/0100_a.sql": {Data: []byte(`CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a VALUES (1);`)},
	"migrations/0101_b.sql": {Data: []byte(`CREATE TABLE b (id int PRIMARY KEY REFERENCES a (id)); INSERT INTO b VALUES (1);`)},
}}

// Instances that start together on one database apply every migration
// exactly once: the others wait on the advisory lock and find nothing to
// do.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	ctx := context.Background()
	for round := range 3 {
		dsn := srv.NewDatabase(t)
		const n = 6
		var wg sync.WaitGroup
		errs := make([]error, n)
		dbs := make([]*pg.DB, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				dbs[i], errs[i] = pg.Open(ctx, dsn, set)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: instance %d: %v", round, i, err)
			}
			defer dbs[i].Close()
		}
		applied, err := dbs[0].Applied(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The store's own migrations and the test's, each once, in one
		// name order.
		all, err := migrate.Collect("test", pg.Migrations, set)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, m := range all {
			want = append(want, m.Name)
		}
		if got := strings.Join(applied, " "); got != strings.Join(want, " ") || !strings.Contains(got, "migrations/0100_a.sql migrations/0100_cluster.sql migrations/0101_b.sql") {
			t.Fatalf("applied = %s", got)
		}
		var rows int
		if err := dbs[1].Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b) + (SELECT count(*) FROM change_generation)`).Scan(&rows); err != nil || rows != 3 {
			t.Fatalf("rows = %d, %v", rows, err)
		}
	}
}

// A failing migration leaves nothing behind (DDL is transactional), and
// the error names the file.
func TestFailedMigrationRollsBack(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	broken := migrate.Set{Owner: "broken", FS: fstest.MapFS{
		"migrations/0100_a.sql": {Data: []byte(`CREATE TABLE a (id int)`)},
		"migrations/0101_b.sql": {Data: []byte(`CREATE TABLE b (id int REFERENCES nowhere (id))`)},
	}}
	if _, err := pg.Open(ctx, dsn, broken); err == nil || !strings.Contains(err.Error(), "0101_b.sql") {
		t.Fatalf("open = %v", err)
	}
	db, err := pg.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'a'`).Scan(&n)
	if n != 0 {
		t.Fatal("a failed migration run left table a")
	}
	// Two sets claiming one file are refused.
	if _, err := pg.Open(ctx, dsn, set, set); err == nil || !strings.Contains(err.Error(), "in both") {
		t.Fatalf("duplicate set: %v", err)
	}
}

// Errors never carry the DSN's password: not for a DSN that does not
// parse, not for a refused connection.
func TestErrorsDoNotCarryThePassword(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	ctx := context.Background()
	const pw = "s3cr3t-Pa55word"
	for _, dsn := range []string{
		"postgresql://agentgw:" + pw + "@127.0.0.1:notaport/x",
		"postgresql://agentgw:" + pw + "@[::1/x",
		"host=127.0.0.1 password='" + pw,
		"postgresql://agentgw:" + pw + "@" + srv.Addr + "/no_such_database?sslmode=disable",
		"postgresql://nobody:" + pw + "@" + srv.Addr + "/postgres?sslmode=disable",
	} {
		_, err := pg.Open(ctx, dsn)
		if err == nil {
			t.Fatalf("%s opened", dsn)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("error carries the password: %v", err)
		}
	}
	if got := pg.Password("postgresql://u:" + pw + "@h/db"); got != pw {
		t.Errorf("Password = %q", got)
	}
}
