package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/store"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/sqlite"
)

// Store is the store the config selects ([store] driver), with one driver
// for each store interface (store.Drivers). Exactly one of SQLite and
// Postgres is set.
type Store struct {
	Driver   string     // config.DriverSQLite or config.DriverPostgres
	SQLite   *sqlite.DB // driver sqlite
	Postgres *pg.DB     // driver postgres
	// Where names the database for messages: the SQLite path, or
	// host:port/database; never a password.
	Where string
	store.Drivers
}

// OpenStores opens the configured store with its migrations applied: the
// SQLite file at [store] path, or the PostgreSQL database at the DSN read
// from [store] dsn_env or dsn_file. serve, host, doctor and the operator
// commands (admin, trust, connector, acc, oan) all open the store here, so
// whichever opens a database first gives it the whole schema. The DSN's
// password never appears in an error.
func OpenStores(ctx context.Context, cfg *config.Config) (*Store, error) {
	switch cfg.Store.Driver {
	case "", config.DriverSQLite:
		path := cfg.Path(cfg.Store.Path)
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			return nil, err
		}
		return &Store{Driver: config.DriverSQLite, SQLite: db, Where: path, Drivers: db.Drivers()}, nil
	case config.DriverPostgres:
		dsn, err := cfg.StoreDSN()
		if err != nil {
			return nil, err
		}
		db, err := pg.Open(ctx, dsn)
		if err != nil {
			return nil, scrubDSN(err, dsn)
		}
		return &Store{Driver: config.DriverPostgres, Postgres: db, Where: db.Where, Drivers: db.Drivers()}, nil
	}
	return nil, fmt.Errorf("[store] driver %q is not sqlite or postgres", cfg.Store.Driver)
}

// scrubDSN is the last line of defence: store/pg never formats the DSN,
// and this removes the DSN and its password should a library error echo
// them.
func scrubDSN(err error, dsn string) error {
	r := backendkit.NewRedactor(nil)
	r.Add(dsn, pg.Password(dsn))
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
	if pw := pg.Password(dsn); pw != "" {
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
	return s.SQLite.Ping(ctx)
}

// TaskCounts reads the number of tasks in each state.
func (s *Store) TaskCounts(ctx context.Context) (map[string]int, error) {
	if s.Postgres != nil {
		return s.Postgres.TaskCounts(ctx)
	}
	return s.SQLite.TaskCounts(ctx)
}

// OpenCluster starts the cluster's bus and leases on a PostgreSQL store
// (cluster mode and doctor's cluster check). The caller closes it.
func (s *Store) OpenCluster(ctx context.Context, log *slog.Logger) (*pg.Cluster, error) {
	if s.Postgres == nil {
		return nil, errors.New("cluster mode needs [store] driver = \"postgres\"")
	}
	return pg.OpenCluster(ctx, s.Postgres.Pool, log)
}
