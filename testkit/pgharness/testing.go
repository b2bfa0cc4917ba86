package pgharness

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/store/migrate"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/testkit"
)

// Start starts a private server for the test and stops it on cleanup. It
// skips the test when the binaries are absent, except under CI=true.
func Start(t testing.TB, o ...Options) *Server {
	t.Helper()
	var opts Options
	if len(o) > 0 {
		opts = o[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Launch(ctx, opts)
	if err != nil {
		if errors.Is(err, ErrNotInstalled) {
			testkit.Unavailable(t, "%v (run scripts/install-deps.sh)", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Logf("stop postgres: %v", err)
		}
	})
	return s
}

// NewDatabase creates a fresh, empty database for the test and returns its
// URL; the database is dropped on cleanup.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, dsn, err := s.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.DropDatabase(ctx, name); err != nil && s.PID() != 0 {
			t.Logf("drop %s: %v", name, err)
		}
	})
	return dsn
}

// Open opens the database at dsn with store/pg, applying its migrations
// (and the extra sets a test adds), and closes the handle on cleanup; it fails the
// test when the database cannot be opened or migrated. Each call is its
// own pool, as a separate gateway instance would have.
func Open(t testing.TB, dsn string, sets ...migrate.Set) *pg.DB {
	t.Helper()
	// The pool keeps no deadline: pgxpool may still use this context to
	// fill its idle connections after Open returned.
	db, err := pg.Open(context.Background(), dsn, sets...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Open creates a fresh database on s (NewDatabase) and opens it with the
// migration sets (Open).
func (s *Server) Open(t testing.TB, sets ...migrate.Set) *pg.DB {
	t.Helper()
	return Open(t, s.NewDatabase(t), sets...)
}

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns one server for the whole test binary, started on first
// use, so a package's tests pay for one server start instead of one each.
// Its tests take a fresh database each (Open, NewDatabase) and never stop,
// kill or restart it (those start their own with Start). The package's
// TestMain calls Main, which stops it when the tests end.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.srv, shared.err = Launch(ctx, Options{})
	})
	if shared.err != nil {
		if errors.Is(shared.err, ErrNotInstalled) {
			testkit.Unavailable(t, "%v (run scripts/install-deps.sh)", shared.err)
		}
		t.Fatal(shared.err)
	}
	return shared.srv
}

// Main runs the tests and then stops the Shared server, if one started:
// func TestMain(m *testing.M) { os.Exit(pgharness.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	CloseShared()
	return code
}

// CloseShared stops the Shared server, if one started; for a TestMain
// that also stops other harnesses' shared servers.
func CloseShared() {
	if shared.srv != nil {
		shared.srv.Close()
	}
}
