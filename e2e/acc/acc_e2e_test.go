package acc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// prepareACC writes the config, runs acc init and enroll, and returns the
// connector's directory.
func prepareACC(t *testing.T) (*e2e.Env, string) {
	t.Helper()
	return prepareACCOn(t, e2e.Options{})
}

// prepareACCOn is prepareACC with o's store (PostgresDSN, Instance).
func prepareACCOn(t *testing.T, o e2e.Options) (*e2e.Env, string) {
	t.Helper()
	srv := e2e.StartServer(t, false)
	o.Server, o.Users, o.TOML = srv, []string{"alice"}, e2e.AccTOML(e2e.FreePort(t), srv.ComponentDomain)
	e := e2e.Prepare(t, o)
	out := e.Agentgw(0, "acc", "init", "--config", e.ConfigPath)
	if !strings.Contains(out, "jwt.key") || !strings.Contains(out, "ca.crt") {
		t.Fatalf("acc init wrote: %s", out)
	}
	if out := e.Agentgw(0, "acc", "init", "--config", e.ConfigPath); !strings.Contains(out, "nothing written") {
		t.Fatalf("a second acc init: %s", out)
	}
	dir := filepath.Join(e.Dir, "farm-conn")
	id := strings.TrimSpace(e.Agentgw(0, "acc", "enroll", "--config", e.ConfigPath, "--name", "farm", "--out", dir))
	tok, _ := os.ReadFile(filepath.Join(dir, "token.jwt"))
	if len(id) != 36 || strings.Contains(id, strings.TrimSpace(string(tok))) {
		t.Fatalf("acc enroll printed %q", id)
	}
	for _, f := range []string{"ca.crt", "client.crt", "client.key", "token.jwt", "connector.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("enroll did not write %s", f)
		}
	}
	e.Agentgw(1, "acc", "enroll", "--config", e.ConfigPath, "--name", "farm", "--out", filepath.Join(e.Dir, "again"))
	if out := e.Agentgw(0, "acc", "list", "--config", e.ConfigPath); !strings.Contains(out, "farm\t"+id+"\tenrolled") {
		t.Fatalf("acc list: %s", out)
	}
	return e, dir
}

func waitPublished(t *testing.T, e *e2e.Env, ep string) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, "the ACC agent's manifest", func() bool {
		_, ok := e.Gateway.Registry.Active(ep)
		return ok
	})
}

// startRun invokes run with goal and returns the task id once it runs.
func startRun(t *testing.T, ctx context.Context, c *agentclient.Client, ep string, goal string) (string, chan *agentclient.Outcome) {
	t.Helper()
	accepted := make(chan string, 1)
	progressed := make(chan struct{}, 1)
	done := make(chan *agentclient.Outcome, 1)
	args, _ := json.Marshal(map[string]string{"goal": goal})
	go func() {
		out, _ := c.Call(ctx, e2e.MustJID(ep), "run", args, agentclient.CallOptions{
			OnAccepted: func(a *agentclient.Accepted) { accepted <- a.TaskID },
			OnProgress: func(agentclient.Progress) {
				select {
				case progressed <- struct{}{}:
				default:
				}
			},
		})
		done <- out
	}()
	var id string
	select {
	case id = <-accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("run not accepted")
	}
	select {
	case <-progressed:
	case <-time.After(30 * time.Second):
		t.Fatal("run never accepted by the connector")
	}
	return id, done
}

func cancelTask(t *testing.T, ctx context.Context, c *agentclient.Client, ep, id string) {
	t.Helper()
	st, err := c.State(ctx, e2e.MustJID(ep), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, e2e.MustJID(ep), id, st.Revision, nil); err != nil {
		t.Fatal(err)
	}
}

func outcomeOf(t *testing.T, done chan *agentclient.Outcome) *agentclient.Outcome {
	t.Helper()
	select {
	case out := <-done:
		if out == nil {
			t.Fatal("the call ended without an outcome")
		}
		return out
	case <-time.After(60 * time.Second):
		t.Fatal("no outcome")
	}
	return nil
}

