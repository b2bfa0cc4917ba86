package gateway

import (
	"context"
	"testing"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// A leased backend on an instance without the lease fails tasks retryable
// instead of calling a backend that has no connection; with a term it runs
// there.
func TestLeasedBackendExecutesOnlyWithATerm(t *testing.T) {
	lb := &leasedBackend{self: "gw-1", features: tasks.Features{Progress: true}}
	lb.setHolder("gw-2")
	if !lb.Ready() {
		t.Fatal("a non-holder that knows the holder waits for nothing")
	}
	run := taskstest.NewRun()
	lb.Execute(context.Background(), tasks.Call{TaskID: "t"}, run)
	if run.Failure == nil || run.Failure.Code != agentproto.CodeUnavailable || !run.Failure.Retryable {
		t.Fatalf("without a term: %+v", run.Failure)
	}
	x := taskstest.New(tasks.Features{})
	lb.setHolder("gw-1")
	lb.set(&LeasedTerm{Backend: x, Ready: func() bool { return true }})
	if !lb.Ready() {
		t.Fatal("the holder with a ready term is not ready")
	}
	run = taskstest.NewRun()
	lb.Execute(context.Background(), tasks.Call{TaskID: "t2", Tool: "echo", Arguments: []byte(`{}`)}, run)
	if len(x.Calls()) != 1 {
		t.Fatalf("the term's backend got %d calls", len(x.Calls()))
	}
}
