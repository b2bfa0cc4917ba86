package tasks_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// gates releases scripted executions one task at a time.
type gates struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func (g *gates) get(id string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = map[string]chan struct{}{}
	}
	c, ok := g.ch[id]
	if !ok {
		c = make(chan struct{})
		g.ch[id] = c
	}
	return c
}

func (g *gates) release(id string) { close(g.get(id)) }

// step waits for the task's own gate, then echoes.
func (g *gates) step() taskstest.Step {
	return taskstest.Step{Do: func(ctx context.Context, call tasks.Call, run tasks.Run) error {
		select {
		case <-g.get(call.TaskID):
		case <-ctx.Done():
			return ctx.Err()
		}
		return run.Complete(*taskstest.Text("released"))
	}}
}

func invAs(h *harness, caller, endpoint, ver, hash string) tasks.Invocation {
	return tasks.Invocation{
		Caller: caller, Route: caller + "/r", Endpoint: endpoint, RequestID: ids.New("req-"),
		Tool: "echo", APIVersion: ver, ManifestHash: hash, Arguments: []byte(`{}`), MediaType: "application/json",
	}
}

// TestQuotaPerPrincipal: a caller at its cap of non-terminal tasks is
// refused with resource-constraint; another caller is not; a replay still
// answers; a settled task frees the quota.
func TestQuotaPerPrincipal(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) { c.MaxActivePerPrincipal = 2 })
	gate := make(chan struct{})
	h.exec.Script("echo", taskstest.Step{Gate: gate}, taskstest.Step{Echo: true})
	first := h.inv("echo", `{}`)
	a := h.admit(first)
	h.admit(h.inv("echo", `{}`))
	_, err := h.eng.Admit(context.Background(), h.inv("echo", `{}`))
	wantErr(t, err, tasks.ErrResourceConstraint)
	if !strings.Contains(err.Error(), "caller's active task quota") {
		t.Fatalf("refusal reason: %v", err)
	}
	if got := h.admit(first); got.Replay != true || got.TaskID != a.TaskID || got.Created != a.Created || got.RetainUntil != a.RetainUntil {
		t.Fatalf("replay at the cap: %+v, want the replay of %+v", got, a)
	}
	om, _ := h.dir.Active(other)
	h.admit(invAs(h, mallory, other, om.Version, om.Hash)) // another principal
	close(gate)
	h.terminal(a.TaskID)
	h.admit(h.inv("echo", `{}`))
}

// TestQuotaPerRemoteDomain: the tasks of all principals of one remote
// domain share its cap; a local principal and another remote domain are
// not affected.
func TestQuotaPerRemoteDomain(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) {
		c.MaxActivePerPrincipal = 2
		c.MaxActivePerDomain = 3
		c.IsLocal = func(p string) bool { return strings.HasSuffix(p, "@example.test") }
	})
	gate := make(chan struct{})
	defer close(gate)
	h.exec.Script("echo", taskstest.Step{Gate: gate}, taskstest.Step{Echo: true})
	r1, r2, r3, far := "r1@remote.test", "r2@remote.test", "r3@Remote.Test", "x@far.test"
	for _, p := range []string{r1, r2, r3, far} {
		h.pol.Allow(p, weather)
	}
	as := func(p string) tasks.Invocation { return invAs(h, p, weather, version, h.m.Hash) }
	h.admit(as(r1))
	h.admit(as(r1))
	h.admit(as(r2))
	for _, p := range []string{r2, r3} {
		_, err := h.eng.Admit(context.Background(), as(p))
		wantErr(t, err, tasks.ErrResourceConstraint)
		if !strings.Contains(err.Error(), "remote domain") {
			t.Fatalf("%s refused for %v, want the domain quota", p, err)
		}
	}
	h.admit(as(far))
	// Local: no domain quota (alice shares example.test with mallory),
	// only the principal's.
	h.admit(h.inv("echo", `{}`))
	h.admit(h.inv("echo", `{}`))
}

