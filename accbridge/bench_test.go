package accbridge

import (
	"context"
	"testing"
	"time"

	"github.com/agentgw/agentgw/tasks/taskstest"
)

// BenchmarkBridgeRun is one run ("echo hello") through the Agent alone —
// the run row, create_run, the events and the settlement on a recording
// tasks.Run — against the in-process reference connector, without XMPP or
// the task engine: the bridge's share of BenchmarkACCRun/gateway.
func BenchmarkBridgeRun(b *testing.B) {
	e := newEnv(b, nil)
	e.connect(e.enroll("farm"), &syncBuf{})
	e.ready()
	for b.Loop() {
		r := taskstest.NewRun()
		e.agent.Execute(context.Background(), call(goal("echo hello")), r)
		select {
		case <-r.Done:
		case <-time.After(10 * time.Second):
			b.Fatal("run did not settle")
		}
		if res, _, _, _ := r.Snapshot(); res == nil {
			b.Fatalf("run: %s", r.Outcome())
		}
	}
}