// TestACCThroughProsody: enroll → connect → discover → runs with progress,
// approvals, cancellation, deadlines and every error code (slixmpp as the
// caller); then connector restarts within and after the grace period,
// heartbeat loss as presence, and revocation.
func TestACCThroughProsody(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	e, dir := prepareACC(t)
	e.StartGateway()
	ep := "hermes@" + e.Domain
	conn := e2e.StartRefConnector(t, dir, "--heartbeat", "500ms")
	waitPublished(t, e, ep)

	checks := e2e.RunSlixmpp(t, e, "acc.py", "alice", "--endpoint", ep, "--mode", "presence", "--want", "available")
	e2e.RequireChecks(t, checks, "acc-presence")
	checks = e2e.RunSlixmpp(t, e, "acc.py", "alice", "--endpoint", ep, "--approval-seconds", "3")
	e2e.RequireChecks(t, checks, "acc-manifest", "acc-run-progress-completed", "acc-undeclared-tool", "acc-approve", "acc-deny",
		"acc-approval-expiry", "acc-cancel-confirmed", "acc-cancel-ignored", "acc-deadline", "acc-error-codes", "acc-retries")

	// Chat (Human Messaging): the message is the goal, the completion the reply.
	checks = e2e.RunSlixmpp(t, e, "acc.py", "alice", "--endpoint", ep, "--mode", "chat")
	e2e.RequireChecks(t, checks, "acc-chat")

	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// Connector restart within the grace period: the run resumes.
	id, done := startRun(t, ctx, c, ep, "hang")
	runID := conn.RunIDs("create_run")
	conn.Kill()
	conn = e2e.StartRefConnector(t, dir, "--heartbeat", "500ms")
	testkit.WaitFor(t, 20*time.Second, "the connector back", func() bool { return conn.Got("connected", "") == 1 })
	// Cancel once the run is on the new connection, not after a fixed
	// 500 ms a loaded machine can miss.
	resumed := runID[len(runID)-1]
	testkit.WaitFor(t, 20*time.Second, "the run to continue on the new connection", func() bool {
		for _, line := range strings.Split(e.Log.String(), "\n") {
			if strings.Contains(line, "the run continues") && strings.Contains(line, resumed) {
				return true
			}
		}
		return false
	})
	cancelTask(t, ctx, c, ep, id)
	out := outcomeOf(t, done)
	if out.State != agentproto.StateCancelled || !strings.Contains(string(out.Payload), "confirmed") {
		t.Fatalf("run across a restart within grace: %s %s", out.State, out.Payload)
	}
	last := runID[len(runID)-1]
	if conn.Got("cancel_run", last) != 1 {
		t.Fatalf("cancel_run for the resumed run %s did not reach the new connection:\n%s", last, conn.Out.String())
	}

	// After the grace period: the run fails unavailable, and the returning
	// connector is sent cancel_run for it.
	id, done = startRun(t, ctx, c, ep, "hang")
	ids := conn.RunIDs("create_run")
	orphan := ids[len(ids)-1]
	conn.Kill()
	out = outcomeOf(t, done)
	if out.State != agentproto.StateFailed || !strings.Contains(string(out.Payload), `"unavailable"`) {
		t.Fatalf("run after the grace period: %s %s", out.State, out.Payload)
	}
	conn = e2e.StartRefConnector(t, dir, "--heartbeat", "500ms")
	testkit.WaitFor(t, 20*time.Second, "cancel_run for the orphaned run", func() bool { return conn.Got("cancel_run", orphan) == 1 })
	_ = id

	// Heartbeat loss: degraded after 3 missed, unavailable after 10.
	conn.Kill()
	conn = e2e.StartRefConnector(t, dir, "--heartbeat", "500ms", "--once")
	testkit.WaitFor(t, 20*time.Second, "the connector back", func() bool { return conn.Got("connected", "") == 1 })
	time.Sleep(500 * time.Millisecond)
	_, done = startRun(t, ctx, c, ep, "stop-heartbeats")
	checks = e2e.RunSlixmpp(t, e, "acc.py", "alice", "--endpoint", ep, "--mode", "presence", "--want", "degraded")
	if st, _ := checks[0]["status"].(string); !strings.Contains(st, "heartbeat") {
		t.Fatalf("degraded status %q", st)
	}
	e2e.RunSlixmpp(t, e, "acc.py", "alice", "--endpoint", ep, "--mode", "presence", "--want", "unavailable")
	out = outcomeOf(t, done)
	if out.State != agentproto.StateFailed {
		t.Fatalf("run of a connector that stopped heartbeating: %s %s", out.State, out.Payload)
	}

	// Revocation closes the live socket at once and keeps it out.
	conn.Kill()
	conn = e2e.StartRefConnector(t, dir, "--heartbeat", "500ms")
	testkit.WaitFor(t, 20*time.Second, "the connector back", func() bool { return conn.Got("connected", "") == 1 })
	e2e.RunSlixmpp(t, e, "acc.py", "alice", "--endpoint", ep, "--mode", "presence", "--want", "available")
	e.Agentgw(0, "acc", "revoke", "--config", e.ConfigPath, "farm")
	testkit.WaitFor(t, 5*time.Second, "the revoked connection closed", func() bool {
		return strings.Contains(conn.Out.String(), "revoked")
	})
	e2e.RunSlixmpp(t, e, "acc.py", "alice", "--endpoint", ep, "--mode", "presence", "--want", "unavailable")
	if out := e.Agentgw(0, "acc", "list", "--config", e.ConfigPath); !strings.Contains(out, "revoked") {
		t.Fatalf("acc list after revoke: %s", out)
	}
	// The connector keeps reconnecting (1 s, 2 s, … backoff); each try is refused.
	testkit.WaitFor(t, 15*time.Second, "the revoked connector's reconnect refused", func() bool {
		return strings.Contains(e.Log.String(), "acc connection refused")
	})
}

