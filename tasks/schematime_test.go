package tasks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// TestAdmitPatternTimeout: arguments whose validation runs into the regular
// expression match timeout are refused with resource-constraint (a
// validation-time limit), promptly, and nothing is admitted; the same tool
// still admits arguments that validate quickly.
func TestAdmitPatternTimeout(t *testing.T) {
	h := newHarness(t)
	m := taskstest.Manifest(weather, version, taskstest.ToolSpec{
		Name:        "evil",
		InputSchema: `{"type":"object","properties":{"s":{"type":"string","pattern":"^(a+)+$"}}}`,
	})
	h.dir.Add(m, true)
	h.m = m
	start := time.Now()
	_, err := h.eng.Admit(context.Background(), h.inv("evil", `{"s":"`+strings.Repeat("a", 5000)+`!"}`))
	wantErr(t, err, tasks.ErrResourceConstraint)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("admission took %v", took)
	}
	h.admit(h.inv("evil", `{"s":"aaa"}`))
}
