package tasks_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/cluster"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit"
)

// lossyBus loses every notice published while drop is set, as a listener
// that is reconnecting (or not listening yet) would.
type lossyBus struct {
	cluster.Bus
	drop    *atomic.Bool
	dropped *atomic.Int64
}

func (l lossyBus) Publish(ctx context.Context, channel string, payload []byte) error {
	if l.drop.Load() {
		l.dropped.Add(1)
		return nil
	}
	return l.Bus.Publish(ctx, channel, payload)
}

// sweepBound is the documented bound on acting upon a lost notice
// (tasks.DefaultSweepInterval plus one commit, docs/cluster.md); the test
// allows twice as much for a loaded machine.
const sweepBound = 2 * time.Second

// settledWithin waits (bounded) for a task to be terminal and returns its
// state and how long that took from since.
func settledWithin(t *testing.T, on *member, id string, since time.Time) (*tasks.Snapshot, time.Duration) {
	t.Helper()
	var s *tasks.Snapshot
	testkit.WaitFor(t, 30*time.Second, "task "+id+" settled", func() bool {
		var err error
		s, err = on.eng.State(context.Background(), alice, weather, id)
		return err == nil && s.State.Terminal()
	})
	return s, time.Since(since)
}

// Every notice between members is lost: a cancel and an answer committed
// on the member that does not own the task, and a task routed to another
// member at admission, still reach the owner, through the sweep of the
// durable signal queue, within the stated bound.
func TestClusterLostNoticesSwept(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	var drop atomic.Bool
	var dropped atomic.Int64
	c.mutate = func(cfg *tasks.Config) {
		cfg.Cluster.Bus = lossyBus{cfg.Cluster.Bus, &drop, &dropped}
	}
	a := c.start("gw-a", 0, false)
	b := c.startWith("gw-b", 0, false, func(string) string { return "gw-a" })
	drop.Store(true)
	ctx := context.Background()
	check := func(what string, d time.Duration) {
		t.Logf("%s with its notice lost: acted on after %v", what, d.Round(time.Millisecond))
		if d > 2*sweepBound {
			t.Errorf("%s with its notice lost took %v, beyond the bound %v", what, d, sweepBound)
		}
	}

	// Cancel of a running task.
	blocked, err := a.eng.Admit(ctx, c.inv("forecast.get", `{"city":"Paris"}`))
	if err != nil {
		t.Fatal(err)
	}
	<-waitExec(c.be, []string{blocked.TaskID})
	s, _ := b.eng.State(ctx, alice, weather, blocked.TaskID)
	t0 := time.Now()
	if _, _, err := b.eng.Cancel(ctx, tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: blocked.TaskID, ExpectedRevision: s.Revision}); err != nil {
		t.Fatal(err)
	}
	fin, d := settledWithin(t, a, blocked.TaskID, t0)
	if fin.State != agentproto.StateCancelled {
		t.Fatalf("cancelled through b: %s", fin.State)
	}
	check("cancel of a running task", d)

	// An answer to a pending input request.
	asking, err := a.eng.Admit(ctx, c.inv("echo", `{"ask":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var snap *tasks.Snapshot
	testkit.WaitFor(t, 30*time.Second, "input_required", func() bool {
		snap, _ = b.eng.State(ctx, alice, weather, asking.TaskID)
		return snap != nil && snap.State == agentproto.StateInputRequired
	})
	var req struct {
		RequestID string `json:"requestId"`
	}
	json.Unmarshal(snap.PendingInput, &req)
	t0 = time.Now()
	if _, _, err := b.eng.ProvideInput(ctx, tasks.InputSubmission{Caller: alice, Endpoint: weather, TaskID: asking.TaskID,
		RequestID: req.RequestID, ExpectedRevision: snap.Revision, MediaType: "application/json", Input: []byte(`{"city":"Oslo"}`)}); err != nil {
		t.Fatal(err)
	}
	fin, d = settledWithin(t, a, asking.TaskID, t0)
	r, _ := a.eng.Result(ctx, alice, weather, asking.TaskID)
	if fin.State != agentproto.StateCompleted || !strings.Contains(string(r.Payload), "Oslo") {
		t.Fatalf("answered through b: %s %s", fin.State, r.Payload)
	}
	check("answer to an input request", d)

	// Cancel of an accepted task never dispatched.
	tasks.HoldDispatch(a.eng, true)
	held, err := a.eng.Admit(ctx, c.inv("echo", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if _, _, err := b.eng.Cancel(ctx, tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: held.TaskID}); err != nil {
		t.Fatal(err)
	}
	fin, d = settledWithin(t, b, held.TaskID, t0)
	if fin.State != agentproto.StateCancelled || c.be.executions(held.TaskID) != 0 {
		t.Fatalf("held task cancelled through b: %s, %d executions", fin.State, c.be.executions(held.TaskID))
	}
	check("cancel of an accepted task", d)
	tasks.HoldDispatch(a.eng, false)

	// A task admitted on b for the holder a ("dispatch this").
	t0 = time.Now()
	routed, err := b.eng.Admit(ctx, c.inv("echo", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	fin, d = settledWithin(t, b, routed.TaskID, t0)
	c.be.mu.Lock()
	where := c.be.where[routed.TaskID]
	c.be.mu.Unlock()
	if fin.State != agentproto.StateCompleted || where != "gw-a" || c.be.executions(routed.TaskID) != 1 {
		t.Fatalf("routed task: %s on %q, %d executions", fin.State, where, c.be.executions(routed.TaskID))
	}
	check("dispatch of a routed task", d)
	if dropped.Load() == 0 {
		t.Fatal("no notice was dropped: the test proves nothing")
	}
}
