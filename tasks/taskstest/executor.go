// Package taskstest provides a deterministic scripted backend for the task
// engine, plus the small in-memory collaborators (directory, policies, event
// recorder) that engine tests, the demo and end-to-end tests wire around it.
//
// A Script is a list of Steps run in order for each call of a tool: report
// progress, ask for input, wait on a gate or for cancellation, complete,
// fail, settle cancelled, return without settling, or panic. Every Run
// method's error is recorded, so a test can assert, for example, that
// output after a terminal cancellation was refused with tasks.ErrSettled.
package taskstest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentgw/agentgw/tasks"
)

// Step is one scripted action. Exactly one field should be set.
type Step struct {
	Progress *tasks.Progress
	// Input asks for input; the answer (or nil) is appended to
	// Record.Inputs.
	Input *tasks.InputRequest
	// Complete settles completed with this result.
	Complete *tasks.ToolResult
	// Echo completes with the call's canonical arguments as text content
	// and as structuredContent, plus the answers to earlier inputs in
	// _meta.inputs.
	Echo bool
	Fail *tasks.Failure
	// AwaitCancel blocks until the engine has accepted a cancellation.
	AwaitCancel bool
	// Cancelled settles cancelled with this reason.
	Cancelled *string
	// Gate blocks until the channel is closed.
	Gate <-chan struct{}
	// Return makes Execute return without settling.
	Return bool
	// Panic makes Execute panic.
	Panic bool
	// Do runs custom code; its error is recorded.
	Do func(ctx context.Context, call tasks.Call, run tasks.Run) error
}

// Script is a tool's behaviour.
type Script []Step

// Record is what one execution did.
type Record struct {
	Call   tasks.Call
	Inputs []json.RawMessage
	Errors []error // one per step, nil for success
	Done   chan struct{}
}

// Executor is a tasks.Backend that runs scripts. It is safe for concurrent
// use.
type Executor struct {
	mu       sync.Mutex
	scripts  map[string]Script
	fallback Script
	features tasks.Features
	records  []*Record
	byTask   map[string]*Record
	started  chan tasks.Call
}

var _ tasks.Backend = (*Executor)(nil)

// New returns an executor advertising f whose unscripted tools Echo.
func New(f tasks.Features) *Executor {
	return &Executor{
		scripts:  map[string]Script{},
		fallback: Script{{Echo: true}},
		features: f,
		byTask:   map[string]*Record{},
		started:  make(chan tasks.Call, 1024),
	}
}

// Script sets the script of a tool.
func (x *Executor) Script(tool string, steps ...Step) *Executor {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.scripts[tool] = steps
	return x
}

// Features implements tasks.Backend.
func (x *Executor) Features() tasks.Features { return x.features }

// Started delivers each call as its execution begins (buffered).
func (x *Executor) Started() <-chan tasks.Call { return x.started }

// Calls returns every call executed so far, in start order.
func (x *Executor) Calls() []tasks.Call {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]tasks.Call, len(x.records))
	for i, r := range x.records {
		out[i] = r.Call
	}
	return out
}

// Record returns the record of a task's execution, or nil.
func (x *Executor) Record(taskID string) *Record {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.byTask[taskID]
}

// Execute implements tasks.Executor.
func (x *Executor) Execute(ctx context.Context, call tasks.Call, run tasks.Run) {
	x.mu.Lock()
	script, ok := x.scripts[call.Tool]
	if !ok {
		script = x.fallback
	}
	rec := &Record{Call: call, Done: make(chan struct{})}
	x.records = append(x.records, rec)
	x.byTask[call.TaskID] = rec
	x.mu.Unlock()
	defer close(rec.Done)
	select {
	case x.started <- call:
	default:
	}
	for _, s := range script {
		err, stop := x.step(ctx, call, run, rec, s)
		x.mu.Lock()
		rec.Errors = append(rec.Errors, err)
		x.mu.Unlock()
		if stop {
			return
		}
	}
}

func (x *Executor) step(ctx context.Context, call tasks.Call, run tasks.Run, rec *Record, s Step) (error, bool) {
	switch {
	case s.Progress != nil:
		return run.Progress(*s.Progress), false
	case s.Input != nil:
		ans, err := run.RequestInput(ctx, *s.Input)
		x.mu.Lock()
		rec.Inputs = append(rec.Inputs, ans)
		x.mu.Unlock()
		return err, ctx.Err() != nil
	case s.Complete != nil:
		return run.Complete(*s.Complete), false
	case s.Echo:
		return run.Complete(x.echo(call, rec)), false
	case s.Fail != nil:
		return run.Fail(*s.Fail), false
	case s.AwaitCancel:
		select {
		case <-run.CancelRequested():
			return nil, false
		case <-ctx.Done():
			return ctx.Err(), true
		}
	case s.Cancelled != nil:
		return run.Cancelled(*s.Cancelled), false
	case s.Gate != nil:
		select {
		case <-s.Gate:
			return nil, false
		case <-ctx.Done():
			return ctx.Err(), true
		}
	case s.Return:
		return nil, true
	case s.Panic:
		panic("taskstest: scripted panic")
	case s.Do != nil:
		return s.Do(ctx, call, run), false
	}
	return fmt.Errorf("taskstest: empty step"), false
}

func (x *Executor) echo(call tasks.Call, rec *Record) tasks.ToolResult {
	text, _ := json.Marshal(string(call.Arguments))
	content := json.RawMessage(`[{"type":"text","text":` + string(text) + `}]`)
	r := tasks.ToolResult{Content: content, StructuredContent: json.RawMessage(call.Arguments)}
	x.mu.Lock()
	inputs := append([]json.RawMessage(nil), rec.Inputs...)
	x.mu.Unlock()
	if len(inputs) > 0 {
		list := []byte(`{"inputs":[`)
		for i, in := range inputs {
			if i > 0 {
				list = append(list, ',')
			}
			if in == nil {
				in = json.RawMessage("null")
			}
			list = append(list, in...)
		}
		r.Meta = append(list, "]}"...)
	}
	return r
}

// Text is a ToolResult with one text content item.
func Text(s string) *tasks.ToolResult {
	b, _ := json.Marshal(s)
	return &tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":` + string(b) + `}]`)}
}

// Percent returns a pointer to p, for Progress steps.
func Percent(p float64) *float64 { return &p }

// Reason returns a pointer to s, for Cancelled steps.
func Reason(s string) *string { return &s }
