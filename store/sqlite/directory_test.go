package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/directory/dirdb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
)

func openDirectory(t *testing.T) (*sqlite.Directory, *sqlite.DB) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return sqlite.NewDirectory(db), db
}

// Hashes only need the stored shape (44 characters) here.
var (
	h1 = strings.Repeat("A", 43) + "="
	h2 = strings.Repeat("B", 43) + "="
)

func TestDirectoryStoreGuards(t *testing.T) {
	s, db := openDirectory(t)
	ctx := context.Background()
	const ep = "a@b.example"
	if ins, err := s.Register(ctx, ep, "1", h1, []byte("{}")); err != nil || !ins {
		t.Fatal(ins, err)
	}
	if ins, err := s.Register(ctx, ep, "1", h1, []byte("{}")); err != nil || ins {
		t.Fatal("identical insert", ins, err)
	}
	if _, err := s.Register(ctx, ep, "1", h2, []byte("[]")); !errors.Is(err, dirdb.ErrConflict) {
		t.Fatal(err)
	}
	s.Register(ctx, ep, "2", h2, []byte("[]"))
	if _, err := s.Activate(ctx, ep, "2", h1); !errors.Is(err, dirdb.ErrHashMismatch) {
		t.Fatal(err)
	}
	if ch, err := s.Activate(ctx, ep, "2", h2); err != nil || !ch {
		t.Fatal(ch, err)
	}
	if ch, err := s.Activate(ctx, ep, "1", h1); err != nil || !ch {
		t.Fatal(ch, err)
	}
	// The partial unique index holds one active version per endpoint.
	if _, err := db.Write.Exec(`UPDATE directory_versions SET active = 1 WHERE endpoint = ?`, ep); err == nil {
		t.Fatal("two active versions allowed")
	}
	if err := s.RemoveVersion(ctx, ep, "1"); !errors.Is(err, dirdb.ErrActive) {
		t.Fatal(err)
	}
	if err := s.RemoveEndpoint(ctx, ep, []string{"1"}); !errors.Is(err, dirdb.ErrChanged) {
		t.Fatal(err)
	}
	if err := s.RemoveEndpoint(ctx, ep, []string{"2", "1"}); err != nil {
		t.Fatal(err)
	}
	// The trigger refuses different content under a tombstone even for a
	// writer that skips the checks.
	if _, err := db.Write.Exec(`INSERT INTO directory_versions (endpoint, version, hash, canonical) VALUES (?, '1', ?, x'00')`, ep, h2); err == nil {
		t.Fatal("insert over a tombstone with a different hash allowed")
	}
	if _, err := db.Write.Exec(`UPDATE directory_tombstones SET hash = ?`, h2); err == nil {
		t.Fatal("tombstone updated")
	}
	gen, rows, err := s.Load(ctx, func(string, string, string) bool { return true }, func(dirdb.Version) error { return nil })
	if err != nil || len(rows) != 0 || gen != 5 {
		t.Fatalf("load gen %d rows %d err %v", gen, len(rows), err)
	}
}

func TestDirectoryConformance(t *testing.T) {
	storetest.ExerciseDirectory(t, func(t *testing.T) (dirdb.Driver, dirdb.Driver) {
		a, b := storetest.OpenTwo(t)
		return sqlite.NewDirectory(a), sqlite.NewDirectory(b)
	})
}
