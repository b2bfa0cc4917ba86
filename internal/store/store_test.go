package store

import (
	"context"
	"path/filepath"
	"testing"
)

func TestOpenMigratesAndReopens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agentgw.db")
	db, err := Open(ctx, path)
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
	db, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	var n int
	if err := db.Read.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n == 0 {
		t.Fatalf("migrations recorded = %d, %v", n, err)
	}
}
