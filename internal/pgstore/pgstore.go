// Package pgstore opens agentgw's PostgreSQL database: a pgx connection
// pool and the schema history. It is the PostgreSQL twin of
// internal/store: each PostgreSQL driver (tasks/taskpg, directory/dirpg,
// federation/grantpg, connectorbridge/bindingpg) keeps its queries and its
// migration set beside it and hands the set to Open; this package owns the
// pool, the change generation (migrations/0000_base.sql) and the record of
// applied migrations.
//
// Several gateway instances may start at once on one database: Open
// applies the pending migrations in one transaction that first takes a
// transaction-level advisory lock, so exactly one instance migrates and
// the others, blocked on the lock, then find nothing left to do.
//
// The DSN carries the database password: this package never puts the DSN
// into an error or a log line (pgx's own parse errors mask the password
// too), and Password lets the caller register it with its redactor.
package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var baseFS embed.FS

var base = Migrations{Owner: "pgstore", FS: baseFS}

// MigrationLock is the advisory lock key under which migrations run
// ("agentgw" in ASCII, as a bigint).
const MigrationLock int64 = 0x6167656e74677700

// Migrations is one driver's migration set: the files migrations/*.sql of
// FS, applied in name order across all sets (numbers are global, as in
// internal/store).
type Migrations struct {
	Owner string // the driver, for errors
	FS    fs.FS
}

// DB is an open PostgreSQL store.
type DB struct {
	Pool *pgxpool.Pool
	// Where is host:port/database, for messages; never the password.
	Where string
}

// Open connects to dsn (a libpq URL or key=value string) and applies the
// pending migrations of the base set and of sets.
func Open(ctx context.Context, dsn string, sets ...Migrations) (*DB, error) {
	if dsn == "" {
		return nil, errors.New("pgstore: empty DSN")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse errors echo the DSN with the password masked on
		// a best-effort basis, and wrap url.Parse errors that carry it
		// unmasked: none of that text is passed on.
		return nil, errors.New("pgstore: the DSN does not parse as a libpq URL (postgresql://user@host:port/database) or keyword=value string")
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	if cfg.MaxConns < 8 && !strings.Contains(dsn, "pool_max_conns") {
		// The read side, the group committer and (in a cluster) the
		// lease and notification loops each hold a connection; an
		// explicit pool_max_conns in the DSN is the operator's.
		cfg.MaxConns = 8
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect to %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: connect to %s: %w", where, err)
	}
	db := &DB{Pool: pool, Where: where}
	if err := db.migrate(ctx, append([]Migrations{base}, sets...)); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// Password returns the password the DSN carries ("" for none or an
// unparsable DSN), so the caller can redact it.
func Password(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return ""
	}
	return cfg.Password
}

// Close closes the pool.
func (db *DB) Close() error {
	db.Pool.Close()
	return nil
}

// Ping checks the connection.
func (db *DB) Ping(ctx context.Context) error { return db.Pool.Ping(ctx) }

// CheckWritable returns an error when the database cannot be written (a
// hot standby, a read-only user or default_transaction_read_only). The
// probe row is rolled back.
func (db *DB) CheckWritable(ctx context.Context) error {
	tx, err := db.Pool.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, `INSERT INTO schema_migrations (name) VALUES ('store-write-probe')`)
		tx.Rollback(ctx)
	}
	if err != nil {
		return fmt.Errorf("pgstore: %s is not writable: %w", db.Where, err)
	}
	return nil
}

// Applied lists the recorded migrations in name order.
func (db *DB) Applied(ctx context.Context) ([]string, error) {
	rows, err := db.Pool.Query(ctx, `SELECT name FROM schema_migrations ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrations: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

type migration struct {
	name, owner string
	fsys        fs.FS
}

func collect(sets []Migrations) ([]migration, error) {
	var all []migration
	seen := map[string]string{}
	for _, set := range sets {
		if set.FS == nil {
			return nil, fmt.Errorf("pgstore: migration set %q has no files", set.Owner)
		}
		names, err := fs.Glob(set.FS, "migrations/*.sql")
		if err != nil {
			return nil, fmt.Errorf("pgstore: migrations of %s: %w", set.Owner, err)
		}
		for _, name := range names {
			if other, ok := seen[name]; ok {
				return nil, fmt.Errorf("pgstore: migration %s is in both %s and %s", name, other, set.Owner)
			}
			seen[name] = set.Owner
			all = append(all, migration{name: name, owner: set.Owner, fsys: set.FS})
		}
	}
	slices.SortFunc(all, func(a, b migration) int { return strings.Compare(a.name, b.name) })
	return all, nil
}

// migrate applies every pending migration in one transaction under the
// advisory lock: PostgreSQL's DDL is transactional, so a failure leaves
// the schema as it was, and a concurrent Open waits on the lock and then
// sees every migration recorded.
func (db *DB) migrate(ctx context.Context, sets []Migrations) error {
	all, err := collect(sets)
	if err != nil {
		return err
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrations: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, MigrationLock); err != nil {
		return fmt.Errorf("pgstore: migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		name       text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("pgstore: migrations table: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT name FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("pgstore: migrations: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("pgstore: migrations: %w", err)
	}
	done := map[string]bool{}
	for _, n := range names {
		done[n] = true
	}
	for _, m := range all {
		if done[m.name] {
			continue
		}
		body, err := fs.ReadFile(m.fsys, m.name)
		if err != nil {
			return fmt.Errorf("pgstore: migration %s of %s: %w", m.name, m.owner, err)
		}
		// The simple protocol runs a multi-statement file in one call.
		if _, err := tx.Exec(ctx, string(body), pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("pgstore: migration %s of %s: %w", m.name, m.owner, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (name) VALUES ($1)`, m.name); err != nil {
			return fmt.Errorf("pgstore: migration %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrations: %w", err)
	}
	return nil
}

// Generation reads the change generation.
func (db *DB) Generation(ctx context.Context) (int64, error) {
	var g int64
	if err := db.Pool.QueryRow(ctx, `SELECT generation FROM change_generation WHERE id = 1`).Scan(&g); err != nil {
		return 0, fmt.Errorf("pgstore: generation: %w", err)
	}
	return g, nil
}

// BumpGeneration moves the change generation inside tx.
func BumpGeneration(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `UPDATE change_generation SET generation = generation + 1 WHERE id = 1`)
	return err
}
