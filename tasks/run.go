package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/telemetry"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

// toolInfo is what a running task needs from its pinned tool.
type toolInfo struct {
	outputSchema []byte // canonical; nil when the tool declares none
}

// run is the engine's Run for one dispatched task. Every method commits
// through the committer; the executor never writes state.
type run struct {
	e    *Engine
	id   string
	tool *toolInfo
	ctx  context.Context
	stop context.CancelFunc

	cancelReq  chan struct{}
	cancelOnce sync.Once
	done       chan struct{} // closed once the task is terminal
	doneOnce   sync.Once

	// Committer-owned.
	lastPct      float64
	hasPct       bool
	lastProgress []byte // payload of the last committed progress

	// Progress coalescing (see coalesce.go), under pmu.
	pmu        sync.Mutex
	pending    *Progress   // merged updates not committed yet
	progTimes  []time.Time // commits of progress within the last second
	flushTimer clock.Timer // armed while pending waits for a free slot

	mu         sync.Mutex
	input      *pendingInput
	inputTimer clock.Timer

	// resumable: the backend committed state it can resume from
	// (Checkpoint); a shutdown leaves the task for the next start.
	resumable atomic.Bool
	// early is an answer that reached the run before its RequestInput's
	// commit had registered the request (an answer committed on another
	// cluster member right after that commit).
	early *earlyAnswer
}

type earlyAnswer struct {
	requestID string
	answer    json.RawMessage
}

type pendingInput struct {
	requestID string
	answer    chan json.RawMessage // buffered 1
	err       chan error           // buffered 1
}

var _ Run = (*run)(nil)

// launch runs the executor for a task that has just committed running.
func (e *Engine) launch(call Call, backend Backend, tool *toolInfo) {
	e.start(call, tool, func(ctx context.Context, r *run) { backend.Execute(ctx, call, r) })
}

// start runs exec for a running task: a fresh call (launch) or a resumed
// one (resume.go).
func (e *Engine) start(call Call, tool *toolInfo, exec func(ctx context.Context, r *run)) {
	ctx, stop := context.WithCancel(e.execCtx)
	r := &run{e: e, id: call.TaskID, tool: tool, ctx: ctx, stop: stop,
		cancelReq: make(chan struct{}), done: make(chan struct{})}
	e.mu.Lock()
	e.runs[call.TaskID] = r
	if e.cl != nil && e.cl.earlyCancel[call.TaskID] {
		// A cancel committed elsewhere was taken before this launch.
		delete(e.cl.earlyCancel, call.TaskID)
		r.cancelOnce.Do(func() { close(r.cancelReq) })
	}
	if e.closing.Load() {
		// Close settles it as interrupted; no backend call starts now.
		e.mu.Unlock()
		stop()
		return
	}
	e.execWG.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.execWG.Done()
		defer stop()
		defer func() {
			if p := recover(); p != nil {
				e.log.Error("tasks: executor panicked", "task", call.TaskID)
				r.settleFailure(Failure{Code: agentproto.CodeInternalError, Message: "The tool failed unexpectedly."})
			}
		}()
		bctx, bsp := telemetry.StartTask(ctx, call.TaskID, telemetry.Backend)
		exec(bctx, r)
		bsp.End()
		if !r.settled() && !e.closing.Load() {
			// An executor must settle; nothing is silently dropped.
			r.settleFailure(Failure{Code: agentproto.CodeInternalError, Message: "The tool ended without a result."})
		}
	}()
}

// finished releases a settled task's resources, after commit.
func (e *Engine) finished(id string, state agentproto.State) {
	e.disarmDeadline(id)
	if e.cfg.Notifier == nil {
		telemetry.Forget(id) // else after its last event (notifyLoop)
	}
	e.mu.Lock()
	r := e.runs[id]
	delete(e.runs, id)
	if e.cl != nil {
		delete(e.cl.earlyCancel, id)
	}
	e.mu.Unlock()
	if r == nil {
		return
	}
	r.stopInputTimer()
	r.stopFlush()
	r.doneOnce.Do(func() { close(r.done) })
	// The backend call has no further purpose once the task is settled.
	r.stop()
}

func (r *run) settled() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *run) stopInputTimer() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inputTimer != nil {
		r.inputTimer.Stop()
		r.inputTimer = nil
	}
}

func (r *run) CancelRequested() <-chan struct{} { return r.cancelReq }

// apply runs fn against the task in the next group commit, after the
// checks every executor mutation shares: terminal tasks refuse (output after
// settlement is discarded) and a reached deadline settles the task instead.
// A storage failure is returned to the executor.
func (r *run) apply(fn func(b *batch, t *taskdb.Task) error) error {
	return r.mutate(r.e.do, fn)
}

// settle is apply for a settlement: the backend call has ended, so its
// outcome must not be lost to a storage failure. The commit is retried
// until it succeeds (or the task settles otherwise, or the engine closes),
// and the executor waits for it.
func (r *run) settle(fn func(b *batch, t *taskdb.Task) error) error {
	return r.mutate(r.e.doDurable, fn)
}

