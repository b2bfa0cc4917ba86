package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// TestPostgresServeInvokeReplayRestart runs `agentgw serve` with [store]
// driver = "postgres" on a private PostgreSQL, behind a real Prosody, with
// the real MCP server-everything: an invoke runs to its result, a replay of
// its request-id returns the same task, and after a kill -9 the restarted
// gateway settles the tasks that were running as agentgw:interrupted and
// dispatches a task that was still accepted — the restart recovery of the
// SQLite store, on the PostgreSQL driver.
func TestPostgresServeInvokeReplayRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg := pgharness.Start(t)
	dsn := strings.Replace(pg.NewDatabase(t), pgharness.User+"@", pgharness.User+":"+e2e.PgDSNPassword+"@", 1)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"}, PostgresDSN: dsn, Instance: "gw-pg-1",
		TOML: e2e.EverythingTOML(t, "everything", srv.ComponentDomain)})
	ep := e.Endpoint("everything")
	gw1 := e.Serve("gw1")
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	c.Retries = 0
	c.IQTimeout = 10 * time.Second

	// Invoke, then replay the same request-id.
	echo := e2e.WaitPinned(t, ctx, c, ep, "echo")
	reqID := ids.New("req-")
	out, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"hello postgres"}`), agentclient.CallOptions{RequestID: reqID})
	if err != nil || out.State != "completed" || !strings.Contains(string(out.Payload), "hello postgres") {
		t.Fatalf("echo: %+v %v", out, err)
	}
	args, _ := echo.ValidateArguments(json.RawMessage(`{"message":"hello postgres"}`))
	again, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{RequestID: reqID, Tool: "echo",
		Version: echo.Manifest.Version, ManifestHash: echo.Manifest.Hash, Arguments: args})
	if err != nil || again.TaskID != out.Accepted.TaskID {
		t.Fatalf("replay: %+v %v; want task %s", again, err, out.Accepted.TaskID)
	}

	// Long tasks, running at the crash.
	long := e2e.WaitPinned(t, ctx, c, ep, e2e.CrashTool)
	largs, err := long.ValidateArguments(json.RawMessage(`{"duration":60,"steps":30}`))
	if err != nil {
		t.Fatal(err)
	}
	var running []*agentclient.Accepted
	for range 3 {
		acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: e2e.CrashTool, Version: long.Manifest.Version,
			ManifestHash: long.Manifest.Hash, Arguments: largs})
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, acc)
	}
	for _, acc := range running {
		testkit.WaitFor(t, 30*time.Second, "task "+acc.TaskID+" to run", func() bool {
			st, err := c.State(ctx, ep, acc.TaskID)
			return err == nil && st.State == "running"
		})
	}
	gw1.Kill()

	// A task still accepted at the crash: a copy of one row, never
	// dispatched, written while no gateway runs.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	clone := ids.New("task-")
	now := time.Now().UnixNano()
	if _, err := conn.Exec(ctx, `INSERT INTO tasks (id, caller, route, endpoint, request_id, tool, api_version,
		manifest_hash, arguments, fingerprint, deadline, deadline_ns, state, revision, dispatched, created_ns,
		updated_ns, retain_until_ns, purge_after_ns, delegation_depth)
		SELECT $1, caller, route, endpoint, $2, tool, api_version, manifest_hash, arguments, fingerprint, deadline,
		deadline_ns, 'accepted', 0, false, $3, $3, retain_until_ns, purge_after_ns, delegation_depth
		FROM tasks WHERE id = $4`, clone, ids.New("req-"), now, running[0].TaskID); err != nil {
		t.Fatal(err)
	}

	gw2 := e.Serve("gw2")
	gw2.WaitLog("published MCP manifest", 60*time.Second)
	for _, acc := range running {
		var res *agentclient.TaskResult
		testkit.WaitFor(t, 30*time.Second, "task "+acc.TaskID+" to settle", func() bool {
			res, err = c.Result(ctx, ep, acc.TaskID)
			return err == nil
		})
		if res.State != "failed" || !strings.Contains(string(res.Payload), "agentgw:interrupted") {
			t.Errorf("task %s, running at the crash: %s %s", acc.TaskID, res.State, res.Payload)
		}
	}
	testkit.WaitFor(t, 30*time.Second, "the accepted task to be dispatched", func() bool {
		st, err := c.State(ctx, ep, clone)
		return err == nil && (st.State == "running" || st.State == "completed")
	})
	// The replay record survived the restart: the same request is the
	// same task, stored once.
	again, err = c.Invoke(ctx, ep, &agentclient.InvokeRequest{RequestID: reqID, Tool: "echo",
		Version: echo.Manifest.Version, ManifestHash: echo.Manifest.Hash, Arguments: args})
	if err != nil || again.TaskID != out.Accepted.TaskID {
		t.Fatalf("replay after the restart: %+v %v", again, err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE request_id = $1`, reqID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows for the request, %v", n, err)
	}
	// Revisions are gap-free for every task.
	var gaps int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM tasks t WHERE t.revision <> (SELECT count(*) FROM task_events e WHERE e.task_id = t.id)`).Scan(&gaps); err != nil || gaps != 0 {
		t.Errorf("%d tasks whose events do not cover every revision, %v", gaps, err)
	}
	for _, p := range []*e2e.Proc{gw1, gw2} {
		log := p.Log()
		if strings.Contains(log, e2e.PgDSNPassword) {
			t.Errorf("the DSN password is in the gateway log")
		}
		if !strings.Contains(log, "store_driver=postgres") || !strings.Contains(log, "instance=gw-pg-1") {
			t.Errorf("the start line does not name the driver and instance:\n%s", e2e.Tail(log, 2000))
		}
	}
	if t.Failed() {
		t.Logf("gw2 log:\n%s", e2e.Tail(gw2.Log(), 3000))
	}
}

// TestPostgresOutage: the database dies under a running gateway. An
// invoke during the outage is refused with an error — never accepted —
// and once PostgreSQL is back (same data, same port) the pool reconnects
// by itself: a replay of that request-id is admitted as one task and runs,
// and a task completed before the crash is still there.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg := pgharness.Start(t)
	dsn := pg.NewDatabase(t)
	e := e2e.Start(t, e2e.Options{Users: []string{"alice"}, Agents: []e2e.Agent{{Localpart: "weather"}}, PostgresDSN: dsn})
	c := e.Dial("alice")
	c.Retries = 0
	c.IQTimeout = 10 * time.Second
	ep := e.Endpoint("weather")
	before, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"before"}`), agentclient.CallOptions{})
	if err != nil || before.State != "completed" {
		t.Fatalf("echo before the outage: %+v %v", before, err)
	}
	p, err := c.Pin(ctx, ep, "echo")
	if err != nil {
		t.Fatal(err)
	}
	args, _ := p.ValidateArguments(json.RawMessage(`{"message":"during"}`))
	req := &agentclient.InvokeRequest{RequestID: ids.New("req-"), Tool: "echo", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: args}

	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	if acc, err := c.Invoke(ctx, ep, req); err == nil {
		t.Fatalf("an invoke was accepted while the database was down: %+v", acc)
	} else {
		t.Logf("invoke during the outage: %v", err)
	}
	if err := e.Gateway.Store.Ping(ctx); err == nil {
		t.Error("the store check passes while the database is down")
	}

	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The caller replays the same request-id, as after any error or
	// timeout; the first attempts may meet connections the crash broke.
	var acc *agentclient.Accepted
	testkit.WaitFor(t, 30*time.Second, "an admission after the database is back", func() bool {
		acc, err = c.Invoke(ctx, ep, req)
		return err == nil
	})
	out, err := c.Follow(ctx, ep, acc, agentclient.CallOptions{})
	if err != nil || out.State != "completed" || !strings.Contains(string(out.Payload), "during") {
		t.Fatalf("the replayed invoke: %+v %v", out, err)
	}
	if res, err := c.Result(ctx, ep, before.Accepted.TaskID); err != nil || res.State != "completed" {
		t.Fatalf("the task completed before the crash: %+v %v", res, err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE request_id = $1`, req.RequestID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d tasks for the replayed request, %v", n, err)
	}
	if err := e.Gateway.Store.Ping(ctx); err != nil {
		t.Errorf("the store check after the outage: %v", err)
	}
}
