package tasks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentgw/agentgw/tasks"
)

// TestAdmitBoundsDelegationDepth: an invocation deeper than
// MaxDelegationDepth is refused with ErrDelegationDepth, but only after the
// endpoint is authorized (an unauthorized caller gets ErrNotFound whatever
// its depth); an admitted depth is stored with the task and handed to the
// backend, also when the task is dispatched after a restart.
func TestAdmitBoundsDelegationDepth(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) { c.MaxDelegationDepth = 2 })

	deep := h.inv("forecast.get", `{"city":"Riga"}`)
	deep.DelegationDepth = 3
	_, err := h.eng.Admit(context.Background(), deep)
	if !errors.Is(err, tasks.ErrDelegationDepth) {
		t.Fatalf("depth 3 over a bound of 2: %v, want ErrDelegationDepth", err)
	}
	stranger := deep
	stranger.Caller, stranger.Route = mallory, mallory+"/x"
	if _, err := h.eng.Admit(context.Background(), stranger); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("unauthorized caller at depth 3: %v, want ErrNotFound", err)
	}

	tasks.HoldDispatch(h.eng, true)
	ok := h.inv("forecast.get", `{"city":"Riga"}`)
	ok.DelegationDepth = 2
	acc := h.admit(ok)
	h.crash()
	h.open()
	select {
	case call := <-h.exec.Started():
		if call.TaskID != acc.TaskID || call.DelegationDepth != 2 {
			t.Fatalf("dispatched %s at depth %d, want %s at 2", call.TaskID, call.DelegationDepth, acc.TaskID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the accepted task was not dispatched after the restart")
	}
}
