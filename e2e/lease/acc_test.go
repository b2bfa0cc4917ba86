package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// accLease is the lease the agent-control-center listener is held under.
const accLease = "acc:listener"

// TestLeaseACCListener: three members share one [acc] listen address,
// which only the holder of the listener's lease binds (a floating address
// in production; here the same loopback port). Runs admitted on any
// member reach the connector through the holder and complete; kill -9 of
// the holder mid-run: a survivor takes the lease and binds the address,
// the connector reconnects there, the interrupted run's task ends
// agentgw:interrupted and the connector gets cancel_run for it
// (docs/acc-bridge.md, "gateway restarted mid-run"), and new runs
// complete.
//
// Before the fix every member ran its own listener (here: the second and
// third could not bind), so runs admitted on a member without the
// connection failed unavailable.
func TestLeaseACCListener(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	port := e2e.FreePort(t)
	l := newLeaseEnv(t, []string{"alice"}, func(domain, _ string) string { return e2e.AccTOML(port, domain) })
	e := l.e
	e.Agentgw(0, "acc", "init", "--config", e.ConfigPath)
	dir := filepath.Join(e.Dir, "farm-conn")
	e.Agentgw(0, "acc", "enroll", "--config", e.ConfigPath, "--name", "farm", "--out", dir)
	for _, n := range []string{"gw-1", "gw-2", "gw-3"} {
		l.serve(n)
	}
	conn := e2e.StartRefConnector(t, dir, "--heartbeat", "500ms")
	ep := "hermes@" + e.Domain
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e2e.WaitPinned(t, ctx, c, e2e.MustJID(ep), "run")

	run := func(goal string) *agentclient.Outcome {
		args, _ := json.Marshal(map[string]string{"goal": goal})
		out, err := c.Call(ctx, e2e.MustJID(ep), "run", args, agentclient.CallOptions{})
		if err != nil {
			t.Fatalf("run %q: %v", goal, err)
		}
		return out
	}
	// Runs spread over the members by ejabberd: every one completes.
	const n = 9
	completed := 0
	var fails []string
	for i := range n {
		out := run(fmt.Sprintf("echo r%d", i))
		if out.State == agentproto.StateCompleted && strings.Contains(string(out.Payload), fmt.Sprintf("r%d", i)) {
			completed++
		} else {
			fails = append(fails, fmt.Sprintf("%s %s", out.State, out.Payload))
		}
	}
	if completed != n {
		t.Fatalf("%d of %d runs completed; the others: %v", completed, n, fails)
	}
	// Chat: a chat message starts a run whose completion is the reply;
	// ejabberd hands each to a random member, which relays it to the
	// holder. Before the relay, two in three were refused.
	in := l.inbox("alice")
	const chats = 6
	for i := range chats {
		sendChat(t, in, ep, fmt.Sprintf("echo chat-%d", i))
	}
	testkit.WaitFor(t, 90*time.Second, "a chat reply to each chat message", func() bool {
		got := strings.Join(in.bodies(ep), "\n")
		for i := range chats {
			if !strings.Contains(got, fmt.Sprintf("chat-%d", i)) {
				return false
			}
		}
		return true
	})
	h := l.holder(accLease, 30*time.Second)
	for name, p := range l.members {
		if name != h && strings.Contains(p.Log(), "acc listener up") {
			t.Fatalf("member %s (not the holder %s) opened the ACC listener", name, h)
		}
		// A member without the listener has nothing to wait for at its
		// start.
		if strings.Contains(p.Log(), "backends not ready") {
			t.Fatalf("member %s waited for its ACC endpoint to be ready:\n%s", name, e2e.Tail(p.Log(), 2000))
		}
	}

	// kill -9 the holder mid-run.
	before := len(conn.RunIDs("create_run")) // the runs and the chats' runs
	accepted := make(chan string, 1)
	done := make(chan *agentclient.Outcome, 1)
	go func() {
		args, _ := json.Marshal(map[string]string{"goal": "hang"})
		out, _ := c.Call(ctx, e2e.MustJID(ep), "run", args, agentclient.CallOptions{
			OnAccepted: func(a *agentclient.Accepted) { accepted <- a.TaskID }, RecoverAfter: time.Second})
		done <- out
	}()
	var id string
	select {
	case id = <-accepted:
	case <-time.After(60 * time.Second):
		t.Fatal("the hang run was not accepted")
	}
	testkit.WaitFor(t, 30*time.Second, "the hang run at the connector", func() bool { return len(conn.RunIDs("create_run")) == before+1 })
	runID := conn.RunIDs("create_run")[before]
	l.members[h].Kill()
	next := l.holder(accLease, 60*time.Second)
	if next == h {
		t.Fatalf("the ACC lease stayed with the killed member %s", h)
	}
	l.members[next].WaitLog("acc connector registered", 60*time.Second)
	testkit.WaitFor(t, 60*time.Second, "cancel_run for the interrupted run", func() bool { return conn.Got("cancel_run", runID) == 1 })
	var out *agentclient.Outcome
	select {
	case out = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the interrupted run's call did not end")
	}
	if out == nil || out.State != agentproto.StateFailed || !strings.Contains(string(out.Payload), agentproto.CodeInterrupted) {
		t.Fatalf("the run on the killed holder ended %+v, want failed %s", out, agentproto.CodeInterrupted)
	}
	st, err := c.State(ctx, e2e.MustJID(ep), id)
	if err != nil || st.State != agentproto.StateFailed {
		t.Fatalf("task %s after kill -9: %v %+v", id, err, st)
	}
	if got := len(conn.RunIDs("create_run")); got != before+1 || before != n+chats {
		t.Fatalf("create_run sent %d times, want %d (one per task and chat message)", got, n+chats+1)
	}
	// New runs complete through the survivor.
	for i := range 3 {
		out := run(fmt.Sprintf("echo after%d", i))
		if out.State != agentproto.StateCompleted {
			t.Fatalf("run after the failover: %s %s", out.State, out.Payload)
		}
	}
}
