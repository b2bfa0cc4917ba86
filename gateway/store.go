package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/accbridge/accpg"
	"github.com/agentgw/agentgw/accbridge/accsqlite"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/connectorbridge/bindingpg"
	"github.com/agentgw/agentgw/connectorbridge/bindingsqlite"
	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/connectorbridge/chatpg"
	"github.com/agentgw/agentgw/connectorbridge/chatsqlite"
	"github.com/agentgw/agentgw/directory/dirdb"
	"github.com/agentgw/agentgw/directory/dirpg"
	"github.com/agentgw/agentgw/directory/dirsqlite"
	"github.com/agentgw/agentgw/directory/selfregdb"
	"github.com/agentgw/agentgw/directory/selfregpg"
	"github.com/agentgw/agentgw/directory/selfregsqlite"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/federation/grantpg"
	"github.com/agentgw/agentgw/federation/grantsqlite"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/pgstore"
	"github.com/agentgw/agentgw/internal/store"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/oanpg"
	"github.com/agentgw/agentgw/oanbridge/oansqlite"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/tasks/taskpg"
	"github.com/agentgw/agentgw/tasks/tasksqlite"
)

// migrations are the migration sets of every SQLite driver the gateway
// assembles. Each set lives beside its driver.
var migrations = []store.Migrations{
	dirsqlite.Migrations,
	tasksqlite.Migrations,
	grantsqlite.Migrations,
	bindingsqlite.Migrations,
	accsqlite.Migrations,
	chatsqlite.Migrations,
	selfregsqlite.Migrations,
	oansqlite.Migrations,
}

// pgMigrations are the same for the PostgreSQL drivers.
var pgMigrations = []pgstore.Migrations{
	dirpg.Migrations,
	taskpg.Migrations,
	grantpg.Migrations,
	bindingpg.Migrations,
	accpg.Migrations,
	chatpg.Migrations,
	selfregpg.Migrations,
	oanpg.Migrations,
}

// OpenStore opens (creating if needed) the SQLite store at path with every
// driver's migrations applied. The gateway and the operator commands
// (admin, trust, connector, doctor) open the store this way, so whichever
// opens a database first gives it the whole schema.
func OpenStore(ctx context.Context, path string) (*store.DB, error) {
	return store.Open(ctx, path, migrations...)
}

// Store is the store the config selects ([store] driver), with one driver
// for each store interface. Exactly one of SQLite and Postgres is set.
type Store struct {
	Driver   string      // config.DriverSQLite or config.DriverPostgres
	SQLite   *store.DB   // driver sqlite
	Postgres *pgstore.DB // driver postgres
	// Where names the database for messages: the SQLite path, or
	// host:port/database; never a password.
	Where string

	Tasks     taskdb.Driver
	Directory dirdb.Driver
	Grants    federation.GrantStore
	// Bindings is the one connector binding driver of the store: share it
	// between the connector agents so that its card claims cover them all.
	Bindings bindingdb.Driver

	Chats   chatdb.Driver    // the connector bridge's IM v2 queues
	ACC     accdb.Driver     // agent-control-center connectors and runs
	OAN     oandb.Driver     // the OpenAgentNetwork cursor and effects
	SelfReg selfregdb.Driver // Self Registration records and bans
}

// OpenStores opens the configured store with every driver's migrations
// applied: the SQLite file at [store] path, or the PostgreSQL database at
// the DSN read from [store] dsn_env or dsn_file. The DSN's password never
// appears in an error.
func OpenStores(ctx context.Context, cfg *config.Config) (*Store, error) {
	switch cfg.Store.Driver {
	case "", config.DriverSQLite:
		path := cfg.Path(cfg.Store.Path)
		db, err := OpenStore(ctx, path)
		if err != nil {
			return nil, err
		}
		return &Store{
			Driver: config.DriverSQLite, SQLite: db, Where: path,
			Tasks: tasksqlite.New(db), Directory: dirsqlite.New(db),
			Grants: grantsqlite.New(db), Bindings: bindingsqlite.New(db),
			Chats: chatsqlite.New(db), ACC: accsqlite.New(db),
			OAN: oansqlite.New(db), SelfReg: selfregsqlite.New(db),
		}, nil
	case config.DriverPostgres:
		dsn, err := cfg.StoreDSN()
		if err != nil {
			return nil, err
		}
		db, err := pgstore.Open(ctx, dsn, pgMigrations...)
		if err != nil {
			return nil, scrubDSN(err, dsn)
		}
		return &Store{
			Driver: config.DriverPostgres, Postgres: db, Where: db.Where,
			Tasks: taskpg.New(db), Directory: dirpg.New(db),
			Grants: grantpg.New(db), Bindings: bindingpg.New(db),
			Chats: chatpg.New(db), ACC: accpg.New(db),
			OAN: oanpg.New(db), SelfReg: selfregpg.New(db),
		}, nil
	}
	return nil, fmt.Errorf("[store] driver %q is not sqlite or postgres", cfg.Store.Driver)
}

// scrubDSN is the last line of defence: pgstore never formats the DSN,
// and this removes the DSN and its password should a library error echo
// them.
func scrubDSN(err error, dsn string) error {
	r := backendkit.NewRedactor(nil)
	r.Add(dsn, pgstore.Password(dsn))
	if s := r.Scrub(err.Error()); s != err.Error() {
		return errors.New(s)
	}
	return err
}

// DSNSecrets returns the values of the configured DSN that the logger must
// scrub: the DSN and its password. None for the sqlite driver or an
// unreadable DSN.
func DSNSecrets(cfg *config.Config) []string {
	if cfg.Store.Driver != config.DriverPostgres {
		return nil
	}
	dsn, err := cfg.StoreDSN()
	if err != nil {
		return nil
	}
	out := []string{dsn}
	if pw := pgstore.Password(dsn); pw != "" {
		out = append(out, pw)
	}
	return out
}

// Close closes the database.
func (s *Store) Close() error {
	if s.Postgres != nil {
		return s.Postgres.Close()
	}
	return s.SQLite.Close()
}

// CheckWritable returns an error when the store cannot be written.
func (s *Store) CheckWritable(ctx context.Context) error {
	if s.Postgres != nil {
		return s.Postgres.CheckWritable(ctx)
	}
	return s.SQLite.CheckWritable(ctx)
}

// Ping checks that the database answers (the metrics' store check).
func (s *Store) Ping(ctx context.Context) error {
	if s.Postgres != nil {
		return s.Postgres.Ping(ctx)
	}
	return s.SQLite.Write.PingContext(ctx)
}

// TaskCounts reads the number of tasks in each state.
func (s *Store) TaskCounts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	const q = `SELECT state, count(*) FROM tasks GROUP BY state`
	if s.Postgres != nil {
		rows, err := s.Postgres.Pool.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				return nil, err
			}
			out[st] = n
		}
		return out, rows.Err()
	}
	rows, err := s.SQLite.Read.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}