func (r *run) mutate(do func(func(b *batch) error) error, fn func(b *batch, t *taskdb.Task) error) error {
	if r.e.closing.Load() {
		return ErrClosed
	}
	var result error
	err := do(func(b *batch) error {
		t, err := b.cachedOrLoad(r.id)
		if err != nil {
			return err
		}
		if t == nil || t.State.Terminal() {
			result = ErrSettled
			return nil
		}
		if done, err := b.expireIfDue(t); done || err != nil {
			result = ErrSettled
			return err
		}
		return fn(b, t)
	})
	if err != nil {
		return err
	}
	return result
}

// Progress merges p into the pending update and commits it when the task's
// progress rate allows; otherwise the merged value waits for a free slot
// (or is flushed before input_required or the settlement).
func (r *run) Progress(p Progress) error {
	if r.settled() {
		return ErrSettled
	}
	if r.e.closing.Load() {
		return ErrClosed
	}
	if !r.offer(p) {
		return nil // coalesced: committed later with whatever follows
	}
	var result error
	err := r.apply(func(b *batch, t *taskdb.Task) error {
		if t.State == agentproto.StateAccepted {
			result = ErrInvalidTransition
			return nil
		}
		return r.flushProgress(b, t, false)
	})
	if err != nil {
		return err
	}
	return result
}

func (r *run) Complete(res ToolResult) error {
	payload, fail := r.e.completedPayload(res, r.tool)
	if fail != nil {
		if err := r.settleFailure(*fail); err != nil {
			return err
		}
		return fmt.Errorf("tasks: result rejected (%s)", fail.Code)
	}
	return r.settle(func(b *batch, t *taskdb.Task) error {
		if err := r.flushProgress(b, t, true); err != nil {
			return err
		}
		return b.settle(t, agentproto.StateCompleted, agentproto.EventCompleted, payload)
	})
}

func (r *run) Fail(f Failure) error { return r.settleFailure(f) }

func (r *run) settleFailure(f Failure) error {
	return r.settle(func(b *batch, t *taskdb.Task) error {
		if err := r.flushProgress(b, t, true); err != nil {
			return err
		}
		return b.fail(t, f)
	})
}

func (r *run) Cancelled(reason string) error {
	payload, err := r.e.lifecycle.build(agentproto.EventCancelled, cancelledValue(reason))
	if err != nil {
		return err
	}
	return r.settle(func(b *batch, t *taskdb.Task) error {
		if err := r.flushProgress(b, t, true); err != nil {
			return err
		}
		return b.settle(t, agentproto.StateCancelled, agentproto.EventCancelled, payload)
	})
}

// completedPayload builds and checks the completed payload: the whole
// CallToolResult, valid against the lifecycle schema, its structuredContent
// valid against the tool's outputSchema (unless isError), within
// MaxResultBytes. A failure says how the task must fail instead.
func (e *Engine) completedPayload(res ToolResult, tool *toolInfo) ([]byte, *Failure) {
	lim := ijson.Limits{MaxBytes: e.cfg.MaxResultBytes, MaxStringBytes: e.cfg.MaxResultBytes}
	tooLarge := &Failure{Code: agentproto.CodeResultTooLarge, Message: "The tool result exceeds the gateway's size limit."}
	invalid := &Failure{Code: agentproto.CodeInvalidOutput, Message: "The tool returned an invalid result."}
	parse := func(raw json.RawMessage) (any, *Failure) {
		v, err := ijson.Parse(raw, lim)
		if err != nil {
			if ijson.IsLimit(err) {
				return nil, tooLarge
			}
			return nil, invalid
		}
		return v, nil
	}
	if res.Content == nil {
		return nil, invalid
	}
	result := map[string]any{}
	content, f := parse(res.Content)
	if f != nil {
		return nil, f
	}
	result["content"] = content
	var structured any
	if res.StructuredContent != nil {
		if structured, f = parse(res.StructuredContent); f != nil {
			return nil, f
		}
		result["structuredContent"] = structured
	}
	if res.IsError != nil {
		result["isError"] = *res.IsError
	}
	if res.Meta != nil {
		meta, f := parse(res.Meta)
		if f != nil {
			return nil, f
		}
		result["_meta"] = meta
	}
	value := map[string]any{"result": result}
	if err := e.lifecycle.Validate(agentproto.EventCompleted, value); err != nil {
		return nil, invalid
	}
	isError := res.IsError != nil && *res.IsError
	if tool != nil && tool.outputSchema != nil && !isError {
		s, err := e.schemas.Compile(tool.outputSchema)
		if err != nil || res.StructuredContent == nil || s.Validate(structured) != nil {
			return nil, invalid
		}
	}
	payload, err := ijson.Canonical(value)
	if err != nil {
		return nil, invalid
	}
	if len(payload) > e.cfg.MaxResultBytes {
		return nil, tooLarge
	}
	return payload, nil
}

