package sqlite_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentgw/agentgw/store/migrate"
	"github.com/agentgw/agentgw/store/sqlite"
)

func TestOpenMigratesAndReopens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentgw.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.Write.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
	var syncMode int
	if err := db.Write.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil || syncMode != 2 {
		t.Fatalf("synchronous = %d (want 2 = FULL), %v", syncMode, err)
	}
	if err := db.QuickCheck(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Read.ExecContext(ctx, "UPDATE change_generation SET generation = 5"); err == nil {
		t.Fatal("read handle accepted a write")
	}
	db.Close()
	db, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	var n int
	if err := db.Read.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n == 0 {
		t.Fatalf("migrations recorded = %d, %v", n, err)
	}
}

func TestMigrationSetsApplyInOneNameOrder(t *testing.T) {
	ctx := context.Background()
	// b's 0002 depends on a's 0001: the sets are applied in one name order,
	// not set by set.
	a := migrate.Set{Owner: "a", FS: fstest.MapFS{
		"migrations/0001_a.sql": {Data: []byte(`CREATE TABLE a (x INTEGER) STRICT;`)},
		"migrations/0003_a.sql": {Data: []byte(`INSERT INTO b SELECT x FROM a;`)},
	}}
	b := migrate.Set{Owner: "b", FS: fstest.MapFS{
		"migrations/0002_b.sql": {Data: []byte(`CREATE TABLE b (y INTEGER) STRICT; INSERT INTO a VALUES (7);`)},
	}}
	path := filepath.Join(t.TempDir(), "agentgw.db")
	db, err := sqlite.Open(ctx, path, b, a)
	if err != nil {
		t.Fatal(err)
	}
	var y int
	if err := db.Read.QueryRowContext(ctx, `SELECT y FROM b`).Scan(&y); err != nil || y != 7 {
		t.Fatalf("y = %d, %v", y, err)
	}
	rows, err := db.Read.QueryContext(ctx, `SELECT name FROM schema_migrations ORDER BY applied_at, rowid`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	rows.Close()
	// The store's own migrations and the two sets, in one name order.
	all, err := migrate.Collect("test", sqlite.Migrations, a, b)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range all {
		want = append(want, m.Name)
	}
	if !slices.Equal(names, want) || !slices.Contains(names, "migrations/0002_b.sql") {
		t.Errorf("recorded %q, want %q", names, want)
	}
	db.Close()
	// Reopening with the same files split differently applies nothing.
	merged := fstest.MapFS{}
	maps.Copy(merged, a.FS.(fstest.MapFS))
	maps.Copy(merged, b.FS.(fstest.MapFS))
	db, err = sqlite.Open(ctx, path, migrate.Set{Owner: "merged", FS: merged})
	if err != nil {
		t.Fatalf("reopen with one set: %v", err)
	}
	db.Close()

	if _, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "dup.db"), a, migrate.Set{Owner: "c", FS: fstest.MapFS{
		"migrations/0001_a.sql": {Data: []byte(`SELECT 1;`)},
	}}); err == nil || !strings.Contains(err.Error(), "0001_a.sql is in both a and c") {
		t.Errorf("a name in two sets: %v", err)
	}
}
