package pg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agentgw/agentgw/directory/dirdb"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func openDirectory(t *testing.T, dsn string) (*pg.Directory, *pg.DB) {
	t.Helper()
	db := pgharness.Open(t, dsn)
	return pg.NewDirectory(db), db
}

var (
	dirH1 = strings.Repeat("A", 43) + "="
	dirH2 = strings.Repeat("B", 43) + "="
)

func TestDirectoryConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseDirectory(t, func(t *testing.T) (dirdb.Driver, dirdb.Driver) {
		dsn := srv.NewDatabase(t)
		a, _ := openDirectory(t, dsn)
		b, _ := openDirectory(t, dsn)
		return a, b
	})
}

// The schema guards hold for a writer that skips the driver's checks (the
// same list as store/sqlite's).
func TestDirectoryStoreGuards(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	s, db := openDirectory(t, srv.NewDatabase(t))
	ctx := context.Background()
	const ep = "a@b.example"
	s.Register(ctx, ep, "1", dirH1, []byte("{}"))
	s.Register(ctx, ep, "2", dirH2, []byte("[]"))
	if ch, err := s.Activate(ctx, ep, "1", dirH1); err != nil || !ch {
		t.Fatal(ch, err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE directory_versions SET active = true WHERE endpoint = $1`, ep); err == nil {
		t.Fatal("two active versions allowed")
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE directory_versions SET canonical = '\x00' WHERE endpoint = $1`, ep); err == nil {
		t.Fatal("a version's content changed")
	}
	if _, err := s.Deactivate(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveEndpoint(ctx, ep, []string{"2", "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO directory_versions (endpoint, version, hash, canonical) VALUES ($1, '1', $2, '\x00')`, ep, dirH2); err == nil {
		t.Fatal("insert over a tombstone with a different hash allowed")
	}
	for _, q := range []string{`UPDATE directory_tombstones SET hash = '` + dirH2 + `'`, `DELETE FROM directory_tombstones`, `TRUNCATE directory_tombstones`} {
		if _, err := db.Pool.Exec(ctx, q); err == nil {
			t.Fatalf("%s: tombstones changed", q)
		}
	}
}

// Two instances activating different versions of one endpoint at once
// leave exactly one active, each call either changing it or finding it
// active, never an error.
func TestDirectoryConcurrentActivate(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	dsn := srv.NewDatabase(t)
	a, _ := openDirectory(t, dsn)
	b, _ := openDirectory(t, dsn)
	ctx := context.Background()
	const ep = "w@agents.example"
	if _, err := a.Register(ctx, ep, "1", dirH1, []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register(ctx, ep, "2", dirH2, []byte("2")); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			s, v, h := a, "1", dirH1
			if i%2 == 1 {
				s, v, h = b, "2", dirH2
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.Activate(ctx, ep, v, h)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		vs, _ := b.Versions(ctx, ep)
		active := 0
		for _, v := range vs {
			if v.Active {
				active++
			}
		}
		if active != 1 {
			t.Fatalf("round %d: %d active versions", round, active)
		}
	}
	if _, err := a.Register(ctx, ep, "2", dirH1, []byte("x")); !errors.Is(err, dirdb.ErrConflict) {
		t.Fatalf("conflicting register: %v", err)
	}
}
