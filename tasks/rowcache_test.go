package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// The committer keeps each running task's row as it last wrote it (issue
// 34). A row changed behind its back (a second process on the same file)
// makes that copy stale: the settlement's compare-and-set must then fail
// rather than overwrite the other write, and its retry must read the store
// and settle from the row there.
func TestStaleCachedRowNeverOverwrites(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	h.exec.Script("echo", taskstest.Step{Gate: gate}, taskstest.Step{Echo: true})
	acc := h.admit(h.inv("echo", `{}`))
	s := h.waitState(acc.TaskID, agentproto.StateRunning)
	if s.Revision != 1 {
		t.Fatalf("running at revision %d", s.Revision)
	}

	bumpBehind(t, h.path, acc.TaskID)

	close(gate) // the executor completes against the stale copy
	// The failed commit is retried on the engine's (fake) clock.
	deadline := time.Now().Add(20 * time.Second)
	for {
		s = h.state(acc.TaskID)
		if s.State.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task stayed %s at revision %d", s.State, s.Revision)
		}
		h.clk.Advance(200 * time.Millisecond)
		time.Sleep(5 * time.Millisecond)
	}
	if s.State != agentproto.StateCompleted || s.Revision != 3 {
		t.Fatalf("settled %s at revision %d, want completed at 3 (after the other write at 2)", s.State, s.Revision)
	}
	ev := h.terminal(acc.TaskID)
	if ev.Type != agentproto.EventCompleted || ev.Revision != 3 {
		t.Fatalf("terminal event %s at revision %d", ev.Type, ev.Revision)
	}
}

// bumpBehind moves the task's revision on in the harness's store through a
// connection of its own, as a second process would: the SQLite file at
// path, or the PostgreSQL database standing for it.
func bumpBehind(t *testing.T, path, id string) {
	t.Helper()
	ctx := context.Background()
	if pgMode() {
		db := openPG(t, path)
		defer db.Close()
		if _, err := db.Pool.Exec(ctx, `UPDATE tasks SET revision = revision + 1 WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		return
	}
	other, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Write.ExecContext(ctx, `UPDATE tasks SET revision = revision + 1 WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
}
