package tasks

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// TestProgressFloodE2E: a tool sends 5,000 progress updates over about a
// second. The events a real XMPP client receives through Prosody stay
// within [tasks] progress_per_second per second of the task's run, are
// gap-free, and end with the final progress right before the terminal
// event.
func TestProgressFloodE2E(t *testing.T) {
	t.Parallel()
	const perSecond = 5
	const n = 5000
	te := e2e.StartTaskEnvConfig(t, []string{"alice"}, func(c *config.Config) { c.Tasks.ProgressPerSecond = perSecond },
		func(x *taskstest.Executor) {
			x.Script("flood", taskstest.Step{Do: func(ctx context.Context, call tasks.Call, run tasks.Run) error {
				for i := 1; i <= n; i++ {
					if err := run.Progress(tasks.Progress{Percent: taskstest.Percent(float64(i) * 100 / n), Stage: "flood"}); err != nil {
						return err
					}
					if i%5 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
				return run.Complete(*taskstest.Text("flooded"))
			}})
		}, e2e.Tool("flood", "Flood", "Floods progress.", `{"type":"object"}`, false))
	c := te.Dial("alice")
	acc := te.Invoke(t, c, "flood", `{}`)
	events, stop := c.Subscribe(te.Ep, acc.TaskID)
	defer stop()
	var got []agentclient.Event
	for done := false; !done; {
		select {
		case ev := <-events:
			got = append(got, ev)
			done = ev.Terminal()
		case <-time.After(30 * time.Second):
			t.Fatalf("no terminal event within 30 s; received %d events", len(got))
		}
	}
	stored, err := te.Gateway.Engine.Events(te.Ctx, acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	ran := stored[len(stored)-1].Created.Sub(stored[0].Created)
	progress := 0
	for i, ev := range got {
		if ev.Revision != int64(i+1) {
			t.Fatalf("event %d has revision %d: the client saw a gap", i, ev.Revision)
		}
		if ev.Type == "progress" {
			progress++
		}
	}
	bound := perSecond * (int(ran/time.Second) + 1)
	t.Logf("%d progress updates in %v -> the client received %d progress events (bound %d), %d events in all", n, ran.Round(time.Millisecond), progress, bound, len(got))
	if progress == 0 || progress > bound {
		t.Fatalf("client received %d progress events over %v, want 1..%d", progress, ran, bound)
	}
	last, term := got[len(got)-2], got[len(got)-1]
	var p agentclient.Progress
	if err := json.Unmarshal(last.Payload, &p); err != nil || last.Type != "progress" || p.Percent == nil || *p.Percent != 100 {
		t.Fatalf("event before %s: %s %s, want the final progress (100%%)", term.Type, last.Type, last.Payload)
	}
	if term.Type != "completed" {
		t.Fatalf("terminal event %s %s", term.Type, term.Payload)
	}
}

// TestQuotaPerPrincipalE2E: alice fills her quota of non-terminal tasks
// with long-running calls; her next invoke gets resource-constraint, while
// bob's calls through the same Prosody and endpoint still run. A settled
// task frees alice's quota.
func TestQuotaPerPrincipalE2E(t *testing.T) {
	t.Parallel()
	te := e2e.StartTaskEnvConfig(t, []string{"alice", "bob"}, func(c *config.Config) { c.Tasks.MaxActivePerPrincipal = 2 }, nil)
	alice, bob := te.Dial("alice"), te.Dial("bob")
	a1 := te.Invoke(t, alice, "wait", `{}`)
	te.Invoke(t, alice, "wait", `{}`)
	_, err := alice.Invoke(te.Ctx, te.Ep, &agentclient.InvokeRequest{Tool: "echo", Version: te.Version, ManifestHash: te.Hash, Arguments: json.RawMessage(`{"message":"third"}`)})
	if e2e.ErrCondition(err) != "resource-constraint" {
		t.Fatalf("alice's third invoke: %v, want resource-constraint", err)
	}
	for i := 0; i < 3; i++ {
		out, err := bob.Call(te.Ctx, te.Ep, "echo", json.RawMessage(`{"message":"bob"}`), agentclient.CallOptions{})
		if err != nil || out.State != "completed" {
			t.Fatalf("bob's call %d while alice is at her quota: %+v, %v", i, out, err)
		}
	}
	st := te.WaitState(t, alice, a1.TaskID, "running")
	if _, err := alice.Cancel(te.Ctx, te.Ep, a1.TaskID, st.Revision, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := alice.Follow(te.Ctx, te.Ep, a1, agentclient.CallOptions{}); err != nil || out.State != "cancelled" {
		t.Fatalf("cancelled task: %+v, %v", out, err)
	}
	if out, err := alice.Call(te.Ctx, te.Ep, "echo", json.RawMessage(`{"message":"again"}`), agentclient.CallOptions{}); err != nil || out.State != "completed" {
		t.Fatalf("alice after one task settled: %+v, %v", out, err)
	}
}

// TestBackendConcurrencyE2E: with [tasks] max_running_per_backend = 2 and
// five long invocations, all five are admitted, two run and three stay
// accepted (as task-state shows a real client), and they run as slots
// free.
func TestBackendConcurrencyE2E(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	gates := map[string]chan struct{}{}
	gate := func(id string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if gates[id] == nil {
			gates[id] = make(chan struct{})
		}
		return gates[id]
	}
	te := e2e.StartTaskEnvConfig(t, []string{"alice"}, func(c *config.Config) { c.Tasks.MaxRunningPerBackend = 2 },
		func(x *taskstest.Executor) {
			x.Script("gated", taskstest.Step{Do: func(ctx context.Context, call tasks.Call, run tasks.Run) error {
				select {
				case <-gate(call.TaskID):
				case <-ctx.Done():
					return ctx.Err()
				}
				return run.Complete(*taskstest.Text("released"))
			}})
		}, e2e.Tool("gated", "Gated", "Waits for the test.", `{"type":"object"}`, false))
	c := te.Dial("alice")
	var accs []*agentclient.Accepted
	for i := 0; i < 5; i++ {
		accs = append(accs, te.Invoke(t, c, "gated", `{}`))
	}
	states := func() string {
		var out []string
		for _, a := range accs {
			st, err := c.State(te.Ctx, te.Ep, a.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(st.State))
		}
		return strings.Join(out, ",")
	}
	// Wait on the engine (no IQ rate limit), then look as the client.
	committed := func() string {
		var out []string
		for _, a := range accs {
			st, err := te.Gateway.Engine.State(te.Ctx, te.JID("alice"), te.Ep.String(), a.TaskID)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(st.State))
		}
		return strings.Join(out, ",")
	}
	want := "running,running,accepted,accepted,accepted"
	deadline := time.Now().Add(testkit.MinWait)
	for committed() != want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// Nothing else starts while the slots are taken.
	time.Sleep(200 * time.Millisecond)
	if got := states(); got != want {
		t.Fatalf("states = %s, want %s", got, want)
	}
	close(gate(accs[0].TaskID))
	te.WaitState(t, c, accs[2].TaskID, "running")
	if got := states(); got != "completed,running,running,accepted,accepted" {
		t.Fatalf("after one settled: %s", got)
	}
	for _, a := range accs[1:] {
		close(gate(a.TaskID))
	}
	for _, a := range accs {
		if out, err := c.Follow(te.Ctx, te.Ep, a, agentclient.CallOptions{RecoverAfter: 300 * time.Millisecond}); err != nil || out.State != "completed" {
			t.Fatalf("task %s: %+v, %v", a.TaskID, out, err)
		}
	}
}

// TestQuotaPerRemoteDomainE2E: across two federated Prosody servers, the
// callers of a.test together hit max_active_per_domain (resource-constraint
// for a third a.test user with no task of their own), while a local user
// of the gateway's server still runs calls.
func TestQuotaPerRemoteDomainE2E(t *testing.T) {
	t.Parallel()
	a, b := xmppharness.StartFederation(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, u := range []string{"alice", "carol", "dave"} {
		if err := a.Register(ctx, u, e2e.Password+u); err != nil {
			t.Fatal(err)
		}
	}
	e := e2e.Start(t, e2e.Options{Server: b, Users: []string{"bob"}, Agents: []e2e.Agent{{Localpart: "weather"}},
		Mutate: func(c *config.Config) { c.Tasks.MaxActivePerPrincipal, c.Tasks.MaxActivePerDomain = 5, 2 }})
	e.Agentgw(0, "trust", "grant", "--config", e.ConfigPath, "--invocation", "a.test")
	ep := e.Endpoint("weather")
	m, ok := e.Gateway.Registry.Active(ep.String())
	if !ok {
		t.Fatal("weather has no active manifest")
	}
	invoke := func(c *agentclient.Client, tool, args string) (*agentclient.Accepted, error) {
		return c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: tool, Version: m.Version, ManifestHash: m.Hash, Arguments: json.RawMessage(args)})
	}
	alice, _ := e.DialOn(a, "alice")
	carol, _ := e.DialOn(a, "carol")
	dave, _ := e.DialOn(a, "dave")
	var first *agentclient.Accepted
	testkit.WaitFor(t, 5*time.Second, "the invocation grant", func() bool {
		var err error
		first, err = invoke(alice, "wait", `{}`)
		return err == nil
	})
	if _, err := invoke(carol, "wait", `{}`); err != nil {
		t.Fatalf("carol's first task: %v", err)
	}
	_, err := invoke(dave, "echo", `{"message":"dave"}`)
	if e2e.ErrCondition(err) != "resource-constraint" {
		t.Fatalf("dave@a.test with a.test at its domain quota: %v, want resource-constraint", err)
	}
	bob := e.Dial("bob")
	if out, err := bob.Call(ctx, ep, "echo", json.RawMessage(`{"message":"bob"}`), agentclient.CallOptions{}); err != nil || out.State != "completed" {
		t.Fatalf("local bob while a.test is at its quota: %+v, %v", out, err)
	}
	// One a.test task settles: the domain has room again.
	st, err := alice.State(ctx, ep, first.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Cancel(ctx, ep, first.TaskID, st.Revision, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := alice.Follow(ctx, ep, first, agentclient.CallOptions{RecoverAfter: time.Second}); err != nil || out.State != "cancelled" {
		t.Fatalf("alice's cancelled task: %+v, %v", out, err)
	}
	acc, err := invoke(dave, "echo", `{"message":"dave"}`)
	if err != nil {
		t.Fatalf("dave after a.test's task settled: %v", err)
	}
	if out, err := dave.Follow(ctx, ep, acc, agentclient.CallOptions{RecoverAfter: time.Second}); err != nil || out.State != "completed" {
		t.Fatalf("dave's call: %+v, %v", out, err)
	}
}
