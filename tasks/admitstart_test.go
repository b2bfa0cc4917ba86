package tasks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// waitStarted waits until the executor has been called.
func waitStarted(t *testing.T, h *harness) {
	t.Helper()
	select {
	case <-h.exec.Started():
	case <-ctxT(t).Done():
		t.Fatal("the backend was not called")
	}
}

// commitsNow is the number of group commits so far, once the purge that
// Start queued has committed.
func commitsNow(t *testing.T, h *harness) int64 {
	t.Helper()
	if _, err := h.eng.PurgeExpired(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, _ := tasks.CommitStats(h.eng)
	return n
}

// commitsSince is the number of group commits since before.
func commitsSince(h *harness, before int64) int64 {
	n, _ := tasks.CommitStats(h.eng)
	return n - before
}

// A task whose backend has a free slot is admitted and moved to running in
// one commit: running at revision 1, with its status event, by the time
// Admit returns, and one commit in all until the settlement's.
func TestAdmitWithFreeSlotStartsInOneCommit(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	h.exec.Script("echo", taskstest.Step{Gate: gate}, taskstest.Step{Echo: true})
	before := commitsNow(t, h)
	acc := h.admit(h.inv("echo", `{"n":1}`))
	if s := h.state(acc.TaskID); s.State != agentproto.StateRunning || s.Revision != 1 {
		t.Fatalf("after Admit returned: %s@%d, want running@1", s.State, s.Revision)
	}
	if acc.Revision != 0 {
		t.Fatalf("<accepted/> revision %d, want 0", acc.Revision)
	}
	// The executor is parked on the gate: nothing else commits.
	waitStarted(t, h)
	if n := commitsSince(h, before); n != 1 {
		t.Fatalf("%d commits for admission and start, want 1", n)
	}
	close(gate)
	if ev := h.terminal(acc.TaskID); ev.Type != agentproto.EventCompleted {
		t.Fatalf("terminal %s", ev.Type)
	}
	if n := commitsSince(h, before); n != 2 {
		t.Fatalf("%d commits for the whole call, want 2 (admission+start, settlement)", n)
	}
	evs := h.checkHistory(acc.TaskID)
	if got := strings.Join(types(evs), " "); got != "status:running completed:" {
		t.Fatalf("history %s", got)
	}
	if calls := h.exec.Calls(); len(calls) != 1 {
		t.Fatalf("backend called %d times", len(calls))
	}
}

// Without a free slot the admission commits the task accepted, alone; it
// is dispatched by its own commit once a slot frees, as before.
func TestAdmitWithBusyBackendStaysAccepted(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) { c.MaxRunningPerBackend = 1 })
	gate := make(chan struct{})
	h.apr.Approve(alice, weather, "approve.me")
	h.exec.Script("approve.me", taskstest.Step{Gate: gate}, taskstest.Step{Echo: true})
	first := h.admit(h.inv("approve.me", `{}`))
	if s := h.state(first.TaskID); s.State != agentproto.StateRunning {
		t.Fatalf("first task %s, want running", s.State)
	}
	waitStarted(t, h)
	before := commitsNow(t, h)
	second := h.admit(h.inv("echo", `{"n":2}`))
	if s := h.state(second.TaskID); s.State != agentproto.StateAccepted || s.Revision != 0 {
		t.Fatalf("second task %s@%d with the slot taken, want accepted@0", s.State, s.Revision)
	}
	if n := commitsSince(h, before); n != 1 {
		t.Fatalf("%d commits for the held admission, want 1", n)
	}
	close(gate)
	h.terminal(first.TaskID)
	if ev := h.terminal(second.TaskID); ev.Type != agentproto.EventCompleted {
		t.Fatalf("second task %s", ev.Type)
	}
	// Admission, the dispatch once the first settled, the settlement; plus
	// the first task's settlement.
	if n := commitsSince(h, before); n != 4 {
		t.Fatalf("%d commits, want 4", n)
	}
	for _, id := range []string{first.TaskID, second.TaskID} {
		if got := strings.Join(types(h.checkHistory(id)), " "); got != "status:running completed:" {
			t.Fatalf("task %s history %s", id, got)
		}
	}
}

// The events of a task started in its admission commit wait until the
// caller's <accepted/> is on its way (tasks.AfterReply): even its terminal
// event, committed meanwhile, is held, and both go out in revision order
// on release. A context that cannot defer releases them at once.
func TestAdmitStartEventsFollowTheReply(t *testing.T) {
	h := newHarness(t)
	var release func()
	ctx := tasks.AfterReply(context.Background(), func(f func()) bool { release = f; return true })
	held, err := h.eng.Admit(ctx, h.inv("echo", `{"n":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if release == nil {
		t.Fatal("Admit did not hand over the release")
	}
	// The held task settles (its settlement commits) with nothing notified.
	h.waitState(held.TaskID, agentproto.StateCompleted)
	// A later task's events pass the held ones: once they are notified,
	// the notifier has gone past the held task's commits.
	var noDefer bool
	ctx2 := tasks.AfterReply(context.Background(), func(func()) bool { noDefer = true; return false })
	free, err := h.eng.Admit(ctx2, h.inv("echo", `{"n":4}`))
	if err != nil {
		t.Fatal(err)
	}
	if !noDefer {
		t.Fatal("Admit did not offer the release")
	}
	h.terminal(free.TaskID)
	if evs := h.rec.Events(held.TaskID); len(evs) != 0 {
		t.Fatalf("%d events of the held task notified before its release", len(evs))
	}
	release()
	h.terminal(held.TaskID)
	for _, id := range []string{held.TaskID, free.TaskID} {
		if got := strings.Join(types(h.checkHistory(id)), " "); got != "status:running completed:" {
			t.Fatalf("task %s history %s", id, got)
		}
	}
}

// A crash right after the combined commit leaves the task running: the
// restart settles it failed agentgw:interrupted and never calls the backend
// again.
func TestCrashAfterAdmitStartInterrupts(t *testing.T) {
	path := t.TempDir() + "/agentgw.db"
	h := newHarnessAt(t, path)
	forever := make(chan struct{})
	t.Cleanup(func() { close(forever) })
	h.exec.Script("echo", taskstest.Step{Gate: forever})
	acc := h.admit(h.inv("echo", `{"n":5}`))
	waitStarted(t, h)
	h.crash()

	h2 := newHarnessAt(t, path)
	h2.restarted = true
	s := h2.waitState(acc.TaskID, agentproto.StateFailed)
	if s.Revision != 2 {
		t.Fatalf("revision %d after recovery, want 2", s.Revision)
	}
	r, err := h2.eng.Result(context.Background(), alice, weather, acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Payload), `"code":"agentgw:interrupted"`) || !strings.Contains(string(r.Payload), `"retryable":true`) {
		t.Fatalf("result %s", r.Payload)
	}
	if got := strings.Join(types(h2.checkHistory(acc.TaskID)), " "); got != "status:running failed:" {
		t.Fatalf("history %s", got)
	}
	if calls := h2.exec.Calls(); len(calls) != 0 {
		t.Fatalf("the restarted engine called the backend %d times", len(calls))
	}
}
