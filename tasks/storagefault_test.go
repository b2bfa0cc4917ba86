package tasks_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// faultDriver fails the commit of every group commit that moves a task to
// one of the armed states, while its budget lasts, as a full or read-only
// disk would.
type faultDriver struct {
	taskdb.Driver
	mu     sync.Mutex
	states map[agentproto.State]bool
	budget int
	failed int
	// inUpdate fails the UPDATE statement itself instead of the commit.
	inUpdate bool
}

var errInjected = errors.New("disk I/O error (injected)")

func (d *faultDriver) arm(n int, states ...agentproto.State) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.budget, d.states = n, map[agentproto.State]bool{}
	for _, s := range states {
		d.states[s] = true
	}
}

func (d *faultDriver) failures() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failed
}

func (d *faultDriver) Begin(ctx context.Context) (taskdb.Tx, error) {
	tx, err := d.Driver.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &faultTx{Tx: tx, d: d}, nil
}

type faultTx struct {
	taskdb.Tx
	d     *faultDriver
	moves []agentproto.State
}

func (t *faultTx) UpdateTask(task *taskdb.Task, prevRev int64, from ...agentproto.State) (bool, error) {
	t.d.mu.Lock()
	fail := t.d.inUpdate && t.d.states[task.State] && t.d.budget > 0
	if fail {
		t.d.budget--
		t.d.failed++
	}
	t.d.mu.Unlock()
	if fail {
		return false, errInjected
	}
	t.moves = append(t.moves, task.State)
	return t.Tx.UpdateTask(task, prevRev, from...)
}

func (t *faultTx) Commit() error {
	t.d.mu.Lock()
	fail := false
	for _, s := range t.moves {
		fail = fail || !t.d.inUpdate && t.d.states[s] && t.d.budget > 0
	}
	if fail {
		t.d.budget--
		t.d.failed++
	}
	t.d.mu.Unlock()
	if fail {
		t.Tx.Rollback()
		return errInjected
	}
	return t.Tx.Commit()
}

func newFaultHarness(t *testing.T) (*harness, *faultDriver) {
	h := newHarness(t)
	h.eng.Close()
	h.db.Close()
	fd := &faultDriver{}
	h.wrap = func(d taskdb.Driver) taskdb.Driver { fd.Driver = d; return fd }
	h.open()
	return h, fd
}

// advanceUntil moves the fake clock in steps until cond holds, so that
// the engine's retry timers fire.
func advanceUntil(t *testing.T, h *harness, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		h.clk.Advance(50 * time.Millisecond)
		time.Sleep(2 * time.Millisecond)
	}
}

// A dispatch whose commit fails (the task was accepted, the disk then
// filled up) is retried until it commits: the task does not stay accepted
// until a restart, and it runs exactly once.
func TestDispatchCommitFailureIsRetried(t *testing.T) {
	h, fd := newFaultHarness(t)
	h.exec.Script("echo", taskstest.Step{Echo: true})
	fd.arm(3, agentproto.StateRunning)
	acc := h.admit(h.inv("echo", `{"x":1}`))
	advanceUntil(t, h, "the dispatch to commit", func() bool { return h.state(acc.TaskID).State != agentproto.StateAccepted })
	if ev := h.terminal(acc.TaskID); ev.Type != "completed" {
		t.Fatalf("terminal event %s, want completed", ev.Type)
	}
	wantRetriedEcho(t, h, fd, acc.TaskID, 3)
	if n := len(h.exec.Calls()); n != 1 {
		t.Fatalf("the backend ran %d times, want once", n)
	}
}

// A result whose settlement commit fails is not lost: Complete waits while
// the commit is retried, and the task settles completed with that result.
func TestSettlementCommitFailureIsRetried(t *testing.T) {
	h, fd := newFaultHarness(t)
	h.exec.Script("echo", taskstest.Step{Echo: true})
	fd.arm(4, agentproto.StateCompleted)
	acc := h.admit(h.inv("echo", `{"x":2}`))
	advanceUntil(t, h, "the settlement to commit", func() bool { return h.state(acc.TaskID).State == agentproto.StateCompleted })
	wantRetriedEcho(t, h, fd, acc.TaskID, 4)
}

// The same when the failing statement is the UPDATE itself: the operation
// (alone in its batch, or rolled back to its savepoint) is retried.
func TestSettlementStatementFailureIsRetried(t *testing.T) {
	h, fd := newFaultHarness(t)
	h.exec.Script("echo", taskstest.Step{Echo: true})
	fd.inUpdate = true
	fd.arm(2, agentproto.StateCompleted)
	acc := h.admit(h.inv("echo", `{"x":3}`))
	advanceUntil(t, h, "the settlement to commit", func() bool { return h.state(acc.TaskID).State == agentproto.StateCompleted })
	wantRetriedEcho(t, h, fd, acc.TaskID, 2)
}

// wantRetriedEcho checks that the echo task settled completed with a
// gap-free history of exactly two revisions after n injected failures.
func wantRetriedEcho(t *testing.T, h *harness, fd *faultDriver, id string, n int) {
	t.Helper()
	if got := fd.failures(); got != n {
		t.Fatalf("%d injected failures, want %d", got, n)
	}
	evs := h.checkHistory(id)
	if got := types(evs); len(got) != 2 || got[0] != "status:running" || got[1] != "completed:" {
		t.Fatalf("history %v, want [status:running completed:]", got)
	}
}
