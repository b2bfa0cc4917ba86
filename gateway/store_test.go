package gateway

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// legacyNames are the migrations a database made before the sets moved
// beside their drivers has recorded.
var legacyNames = []string{
	"migrations/0000_base.sql",
	"migrations/0001_directory.sql",
	"migrations/0002_tasks.sql",
	"migrations/0003_federation.sql",
	"migrations/0004_connector.sql",
	"migrations/0005_delegation_depth.sql",
}

// A database written by the release whose migrations all lived in
// internal/store (testdata/legacy-daca2f5.go.txt made it) opens without
// applying anything again, and every store reads and writes it.
func TestLegacyDatabaseOpensAndWorks(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile("testdata/legacy-daca2f5.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agentgw.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("the old database does not open: %v", err)
	}
	defer db.Close()
	if err := db.CheckWritable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	names, err := db.Applied(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every legacy migration once, then only migrations newer than them
	// (added since, e.g. 0021_selfreg.sql), each applied once.
	if len(names) < len(legacyNames) || !slices.Equal(names[:len(legacyNames)], legacyNames) {
		t.Fatalf("schema_migrations = %q, want %q first", names, legacyNames)
	}
	for i, n := range names[len(legacyNames):] {
		if n <= legacyNames[len(legacyNames)-1] || (i > 0 && n <= names[len(legacyNames)+i-1]) {
			t.Fatalf("schema_migrations = %q: %s is not a newer migration applied once", names, n)
		}
	}

	// Directory: the registered, active manifest loads; a new version
	// registers and activates.
	reg, err := directory.NewRegistry(ctx, sqlite.NewDirectory(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	const weather = "weather@agents.example.test"
	m, ok := reg.Active(weather)
	if !ok || m.Version != "1.4.0" {
		t.Fatalf("active weather manifest: %v %v", m, ok)
	}
	doc := `{"agent":{"jid":"weather@agents.example.test","name":"weather","version":"1.5.0"},"manifestSpecVersion":"0","tools":[]}`
	m2, err := reg.Register(ctx, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Activate(ctx, weather, m2.Version, m2.Hash); err != nil {
		t.Fatal(err)
	}

	// Grants: the stored grant is listed; a new one is stored.
	grants := sqlite.NewGrants(db)
	gs, err := grants.List(ctx)
	if err != nil || len(gs) != 1 || gs[0].Principal != "remote.example" || gs[0].Endpoint != weather ||
		gs[0].Scope != federation.ScopeVisibility|federation.ScopeInvocation {
		t.Fatalf("grants = %+v, %v", gs, err)
	}
	if err := grants.Grant(ctx, federation.Grant{Principal: "other.example", Scope: federation.ScopeVisibility}); err != nil {
		t.Fatal(err)
	}

	// Connector bindings: the authenticated binding reads back; a new
	// channel moves its generation.
	bindings := sqlite.NewBindings(db)
	b, err := bindings.Binding(ctx, "im@agents.example.test", "im.example")
	if err != nil || b.ConnectorID != "conn_1" || b.ChannelID != "cch_1" || !b.Authenticated || b.Generation != 1 {
		t.Fatalf("binding = %+v, %v", b, err)
	}
	if g, err := bindings.SetChannel(ctx, "im@agents.example.test", "im.example", "cch_2", true); err != nil || g != 2 {
		t.Fatalf("set channel: %d %v", g, err)
	}

	// Tasks: the running task with its delegation depth and event reads
	// back, settles, and pins its version.
	tdb := sqlite.NewTasks(db)
	task, err := tdb.Task(ctx, "task-legacyfixture0000000001")
	if err != nil || task == nil || task.State != agentproto.StateRunning || task.Revision != 1 || task.DelegationDepth != 1 || task.APIVersion != "1.4.0" {
		t.Fatalf("task = %+v, %v", task, err)
	}
	if evs, err := tdb.Events(ctx, task.ID); err != nil || len(evs) != 1 || evs[0].Type != "status" {
		t.Fatalf("events = %+v, %v", evs, err)
	}
	if ref, err := tdb.VersionReferenced(ctx, weather, "1.4.0"); err != nil || !ref {
		t.Fatalf("version referenced: %v %v", ref, err)
	}
	tx, err := tdb.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := *task
	done.State, done.Revision, done.Result, done.Updated = agentproto.StateCompleted, 2, []byte(`{}`), time.Now()
	if ok, err := tx.UpdateTask(&done, 1, agentproto.StateRunning); err != nil || !ok {
		t.Fatalf("settle: %v %v", ok, err)
	}
	if err := tx.AppendEvent(&taskdb.Event{TaskID: task.ID, Revision: 2, EventID: "evt-legacyfixture000000002", Type: "completed", Payload: []byte(`{}`), Created: done.Updated}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