// TestBackendConcurrency: with a limit of 2 and 5 long invocations, 2 run
// and 3 stay accepted (admitted, not refused); each settlement dispatches
// the oldest waiting task; another endpoint's backend is not held up.
func TestBackendConcurrency(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) {
		c.RunningLimit = func(ep string) int {
			if ep == weather {
				return 2
			}
			return 0
		}
	})
	g := &gates{}
	h.exec.Script("echo", g.step())
	var accs []tasks.Accepted
	for i := 0; i < 5; i++ {
		accs = append(accs, h.admit(h.inv("echo", `{}`)))
	}
	h.waitState(accs[0].TaskID, agentproto.StateRunning)
	h.waitState(accs[1].TaskID, agentproto.StateRunning)
	states := func() string {
		var out []string
		for _, a := range accs {
			out = append(out, string(h.state(a.TaskID).State))
		}
		return strings.Join(out, ",")
	}
	if got := states(); got != "running,running,accepted,accepted,accepted" {
		t.Fatalf("states = %s", got)
	}
	om, _ := h.dir.Active(other)
	o := h.admit(invAs(h, mallory, other, om.Version, om.Hash))
	g.release(o.TaskID)
	if ev := h.terminal(o.TaskID); ev.Type != "completed" {
		t.Fatalf("other endpoint's task: %s", ev.Type)
	}
	g.release(accs[1].TaskID)
	h.terminal(accs[1].TaskID)
	h.waitState(accs[2].TaskID, agentproto.StateRunning)
	if got := states(); got != "running,completed,running,accepted,accepted" {
		t.Fatalf("after one settled: states = %s", got)
	}
	// A waiting task cancelled before dispatch settles without a slot.
	if _, _, err := h.eng.Cancel(context.Background(), tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: accs[4].TaskID}); err != nil {
		t.Fatal(err)
	}
	if ev := h.terminal(accs[4].TaskID); ev.Type != "cancelled" {
		t.Fatalf("cancelled waiting task: %s", ev.Type)
	}
	for _, i := range []int{0, 2} {
		g.release(accs[i].TaskID)
	}
	h.waitState(accs[3].TaskID, agentproto.StateRunning)
	g.release(accs[3].TaskID)
	for _, a := range accs {
		h.terminal(a.TaskID)
		h.checkHistory(a.TaskID)
	}
	if got := states(); got != "completed,completed,completed,completed,cancelled" {
		t.Fatalf("final states = %s", got)
	}
	if n := len(h.exec.Calls()); n != 5 { // four weather tasks and the other endpoint's
		t.Fatalf("%d executions, want 5", n)
	}
}

// TestBackendConcurrencyAfterRestart: accepted tasks found at Start are
// dispatched through the same limit.
func TestBackendConcurrencyAfterRestart(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) { c.MaxRunningPerBackend = 2 })
	g := &gates{}
	h.exec.Script("echo", g.step())
	tasks.HoldDispatch(h.eng, true)
	var accs []tasks.Accepted
	for i := 0; i < 5; i++ {
		h.clk.Advance(time.Millisecond) // recovery dispatches in creation order
		accs = append(accs, h.admit(h.inv("echo", `{}`)))
	}
	h.crash()
	h.restarted = true
	h.open()
	h.waitState(accs[0].TaskID, agentproto.StateRunning)
	h.waitState(accs[1].TaskID, agentproto.StateRunning)
	for _, a := range accs[2:] {
		if s := h.state(a.TaskID); s.State != agentproto.StateAccepted {
			t.Fatalf("task %s after restart: %s, want accepted", a.TaskID, s.State)
		}
	}
	for i, a := range accs {
		g.release(a.TaskID)
		h.terminal(a.TaskID)
		if i+2 < len(accs) {
			h.waitState(accs[i+2].TaskID, agentproto.StateRunning)
		}
	}
	if n := len(h.exec.Calls()); n != 5 {
		t.Fatalf("%d executions, want 5", n)
	}
}

// TestRetainedBytesBudget: once a caller's terminal tasks hold the budget,
// new admissions are refused with resource-constraint (nothing retained is
// evicted: every result stays fetchable), other callers are unaffected, a
// replay still answers, and the purge at the end of retention frees it.
func TestRetainedBytesBudget(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) {
		c.MaxRetainedBytes = 300
		c.Retention = time.Hour
		c.ReplayWindow = time.Hour
	})
	big := `{"pad":"` + strings.Repeat("x", 100) + `"}`
	var accs []tasks.Accepted
	var invs []tasks.Invocation
	for i := 0; ; i++ {
		inv := h.inv("echo", big)
		acc, err := h.eng.Admit(context.Background(), inv)
		if err != nil {
			wantErr(t, err, tasks.ErrResourceConstraint)
			if !strings.Contains(err.Error(), "retained result budget") || i == 0 {
				t.Fatalf("refusal %d: %v", i, err)
			}
			break
		}
		if i > 10 {
			t.Fatal("the budget never refused")
		}
		h.terminal(acc.TaskID)
		accs, invs = append(accs, acc), append(invs, inv)
	}
	for _, a := range accs { // every retained result is still there
		if _, err := h.eng.Result(context.Background(), alice, weather, a.TaskID); err != nil {
			t.Fatalf("result of %s: %v", a.TaskID, err)
		}
	}
	replay := accs[0]
	replay.Replay = true
	if got := h.admit(invs[0]); got != replay {
		t.Fatalf("replay over budget: %+v", got)
	}
	om, _ := h.dir.Active(other)
	h.admit(invAs(h, mallory, other, om.Version, om.Hash))
	h.clk.Set(t0.Add(2 * time.Hour))
	// The purge timer runs as the clock passes the end of retention.
	if _, err := h.eng.PurgeExpired(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Result(context.Background(), alice, weather, accs[0].TaskID); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("result after retention: %v", err)
	}
	h.admit(h.inv("echo", big))
}
