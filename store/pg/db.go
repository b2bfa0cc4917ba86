// Package pg is agentgw's PostgreSQL store: a pgx connection pool, its one
// migrations folder and the record of applied migrations (db.go), one
// driver per feature, a file each (tasks.go, directory.go, grants.go,
// bindings.go, chats.go, acc.go, oan.go, selfreg.go: the same interfaces
// as store/sqlite), and the cluster's bus and leases (bus.go).
// store/storetest is the conformance suite both drivers run.
//
// Several gateway instances may start at once on one database: Open
// applies the pending migrations in one transaction that first takes a
// transaction-level advisory lock, so exactly one instance migrates and
// the others, blocked on the lock, then find nothing left to do.
//
// The DSN carries the database password: this package never puts the DSN
// into an error or a log line (pgx's own parse errors mask the password
// too), and Password lets the caller register it with its redactor.
package pg

import (
	"context"
	"embed"

	"errors"
	"fmt"
	"strings"

	"github.com/agentgw/agentgw/store/migrate"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrations is the store's schema history: every file of migrations/,
// applied in name order, numbered like store/sqlite's (the same number is
// the same change; 0100_cluster.sql has no SQLite twin).
var Migrations = migrate.Set{Owner: "pg", FS: migrationFS}

// MigrationLock is the advisory lock key under which migrations run
// ("agentgw" in ASCII, as a bigint).
const MigrationLock int64 = 0x6167656e74677700

// DB is an open PostgreSQL store.
type DB struct {
	Pool *pgxpool.Pool
	// Where is host:port/database, for messages; never the password.
	Where string
}

// Open connects to dsn (a libpq URL or key=value string) and applies the
// pending migrations: the store's own (Migrations) and those of extra,
// the sets a test adds.
func Open(ctx context.Context, dsn string, extra ...migrate.Set) (*DB, error) {
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
	if err := db.migrate(ctx, append([]migrate.Set{Migrations}, extra...)); err != nil {
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

// migrate applies every pending migration in one transaction under the
// advisory lock: PostgreSQL's DDL is transactional, so a failure leaves
// the schema as it was, and a concurrent Open waits on the lock and then
// sees every migration recorded.
func (db *DB) migrate(ctx context.Context, sets []migrate.Set) error {
	all, err := migrate.Collect("pgstore", sets...)
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
		if done[m.Name] {
			continue
		}
		body, err := m.Body()
		if err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
		// The simple protocol runs a multi-statement file in one call.
		if _, err := tx.Exec(ctx, body, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("pgstore: migration %s of %s: %w", m.Name, m.Owner, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (name) VALUES ($1)`, m.Name); err != nil {
			return fmt.Errorf("pgstore: migration %s: %w", m.Name, err)
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

// BumpGeneration moves the change generation inside tx, and notifies
// GenerationChannel on the cluster bus when tx commits, so that every
// member reloads its directory and grants at once instead of at its next
// poll (which stays the fallback for a lost notice).
func BumpGeneration(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `UPDATE change_generation SET generation = generation + 1 WHERE id = 1`); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, pgChannel, generationNotice)
	return err
}

// GenerationChannel is the bus channel on which a committed change of the
// change generation (directory, grants, bans) is announced; the payload
// is empty.
const GenerationChannel = "agentgw.generation"

// generationNotice is the bus envelope of a GenerationChannel notice.
const generationNotice = `{"c":"` + GenerationChannel + `"}`
