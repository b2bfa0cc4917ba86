package gatewaytest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentgw/agentgw/internal/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// TestProgressFloodE2E: a tool sends 5,000 progress updates over about a
// second. The events a real XMPP client receives through Prosody stay
// within [tasks] progress_per_second per second of the task's run, are
// gap-free, and end with the final progress right before the terminal
// event.
func TestProgressFloodE2E(t *testing.T) {
	const perSecond = 5
	const n = 5000
	te := startTaskEnvConfig(t, []string{"alice"}, func(c *config.Config) { c.Tasks.ProgressPerSecond = perSecond },
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
		}, tool("flood", "Flood", "Floods progress.", `{"type":"object"}`, false))
	c := te.Dial("alice")
	acc := te.invoke(t, c, "flood", `{}`)
	events, stop := c.Subscribe(te.ep, acc.TaskID)
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
	stored, err := te.Gateway.Engine.Events(te.ctx, acc.TaskID)
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
