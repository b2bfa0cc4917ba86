package crash

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// TestCrashKill9AfterAdmitStart kills `agentgw serve` (SIGKILL) the moment
// an <accepted/> arrives, on SQLite and on PostgreSQL. With the backend's
// slot free the task was admitted and moved to running in that one commit,
// so the restart finds it running and settles it failed
// agentgw:interrupted (revision 2, retryable) and never calls the backend
// for it again. With the slot taken the admission committed the task
// accepted, alone: the restart dispatches it and it runs once. The backend
// (testdata/cluster/countmcp.py) logs every call, so the test counts them.
func TestCrashKill9AfterAdmitStart(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) { admitStartCrash(t, driver) })
	}
}

func admitStartCrash(t *testing.T, driver string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "executions.log")
	// One slot per backend: the first task takes it, the second waits.
	toml := fmt.Sprintf(`
[tasks]
max_running_per_backend = 1

[[agents]]
jid = "work@%s"
[agents.mcp]
command = [%q, %q, %q, "gw"]
`, srv.ComponentDomain, e2e.SystemPython, filepath.Join(root, "testdata", "cluster", "countmcp.py"), calls)
	o := e2e.Options{Server: srv, Users: []string{"alice"}, TOML: toml}
	if driver == "postgres" {
		o.PostgresDSN, o.Instance = pgharness.Start(t).NewDatabase(t), "gw-pg-1"
	}
	e := e2e.Prepare(t, o)
	ep := e.Endpoint("work")
	// stored reads one value from the store the driver keeps (between
	// the gateways' lives: after the kill, before the restart).
	stored := func(q string, args ...any) string {
		t.Helper()
		var n string
		if driver == "postgres" {
			conn, err := pgx.Connect(ctx, o.PostgresDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if err := conn.QueryRow(ctx, strings.ReplaceAll(q, "?", "$1"), args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		db, err := sql.Open("sqlite3", "file:"+filepath.Join(e.Dir, "agentgw.db")+"?mode=ro&_busy_timeout=10000")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	c.Retries = 0
	c.IQTimeout = 10 * time.Second
	executions := func(n int) int {
		data, _ := os.ReadFile(calls)
		k := 0
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == strconv.Itoa(n) {
				k++
			}
		}
		return k
	}
	invoke := func(p *agentclient.Pinned, n, ms int) *agentclient.Accepted {
		t.Helper()
		args, err := p.ValidateArguments(json.RawMessage(fmt.Sprintf(`{"n":%d,"ms":%d}`, n, ms)))
		if err != nil {
			t.Fatal(err)
		}
		acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: "work", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: args})
		if err != nil {
			t.Fatalf("invoke %d: %v", n, err)
		}
		return acc
	}
	// crash sends SIGKILL at once (Proc.Kill first walks /proc for the
	// backends, which gives the old commit-after-commit dispatch time to
	// land), then kills the backends the gateway had spawned.
	crash := func(gw *e2e.Proc, kids []int) {
		t.Helper()
		_ = gw.Cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-gw.Exited():
		case <-time.After(10 * time.Second):
			t.Fatalf("agentgw %d did not exit after SIGKILL", gw.PID())
		}
		e2e.KillAll(kids)
	}
	restart := func(name string) *e2e.Proc {
		t.Helper()
		gw := e.Serve(name)
		gw.WaitLog("published MCP manifest", 60*time.Second)
		return gw
	}
	settled := func(id string) *agentclient.TaskState {
		t.Helper()
		var st *agentclient.TaskState
		testkit.WaitFor(t, 60*time.Second, "task "+id+" to settle", func() bool {
			s, err := c.State(ctx, ep, id)
			if err == nil && (s.State == "completed" || s.State == "failed" || s.State == "cancelled") {
				st = s
				return true
			}
			return false
		})
		return st
	}
	wantInterrupted := func(what string, id string) {
		t.Helper()
		st := settled(id)
		res, err := c.Result(ctx, ep, id)
		if err != nil {
			t.Fatalf("%s: task-result: %v", what, err)
		}
		var f struct {
			Error struct {
				Code      string `json:"code"`
				Retryable bool   `json:"retryable"`
			} `json:"error"`
		}
		_ = json.Unmarshal(res.Payload, &f)
		// Revision 1 (running) was committed before the kill, with the
		// acceptance; recovery added exactly the failed revision.
		if st.State != "failed" || st.Revision != 2 || f.Error.Code != "agentgw:interrupted" || !f.Error.Retryable {
			t.Errorf("%s: %s@%d %s after the restart, want failed@2 agentgw:interrupted retryable", what, st.State, st.Revision, res.Payload)
		}
	}

	// 1. Free slot: killed as the <accepted/> arrives.
	gw := restart("gw1")
	p := e2e.WaitPinned(t, ctx, c, ep, "work")
	kids := e2e.Descendants(gw.PID())
	a := invoke(p, 1, 600000)
	crash(gw, kids)
	// The <accepted/> followed the commit that started the task.
	if st := stored(`SELECT state || '@' || CAST(revision AS TEXT) FROM tasks WHERE id = ?`, a.TaskID); st != "running@1" {
		t.Errorf("task 1 at the kill: %s, want running@1 (admitted and started in one commit)", st)
	}
	gw = restart("gw2")
	wantInterrupted("free-slot task", a.TaskID)

	// 2. The slot taken by b: c waits accepted; killed as its <accepted/>
	// arrives.
	p = e2e.WaitPinned(t, ctx, c, ep, "work")
	b := invoke(p, 2, 600000)
	testkit.WaitFor(t, 60*time.Second, "the backend to be called for task 2", func() bool { return executions(2) == 1 })
	kids = e2e.Descendants(gw.PID())
	cTask := invoke(p, 3, 50)
	crash(gw, kids)
	if st := stored(`SELECT state || '@' || CAST(revision AS TEXT) FROM tasks WHERE id = ?`, cTask.TaskID); st != "accepted@0" {
		t.Errorf("task 3 at the kill, with the slot taken: %s, want accepted@0", st)
	}
	gw = restart("gw3")
	wantInterrupted("slot-holding task", b.TaskID)
	if st := settled(cTask.TaskID); st.State != "completed" || st.Revision != 2 {
		t.Errorf("waiting task: %s@%d after the restart, want completed@2 (dispatched once)", st.State, st.Revision)
	}

	// A last call through the restarted gateway: by its result every call
	// the backend got is in the log.
	p = e2e.WaitPinned(t, ctx, c, ep, "work")
	d := invoke(p, 4, 0)
	if st := settled(d.TaskID); st.State != "completed" {
		t.Errorf("task 4: %s", st.State)
	}
	if n := executions(1); n > 1 {
		t.Errorf("the backend ran task 1 %d times, want at most once", n)
	}
	if n := executions(2); n != 1 {
		t.Errorf("the backend ran task 2 %d times, want once", n)
	}
	if n := executions(3); n != 1 {
		t.Errorf("the backend ran task 3 %d times, want once (after the restart)", n)
	}
	if n := stored(`SELECT CAST(count(*) AS TEXT) FROM tasks`); n != "4" {
		t.Errorf("%s tasks in the %s store, want 4", n, driver)
	}
	if t.Failed() {
		t.Logf("last gateway log (tail):\n%s", e2e.Tail(gw.Log(), 3000))
	}
}