// TestACCGatewayKill9: a gateway killed mid-run settles the run's task
// agentgw:interrupted after its restart, and sends cancel_run for the run
// when the connector comes back; the task never creates a second run.
func TestACCGatewayKill9(t *testing.T) {
	t.Parallel()
	e, dir := prepareACC(t)
	accKill9(t, e, dir)
}

// accKill9 is TestACCGatewayKill9 on a prepared environment.
func accKill9(t *testing.T, e *e2e.Env, dir string) {
	ep := "hermes@" + e.Domain
	gw := e.Serve("gw1")
	conn := e2e.StartRefConnector(t, dir, "--heartbeat", "500ms")
	gw.WaitLog("acc: published agent version", 30*time.Second)
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id, _ := startRun(t, ctx, c, ep, "hang")
	runs := conn.RunIDs("create_run")
	if len(runs) != 1 {
		t.Fatalf("create_run %d times", len(runs))
	}
	gw.Kill()
	gw2 := e.Serve("gw2")
	gw2.WaitLog("acc connector registered", 60*time.Second)
	testkit.WaitFor(t, 30*time.Second, "cancel_run for the interrupted run", func() bool { return conn.Got("cancel_run", runs[0]) == 1 })
	c = e.Dial("alice")
	st, err := c.State(ctx, e2e.MustJID(ep), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != agentproto.StateFailed {
		t.Fatalf("task after kill -9: %s", st.State)
	}
	res, err := c.Result(ctx, e2e.MustJID(ep), id)
	if err != nil || !strings.Contains(string(res.Payload), agentproto.CodeInterrupted) {
		t.Fatalf("result after kill -9: %v %+v", err, res)
	}
	if n := len(conn.RunIDs("create_run")); n != 1 {
		t.Fatalf("create_run sent %d times for one task", n)
	}
}
