// Package sqlite is agentgw's SQLite store: the database file (WAL mode,
// synchronous=FULL, one writer connection, a pool of read-only readers),
// its one migrations folder and the record of applied migrations (db.go),
// and one driver per feature, a file each: tasks.go (taskdb.Driver),
// directory.go (dirdb.Driver), grants.go (federation.GrantStore),
// bindings.go (bindingdb.Driver), chats.go (chatdb.Driver), acc.go
// (accdb.Driver), oan.go (oandb.Driver) and selfreg.go (selfregdb.Driver).
// It is the twin of store/pg; store/storetest is the conformance suite
// both run.
package sqlite

import (
	"context"
	"database/sql"
	"embed"

	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/agentgw/agentgw/store/migrate"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations is the store's schema history: every file of migrations/,
// applied in name order. A new migration takes the next free number (the
// numbering is shared with store/pg: the same number is the same change).
var Migrations = migrate.Set{Owner: "sqlite", FS: migrationFS}

// DB is an open store: Write has exactly one connection, so writers queue in
// Go instead of failing with SQLITE_BUSY; Read serves concurrent readers.
type DB struct {
	Write *sql.DB
	Read  *sql.DB
	Path  string
}

// Open opens (creating if needed) the database at path and applies the
// pending migrations: the store's own (Migrations) and those of extra, the
// sets a test adds.
func Open(ctx context.Context, path string, extra ...migrate.Set) (*DB, error) {
	if path == "" {
		return nil, errors.New("store: empty path")
	}
	w, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// Without a limit the WAL file keeps its high-water mark for good.
	// Statement and savepoint journals (every task update has a guarding
	// trigger, every group-commit op a savepoint) stay in memory: in a temp
	// file they cost a spill file and heap churn per statement (strace of
	// tasks' BenchmarkAdmitAndRun: 11,830 brk, 16,913 madvise and 87,800
	// pwrite for 10,000 tasks, against 7, 535 and 60,015 in memory). They
	// live only while a transaction is open, so this holds no data at rest.
	for _, pragma := range []string{"PRAGMA journal_size_limit = 16777216", "PRAGMA temp_store = MEMORY"} {
		if _, err := w.ExecContext(ctx, pragma); err != nil {
			w.Close()
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
	}
	if err := apply(ctx, w, append([]migrate.Set{Migrations}, extra...)); err != nil {
		w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite3", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	return &DB{Write: w, Read: r, Path: path}, nil
}

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "on")
	if readOnly {
		q.Set("mode", "ro")
		q.Set("_query_only", "true")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Close closes both handles.
func (db *DB) Close() error {
	return errors.Join(db.Read.Close(), db.Write.Close())
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.Write.PingContext(ctx) }

// CheckWritable returns an error when the store cannot be written. SQLite
// opens a write-protected file (a read-only mount) read-only without an
// error, and neither BEGIN IMMEDIATE nor an already applied migration
// notices; only a write does. The probe row is rolled back.
func (db *DB) CheckWritable(ctx context.Context) error {
	tx, err := db.Write.BeginTx(ctx, nil)
	if err == nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO schema_migrations(name) VALUES ('store-write-probe')`)
		tx.Rollback()
	}
	if err != nil {
		return fmt.Errorf("store: %s is not writable: %w", db.Path, err)
	}
	return nil
}

// Applied lists the recorded migrations in name order.
func (db *DB) Applied(ctx context.Context) ([]string, error) {
	rows, err := db.Read.QueryContext(ctx, `SELECT name FROM schema_migrations ORDER BY name`)
	names, err := collect(rows, err, scanOne[string])
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return names, nil
}

// QuickCheck runs PRAGMA quick_check and returns nil when it reports ok.
func (db *DB) QuickCheck(ctx context.Context) error {
	return pragmaCheck(ctx, db.Read, "quick_check")
}

// IntegrityCheck runs PRAGMA integrity_check.
func (db *DB) IntegrityCheck(ctx context.Context) error {
	return pragmaCheck(ctx, db.Read, "integrity_check")
}

func pragmaCheck(ctx context.Context, q *sql.DB, pragma string) error {
	rows, err := q.QueryContext(ctx, "PRAGMA "+pragma)
	if err != nil {
		return fmt.Errorf("store: %s: %w", pragma, err)
	}
	lines, err := collect(rows, nil, scanOne[string])
	if err != nil {
		return err
	}
	var problems []string
	for _, s := range lines {
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("store: %s: %s", pragma, strings.Join(problems, "; "))
	}
	return nil
}

// apply applies every migration of sets not yet recorded, each in its own
// transaction, in name order.
func apply(ctx context.Context, db *sql.DB, sets []migrate.Set) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		name TEXT PRIMARY KEY,
		applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
	) STRICT`); err != nil {
		return fmt.Errorf("store: migrations table: %w", err)
	}
	all, err := migrate.Collect("store", sets...)
	if err != nil {
		return err
	}
	for _, m := range all {
		name := m.Name
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE name = ?`, name).Scan(&n); err != nil {
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
		if n > 0 {
			continue
		}
		body, err := m.Body()
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, body); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(name) VALUES (?)`, name); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
	}
	return nil
}
