package taskstest

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/agentgw/agentgw/tasks"
)

// Run is a recording tasks.Run for backend tests: it keeps every report an
// executor makes and plays the engine's part only as far as a test needs,
// refusing reports after settlement with tasks.ErrSettled. Read the
// recorded fields once Done is closed, or through Snapshot and Outcome.
type Run struct {
	mu           sync.Mutex
	Updates      []tasks.Progress // every progress report, in order
	Inputs       []tasks.InputRequest
	Result       *tasks.ToolResult // set by Complete
	Failure      *tasks.Failure    // set by Fail
	CancelReason string            // set by Cancelled
	Settled      bool

	// Answer answers RequestInput; nil blocks until the context ends.
	Answer func(tasks.InputRequest) (json.RawMessage, error)
	// CancelReq is what CancelRequested returns: close it to request
	// cancellation.
	CancelReq chan struct{}
	// Done is closed at settlement.
	Done chan struct{}
	// ProgressCh and InputCh carry each progress report and input request
	// as it arrives (buffered; a report beyond the buffer is only
	// recorded). FirstProgress is closed at the first progress report.
	ProgressCh    chan tasks.Progress
	InputCh       chan tasks.InputRequest
	FirstProgress chan struct{}
	once          sync.Once
}

// NewRun returns a Run that nothing has reported to yet.
func NewRun() *Run {
	return &Run{
		CancelReq:     make(chan struct{}),
		Done:          make(chan struct{}),
		ProgressCh:    make(chan tasks.Progress, 100),
		InputCh:       make(chan tasks.InputRequest, 10),
		FirstProgress: make(chan struct{}),
	}
}

var _ tasks.Run = (*Run)(nil)

func (r *Run) Progress(p tasks.Progress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Settled {
		return tasks.ErrSettled
	}
	r.Updates = append(r.Updates, p)
	r.once.Do(func() { close(r.FirstProgress) })
	select {
	case r.ProgressCh <- p:
	default:
	}
	return nil
}

func (r *Run) RequestInput(ctx context.Context, req tasks.InputRequest) (json.RawMessage, error) {
	r.mu.Lock()
	if r.Settled {
		r.mu.Unlock()
		return nil, tasks.ErrSettled
	}
	r.Inputs = append(r.Inputs, req)
	answer := r.Answer
	r.mu.Unlock()
	select {
	case r.InputCh <- req:
	default:
	}
	if answer != nil {
		return answer(req)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (r *Run) settle(f func()) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Settled {
		return tasks.ErrSettled
	}
	r.Settled = true
	f()
	close(r.Done)
	return nil
}

func (r *Run) Complete(tr tasks.ToolResult) error { return r.settle(func() { r.Result = &tr }) }
func (r *Run) Fail(f tasks.Failure) error         { return r.settle(func() { r.Failure = &f }) }
func (r *Run) Cancelled(reason string) error {
	return r.settle(func() { r.CancelReason = reason })
}
func (r *Run) CancelRequested() <-chan struct{} { return r.CancelReq }

// Fataler is the part of testing.TB that Wait needs.
type Fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Wait fails the test unless the run settles within d.
func (r *Run) Wait(tb Fataler, d time.Duration) {
	tb.Helper()
	select {
	case <-r.Done:
	case <-time.After(d):
		tb.Fatalf("task not settled within %v", d)
	}
}

// Snapshot returns the settlement so far and a copy of the progress
// reports.
func (r *Run) Snapshot() (*tasks.ToolResult, *tasks.Failure, string, []tasks.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Result, r.Failure, r.CancelReason, append([]tasks.Progress(nil), r.Updates...)
}

// Outcome describes how the run settled, for failure messages.
func (r *Run) Outcome() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.Result != nil:
		return "completed: " + string(r.Result.Content)
	case r.Failure != nil:
		return "failed: " + r.Failure.Code + ": " + r.Failure.Message
	case r.Settled:
		return "cancelled: " + r.CancelReason
	}
	return "not settled"
}
