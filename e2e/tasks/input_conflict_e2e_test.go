package tasks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// TestInputAnswerSurvivesAMovedRevision: the tool asks a question and
// keeps reporting progress while the question is pending, so the revision
// the question came with is stale when the caller answers. The gateway
// answers that provide-input with conflict; agentclient reads the task
// again and, the same question still pending, answers at the current
// revision. Before, the answer was dropped on the conflict and the task
// waited for input until the input request expired.
func TestInputAnswerSurvivesAMovedRevision(t *testing.T) {
	t.Parallel()
	x := e2e.DefaultExecutor()
	x.Script("ask", taskstest.Step{Do: func(ctx context.Context, _ tasks.Call, run tasks.Run) error {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(150 * time.Millisecond):
				}
				run.Progress(tasks.Progress{Percent: taskstest.Percent(float64(n % 100)), Message: "still thinking"})
			}
		}()
		ans, err := run.RequestInput(ctx, tasks.InputRequest{Question: "Which unit?", ExpiresAt: time.Now().Add(40 * time.Second),
			Schema: json.RawMessage(`{"type":"object","properties":{"unit":{"enum":["C","F"]}},"required":["unit"]}`)})
		if err != nil {
			return err
		}
		return run.Complete(tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":"got ` + string(ans[9:10]) + `"}]`)})
	}})
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather", Executor: x}}, Users: []string{"alice"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := e.Dial("alice")
	var moved int64
	var taskID string
	ep := e.Endpoint("weather")
	out, err := c.Call(ctx, ep, "ask", json.RawMessage(`{}`), agentclient.CallOptions{
		OnAccepted: func(a *agentclient.Accepted) { taskID = a.TaskID },
		OnInput: func(ctx context.Context, req agentclient.InputRequest) (json.RawMessage, error) {
			// Answer only once the task has moved past the question's
			// revision (Follow runs this handler on its event loop, so
			// the task's state is read here).
			for {
				st, err := c.State(ctx, ep, taskID)
				if err != nil {
					return nil, err
				}
				if st.Revision >= req.Revision+2 {
					moved = st.Revision - req.Revision
					return json.RawMessage(`{"unit":"C"}`), nil
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.State != agentproto.StateCompleted {
		t.Fatalf("state %s, want completed (payload %s)", out.State, out.Payload)
	}
	t.Logf("completed; the answer was given %d revisions after the question's", moved)
}
