package gateway

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func pgConfig(t *testing.T, dsn string) *config.Config {
	t.Helper()
	t.Setenv("AGENTGW_TEST_STORE_DSN", dsn)
	return &config.Config{Store: config.Store{Driver: config.DriverPostgres, DSNEnv: "AGENTGW_TEST_STORE_DSN"}}
}

// Gateway instances (and operator commands) that start together on one
// fresh PostgreSQL database all open it, the whole schema is applied
// exactly once, and a write through one is read through another.
func TestOpenStoresPostgresConcurrentStart(t *testing.T) {
	srv := pgharness.Start(t)
	cfg := pgConfig(t, srv.NewDatabase(t))
	ctx := context.Background()
	const n = 4
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stores[i], errs[i] = OpenStores(ctx, cfg)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		defer stores[i].Close()
		if stores[i].Driver != config.DriverPostgres || stores[i].SQLite != nil || stores[i].Postgres == nil {
			t.Fatalf("instance %d opened %+v", i, stores[i])
		}
	}
	applied, err := stores[0].Postgres.Applied(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every file of the migrations folder, once each.
	want, err := fs.Glob(pg.Migrations.FS, "migrations/*.sql")
	if err != nil || len(want) == 0 || want[0] != "migrations/0000_base.sql" {
		t.Fatalf("migrations: %v %v", want, err)
	}
	slices.Sort(want)
	if !slices.Equal(applied, want) {
		t.Fatalf("applied %q, want %q", applied, want)
	}
	if err := stores[1].CheckWritable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stores[1].Grants.Grant(ctx, federation.Grant{Principal: "a.test", Scope: federation.ScopeVisibility}); err != nil {
		t.Fatal(err)
	}
	if gs, err := stores[3].Grants.List(ctx); err != nil || len(gs) != 1 || gs[0].Principal != "a.test" {
		t.Fatalf("grants through another instance: %+v %v", gs, err)
	}
	if counts, err := stores[2].TaskCounts(ctx); err != nil || len(counts) != 0 {
		t.Fatalf("task counts: %v %v", counts, err)
	}
}

// A refused connection names the database, never the password, and the
// sqlite default is unchanged.
func TestOpenStoresSelection(t *testing.T) {
	srv := pgharness.Start(t)
	const pw = "store-selection-Pa55"
	dsn := strings.Replace(srv.URL("no_such_db"), pgharness.User+"@", pgharness.User+":"+pw+"@", 1)
	_, err := OpenStores(context.Background(), pgConfig(t, dsn))
	if err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), srv.Addr+"/no_such_db") {
		t.Fatalf("open: %v", err)
	}
	if got := DSNSecrets(pgConfig(t, dsn)); len(got) != 2 || got[0] != dsn || got[1] != pw {
		t.Fatalf("DSNSecrets = %q", got)
	}
	cfg := &config.Config{Dir: t.TempDir(), Store: config.Store{Path: "agentgw.db"}}
	st, err := OpenStores(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Driver != config.DriverSQLite || st.SQLite == nil || st.Where != cfg.Dir+"/agentgw.db" {
		t.Fatalf("default store: %+v", st)
	}
	if DSNSecrets(cfg) != nil {
		t.Fatal("DSN secrets for sqlite")
	}
}
