package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// notifyMember is what one cluster member keeps of the directory and the
// grants: its own pool, bus, registry and grant table, watched as Run does.
type notifyMember struct {
	db     *pg.DB
	bus    *pg.Cluster
	reg    *directory.Registry
	grants *federation.GrantTable
	stop   func() // ends the change-notice subscription
}

func startNotifyMember(t *testing.T, dsn string, poll time.Duration) *notifyMember {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := pg.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	bus, err := pg.OpenCluster(ctx, db.Pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := directory.NewRegistry(ctx, pg.NewDirectory(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	grants, err := federation.NewGrantTable(ctx, pg.NewGrants(db))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { reg.Watch(ctx, poll); done <- struct{}{} }()
	go func() { grants.Watch(ctx, poll, nil); done <- struct{}{} }()
	m := &notifyMember{db: db, bus: bus, reg: reg, grants: grants,
		stop: onChangeNotice(bus, reg.Kick, grants.Kick)}
	t.Cleanup(func() {
		m.stop()
		cancel()
		<-done
		<-done
		bus.Close()
		db.Close()
	})
	return m
}

// A directory change and a grant committed through one member reach
// another member through NOTIFY, long before its poll (an hour here)
// could; with the notices lost, the poll still delivers them. The delays
// are logged (docs/cluster.md quotes them).
func TestClusterChangesPropagateByNotify(t *testing.T) {
	t.Parallel()
	srv := pgharness.Start(t)
	dsn := srv.NewDatabase(t)
	a := startNotifyMember(t, dsn, time.Hour)
	b := startNotifyMember(t, dsn, time.Hour)
	ctx := context.Background()

	activate := func(on *notifyMember, ep string) {
		t.Helper()
		m := taskstest.Manifest(ep, "1.0.0", taskstest.ToolSpec{Name: "echo"})
		if _, err := on.reg.Register(ctx, m.Canonical); err != nil {
			t.Fatal(err)
		}
		if err := on.reg.Activate(ctx, ep, "1.0.0", m.Hash); err != nil {
			t.Fatal(err)
		}
	}
	measure := func(what string, change func(), seen func() bool) time.Duration {
		t.Helper()
		change()
		t0 := time.Now() // committed: from here on it is propagation
		testkit.WaitFor(t, 20*time.Second, what, seen)
		d := time.Since(t0)
		t.Logf("%s: seen by the other member after %v", what, d.Round(time.Microsecond))
		return d
	}

	measure("activation by NOTIFY", func() { activate(a, "weather@agents.example.test") },
		func() bool { _, ok := b.reg.Active("weather@agents.example.test"); return ok })
	measure("grant by NOTIFY", func() {
		if err := pg.NewGrants(a.db).Grant(ctx, federation.Grant{Principal: "b.test", Endpoint: "weather@agents.example.test", Scope: federation.ScopeInvocation}); err != nil {
			t.Fatal(err)
		}
	}, func() bool {
		return b.grants.Granted("bob@b.test", "weather@agents.example.test", federation.ScopeInvocation)
	})

	// Notices lost: a third member that does not listen, polling every
	// 250 ms as Run does, still sees the next change.
	c := startNotifyMember(t, dsn, 250*time.Millisecond)
	c.stop()
	measure("activation by the poll (notice lost)", func() { activate(a, "news@agents.example.test") },
		func() bool { _, ok := c.reg.Active("news@agents.example.test"); return ok })
	if !c.grants.Granted("bob@b.test", "weather@agents.example.test", federation.ScopeInvocation) {
		t.Fatal("the third member did not load the grant")
	}
	measure("revocation by the poll (notice lost)", func() {
		if _, err := pg.NewGrants(a.db).Revoke(ctx, "b.test", "weather@agents.example.test", federation.ScopeInvocation); err != nil {
			t.Fatal(err)
		}
	}, func() bool {
		return !c.grants.Granted("bob@b.test", "weather@agents.example.test", federation.ScopeInvocation)
	})
}
