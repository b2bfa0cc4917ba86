package tasks_test

// A backend that commits state with a running task (tasks.Checkpointer)
// has the task resumed after a crash or a graceful restart (tasks.Resumer)
// instead of settled agentgw:interrupted; a task waiting for input is
// settled interrupted and the backend told to forget its state.

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit"
)

type resumeBackend struct {
	ask         bool        // Execute asks for input after its checkpoint
	checkpoints chan string // task ids whose state was committed
	mu          sync.Mutex
	resumed     map[string]string // task id → state handed to Resume
	forgotten   map[string]string
	cancelled   map[string]bool // resumed with the cancellation pending
}

func newResumeBackend() *resumeBackend {
	return &resumeBackend{checkpoints: make(chan string, 8), resumed: map[string]string{}, forgotten: map[string]string{}, cancelled: map[string]bool{}}
}

func (b *resumeBackend) Features() tasks.Features {
	return tasks.Features{Progress: true, Cancel: true, Input: true}
}

func (b *resumeBackend) Execute(ctx context.Context, call tasks.Call, run tasks.Run) {
	if err := run.(tasks.Checkpointer).Checkpoint([]byte(`{"remote":"r-`+call.TaskID+`"}`), true); err != nil {
		_ = run.Fail(tasks.Failure{Code: agentproto.CodeInternalError, Message: "checkpoint: " + err.Error()})
		return
	}
	b.checkpoints <- call.TaskID
	if b.ask {
		_, _ = run.RequestInput(ctx, tasks.InputRequest{Question: "Which?", Schema: json.RawMessage(`{"type":"object"}`)})
	}
	<-ctx.Done() // the gateway stops; the remote work goes on
}

func (b *resumeBackend) Resume(ctx context.Context, call tasks.Call, state []byte, run tasks.Run) {
	b.mu.Lock()
	b.resumed[call.TaskID] = string(state)
	select {
	case <-run.CancelRequested():
		b.cancelled[call.TaskID] = true
	default:
	}
	b.mu.Unlock()
	_ = run.Complete(tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":"resumed"}]`)})
}

func (b *resumeBackend) Forget(call tasks.Call, state []byte) {
	b.mu.Lock()
	b.forgotten[call.TaskID] = string(state)
	b.mu.Unlock()
}

func resumeHarness(t *testing.T, rb *resumeBackend) *harness {
	return newHarness(t, func(c *tasks.Config) {
		c.ShutdownGrace = 2 * time.Second
		c.Backends = func(endpoint string) (tasks.Backend, bool) {
			if endpoint != weather {
				return nil, false
			}
			return rb, true
		}
	})
}

func (b *resumeBackend) waitCheckpoint(t *testing.T, id string) {
	t.Helper()
	select {
	case got := <-b.checkpoints:
		if got != id {
			t.Fatalf("checkpoint of %s, want %s", got, id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no checkpoint")
	}
}

func TestResumeAfterCrash(t *testing.T) {
	rb := newResumeBackend()
	h := resumeHarness(t, rb)
	acc := h.admit(h.inv("echo", `{}`))
	rb.waitCheckpoint(t, acc.TaskID)
	h.crash()
	h.open()
	if ev := h.terminal(acc.TaskID); ev.Type != agentproto.EventCompleted {
		t.Fatalf("after the crash the task ended %s %s, want completed by Resume", ev.Type, ev.Payload)
	}
	rb.mu.Lock()
	state := rb.resumed[acc.TaskID]
	rb.mu.Unlock()
	if state != `{"remote":"r-`+acc.TaskID+`"}` {
		t.Fatalf("Resume got state %q", state)
	}
	for _, ev := range h.checkHistory(acc.TaskID) {
		if strings.Contains(string(ev.Payload), agentproto.CodeInterrupted) {
			t.Fatalf("a resumed task has an interrupted event: %s", ev.Payload)
		}
	}
}

func TestResumeAfterGracefulClose(t *testing.T) {
	rb := newResumeBackend()
	h := resumeHarness(t, rb)
	acc := h.admit(h.inv("echo", `{}`))
	rb.waitCheckpoint(t, acc.TaskID)
	if err := h.eng.Close(); err != nil {
		t.Fatal(err)
	}
	if s := h.state(acc.TaskID); s.State != agentproto.StateRunning {
		t.Fatalf("a resumable task after a graceful close is %s, want still running", s.State)
	}
	h.db.Close()
	h.open()
	if ev := h.terminal(acc.TaskID); ev.Type != agentproto.EventCompleted {
		t.Fatalf("after the restart the task ended %s, want completed by Resume", ev.Type)
	}
	h.checkHistory(acc.TaskID)
}

func TestResumeWaitingForInputInterrupts(t *testing.T) {
	rb := newResumeBackend()
	rb.ask = true
	h := resumeHarness(t, rb)
	acc := h.admit(h.inv("echo", `{}`))
	rb.waitCheckpoint(t, acc.TaskID)
	h.waitState(acc.TaskID, agentproto.StateInputRequired)
	h.crash()
	h.open()
	ev := h.terminal(acc.TaskID)
	if ev.Type != agentproto.EventFailed || !strings.Contains(string(ev.Payload), agentproto.CodeInterrupted) || !strings.Contains(string(ev.Payload), "waiting for input") {
		t.Fatalf("a task waiting for input at the crash ended %s %s, want interrupted", ev.Type, ev.Payload)
	}
	testkit.WaitFor(t, 10*time.Second, "Forget", func() bool {
		rb.mu.Lock()
		defer rb.mu.Unlock()
		return rb.forgotten[acc.TaskID] != ""
	})
	h.checkHistory(acc.TaskID)
}
