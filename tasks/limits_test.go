package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// TestProgressFloodIsCoalesced: a backend sends 10,000 progress updates
// within one second (of the fake clock). At most ProgressPerSecond progress
// revisions are committed in that second, revisions stay gap-free, the
// final value is committed right before the terminal event, and the
// notifier (the caller) sees it.
func TestProgressFloodIsCoalesced(t *testing.T) {
	const perSecond = 10
	h := newHarness(t, func(c *tasks.Config) { c.ProgressPerSecond = perSecond })
	const n = 10000
	var errs int
	h.exec.Script("echo", taskstest.Step{Do: func(ctx context.Context, call tasks.Call, run tasks.Run) error {
		for i := 1; i <= n; i++ {
			h.clk.Advance(time.Second / n)
			if err := run.Progress(tasks.Progress{Percent: taskstest.Percent(float64(i) * 100 / n), Stage: "copy"}); err != nil {
				errs++
			}
		}
		return run.Complete(*taskstest.Text("done"))
	}})
	acc := h.admit(h.inv("echo", `{}`))
	h.terminal(acc.TaskID)
	evs := h.checkHistory(acc.TaskID)
	if errs != 0 {
		t.Fatalf("%d progress calls failed", errs)
	}
	var progress []tasks.StoredEvent
	for _, e := range evs {
		if e.Type == agentproto.EventProgress {
			progress = append(progress, e)
		}
	}
	t.Logf("%d progress updates in 1 s -> %d progress revisions, %d events in all", n, len(progress), len(evs))
	if len(progress) == 0 || len(progress) > perSecond {
		t.Fatalf("%d progress revisions for %d updates in one second, want 1..%d", len(progress), n, perSecond)
	}
	last := evs[len(evs)-2]
	if last.Type != agentproto.EventProgress || string(last.Payload) != `{"percent":100,"stage":"copy"}` {
		t.Fatalf("event before the terminal one: %s %s, want the final progress", last.Type, last.Payload)
	}
	got := h.rec.Events(acc.TaskID)
	if p := got[len(got)-2]; p.Type != agentproto.EventProgress || string(p.Payload) != `{"percent":100,"stage":"copy"}` {
		t.Fatalf("caller saw %s %s before the terminal event", p.Type, p.Payload)
	}
}

// TestProgressUnchangedIsDropped: repeating the committed value, even with
// time passing, commits nothing.
func TestProgressUnchangedIsDropped(t *testing.T) {
	h := newHarness(t)
	h.exec.Script("echo", taskstest.Step{Do: func(ctx context.Context, call tasks.Call, run tasks.Run) error {
		for i := 0; i < 50; i++ {
			h.clk.Advance(time.Second)
			if err := run.Progress(tasks.Progress{Percent: taskstest.Percent(40), Message: "same"}); err != nil {
				return err
			}
		}
		return run.Complete(*taskstest.Text("done"))
	}})
	acc := h.admit(h.inv("echo", `{}`))
	h.terminal(acc.TaskID)
	evs := h.checkHistory(acc.TaskID)
	if got := types(evs); len(got) != 3 || evs[1].Type != agentproto.EventProgress {
		t.Fatalf("events = %v, want status, one progress, completed", got)
	}
}

// TestProgressRateOverSeconds: a flood over three seconds keeps committing
// (the coalesced value is flushed as slots free), and no one-second window
// of commit times holds more than ProgressPerSecond progress revisions.
func TestProgressRateOverSeconds(t *testing.T) {
	const perSecond = 4
	h := newHarness(t, func(c *tasks.Config) { c.ProgressPerSecond = perSecond })
	const n = 3000
	h.exec.Script("echo", taskstest.Step{Do: func(ctx context.Context, call tasks.Call, run tasks.Run) error {
		for i := 1; i <= n; i++ {
			h.clk.Advance(3 * time.Second / n)
			if err := run.Progress(tasks.Progress{Percent: taskstest.Percent(float64(i) * 100 / n)}); err != nil {
				return err
			}
		}
		return run.Complete(*taskstest.Text("done"))
	}})
	acc := h.admit(h.inv("echo", `{}`))
	h.terminal(acc.TaskID)
	evs := h.checkHistory(acc.TaskID)
	var at []time.Time
	for _, e := range evs {
		if e.Type == agentproto.EventProgress {
			at = append(at, e.Created)
		}
	}
	t.Logf("%d progress updates over 3 s -> %d progress revisions", n, len(at))
	if len(at) <= perSecond {
		t.Fatalf("only %d progress revisions over three seconds: the pending value was not flushed as slots freed", len(at))
	}
	for i := range at {
		j := i
		for j < len(at) && at[j].Sub(at[i]) < time.Second {
			j++
		}
		if j-i > perSecond {
			t.Fatalf("%d progress revisions within one second from %v", j-i, at[i])
		}
	}
}