// RequestInput commits input_required with one pending request and waits for
// the caller's accepted answer.
func (r *run) RequestInput(ctx context.Context, req InputRequest) (json.RawMessage, error) {
	question := truncate(req.Question, maxText)
	if question == "" {
		return nil, ErrInvalidRequest
	}
	schemaCanon, schemaVal, err := ijson.Canonicalize(req.Schema, ijson.Limits{})
	if err != nil {
		return nil, ErrInvalidRequest
	}
	if _, ok := schemaVal.(map[string]any); !ok {
		return nil, ErrInvalidRequest
	}
	if _, err := r.e.schemas.Compile(schemaCanon); err != nil {
		return nil, ErrInvalidRequest
	}
	pi := &pendingInput{answer: make(chan json.RawMessage, 1), err: make(chan error, 1)}
	var result error
	err = r.apply(func(b *batch, t *taskdb.Task) error {
		if t.State != agentproto.StateRunning && t.State != agentproto.StateAccepted {
			result = ErrInvalidTransition
			return nil
		}
		now := b.now()
		var expires xmpptime.Instant
		hasExpiry := true
		switch {
		case !req.ExpiresAt.IsZero():
			expires = xmpptime.FromTime(req.ExpiresAt)
		case r.e.cfg.InputTimeout > 0:
			expires = xmpptime.FromTime(now.Add(r.e.cfg.InputTimeout))
		default:
			hasExpiry = false
		}
		if hasExpiry && expires.ReachedBy(now) {
			result = ErrInputExpired
			return nil
		}
		// The caller sees the latest progress before the question.
		if err := r.flushProgress(b, t, true); err != nil {
			return err
		}
		pi.requestID = newID("input-")
		v := map[string]any{
			"requestId":   pi.requestID,
			"question":    question,
			"inputSchema": schemaVal,
			"createdAt":   xmpptime.Format(now),
		}
		expiresAt := ""
		if hasExpiry {
			expiresAt = expires.String()
			v["expiresAt"] = expiresAt
		}
		payload, err := r.e.lifecycle.build(agentproto.EventInputRequired, v)
		if err != nil {
			return err
		}
		from := t.State
		if err := b.commit(t, []agentproto.State{from}, agentproto.EventInputRequired, payload, func(n *taskdb.Task) {
			n.State = agentproto.StateInputRequired
			n.InputRequest = pi.requestID
		}); err != nil {
			return err
		}
		if err := b.tx.InsertInput(&taskdb.Input{
			TaskID: t.ID, RequestID: pi.requestID, Status: taskdb.InputPending, Request: payload,
			ExpiresAt: expiresAt, CreatedRev: t.Revision,
		}); err != nil {
			return err
		}
		b.onCommit(func() {
			r.mu.Lock()
			r.input = pi
			if ea := r.early; ea != nil && ea.requestID == pi.requestID {
				// Answered on another member before this commit's
				// callbacks ran.
				r.early, r.input = nil, nil
				pi.answer <- ea.answer
				r.mu.Unlock()
				return
			}
			if hasExpiry {
				reqID := pi.requestID
				r.inputTimer = r.e.clock.AfterFunc(max(timerInstant(expires).Sub(r.e.clock.Now()), 0), func() {
					r.e.submitDurable(func(b *batch) error { return b.inputExpiryFired(r.id, reqID) })
				})
			}
			r.mu.Unlock()
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if result != nil {
		return nil, result
	}
	select {
	case ans := <-pi.answer:
		return ans, nil
	case err := <-pi.err:
		return nil, err
	case <-r.done:
		select {
		case err := <-pi.err:
			return nil, err
		default:
			return nil, ErrSettled
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// deliverInput hands an accepted answer (or an outcome) to the waiting
// RequestInput, after commit.
func (e *Engine) deliverInput(taskID, requestID string, answer json.RawMessage, outcome error) {
	e.mu.Lock()
	r := e.runs[taskID]
	e.mu.Unlock()
	if r == nil {
		return
	}
	r.mu.Lock()
	pi := r.input
	if pi == nil || pi.requestID != requestID {
		if pi == nil && outcome == nil && e.cl != nil {
			// A queued answer may overtake the callbacks of the commit
			// that asked: keep it for them.
			r.early = &earlyAnswer{requestID: requestID, answer: answer}
		}
		r.mu.Unlock()
		return
	}
	r.input = nil
	if r.inputTimer != nil {
		r.inputTimer.Stop()
		r.inputTimer = nil
	}
	r.mu.Unlock()
	if outcome != nil {
		pi.err <- outcome
	} else {
		pi.answer <- answer
	}
}

func (e *Engine) requestCancel(taskID string) {
	e.mu.Lock()
	r := e.runs[taskID]
	e.mu.Unlock()
	if r != nil {
		r.cancelOnce.Do(func() { close(r.cancelReq) })
	}
}
