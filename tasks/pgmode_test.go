package tasks_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// harnessDB is the harness's store handle: *sqlite.DB, or pgHarnessDB in
// PostgreSQL mode.
type harnessDB interface {
	Close() error
	IntegrityCheck(ctx context.Context) error
}

// pgMode reports whether the engine tests run on the PostgreSQL driver
// (AGENTGW_TASKS_DRIVER=postgres), all against one private server that
// TestMain starts; child processes (the crash test's) inherit its URL.
func pgMode() bool { return os.Getenv("AGENTGW_TASKS_DRIVER") == "postgres" }

const pgAdminEnv = "AGENTGW_TASKS_PG_ADMIN"

func TestMain(m *testing.M) {
	if pgMode() && os.Getenv(pgAdminEnv) == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		srv, err := pgharness.Launch(ctx, pgharness.Options{})
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Setenv(pgAdminEnv, srv.URL("postgres"))
		code := m.Run()
		srv.Close()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// openPG opens the database standing for the harness's file path, named
// after it, creating it on first use (a restart, or the parent of a
// crashed child, reopens the same one).
func openPG(t testing.TB, path string) *pg.DB {
	t.Helper()
	ctx := context.Background()
	admin := os.Getenv(pgAdminEnv)
	sum := sha256.Sum256([]byte(path))
	name := "h_" + hex.EncodeToString(sum[:12])
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, `CREATE DATABASE `+name)
	c.Close(ctx)
	var pe *pgconn.PgError
	if err != nil && !(errors.As(err, &pe) && pe.Code == "42P04") { // duplicate_database
		t.Fatal(err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	db, err := pg.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// pgHarnessDB adapts *pg.DB to the harness: there is no file to
// check, so the integrity check is a round trip that must succeed.
type pgHarnessDB struct{ *pg.DB }

func (d pgHarnessDB) IntegrityCheck(ctx context.Context) error { return d.Ping(ctx) }
