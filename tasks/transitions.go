package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/telemetry"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

// Source states of the normative transitions.
var (
	nonTerminal   = []agentproto.State{agentproto.StateAccepted, agentproto.StateRunning, agentproto.StateInputRequired, agentproto.StateCancelling}
	fromRunning   = []agentproto.State{agentproto.StateRunning}
	fromInput     = []agentproto.State{agentproto.StateInputRequired}
	fromCancellab = []agentproto.State{agentproto.StateAccepted, agentproto.StateRunning, agentproto.StateInputRequired}
)

// commit is the guarded transition every state change and progress update
// goes through: a compare-and-set on (id, revision, state in from) that
// writes next at revision+1 and appends exactly one event at that revision,
// in the current transaction. The task is updated in place.
func (b *batch) commit(t *taskdb.Task, from []agentproto.State, typ agentproto.EventType, payload []byte, mutate func(n *taskdb.Task)) error {
	now := b.now()
	next := *t
	mutate(&next)
	if telemetry.Enabled() {
		// Ends when the batch is durable; a rolled-back one is dropped.
		_, sp := telemetry.StartTask(context.Background(), t.ID, telemetry.Transition)
		sp.Str(telemetry.AttrState, string(next.State))
		b.onCommit(sp.End)
	}
	next.Revision = t.Revision + 1
	next.Updated = now
	ok, err := b.tx.UpdateTask(&next, t.Revision, from...)
	if err != nil {
		return err
	}
	if !ok {
		// The committer is the only writer, so a failed guard is a bug or
		// a concurrent process on the same file.
		return fmt.Errorf("%w: transition to %s", errGuard, next.State)
	}
	ev := taskdb.Event{TaskID: t.ID, Revision: next.Revision, EventID: newEventID(now), Type: typ, Payload: payload, Created: now}
	if err := b.tx.AppendEvent(&ev); err != nil {
		return err
	}
	b.events = append(b.events, Event{
		TaskID: t.ID, EventID: ev.EventID, Endpoint: t.Endpoint, Caller: t.Caller, Route: t.Route,
		Revision: ev.Revision, Type: typ, Payload: payload,
	})
	*t = next
	b.wrote(t)
	return nil
}

// settle commits a terminal state with its payload, supersedes a pending
// input request and releases the task's in-memory resources after commit.
func (b *batch) settle(t *taskdb.Task, state agentproto.State, typ agentproto.EventType, payload []byte) error {
	if t.InputRequest != "" {
		if _, err := b.tx.SetInputStatus(t.ID, t.InputRequest, taskdb.InputSuperseded, nil, 0); err != nil {
			return err
		}
	}
	now := b.now()
	err := b.commit(t, nonTerminal, typ, payload, func(n *taskdb.Task) {
		n.State = state
		n.Result = payload
		n.InputRequest = ""
		// The replay record outlives the task's lifetime as well as the
		// replay window and the promised retention.
		if now.After(n.PurgeAfter) {
			n.PurgeAfter = now
		}
	})
	if err != nil {
		return err
	}
	b.delta--
	b.settled(t, payload)
	id := t.ID
	b.onCommit(func() { b.e.finished(id, state) })
	return nil
}

func (b *batch) fail(t *taskdb.Task, f Failure) error {
	payload, err := b.e.lifecycle.build(agentproto.EventFailed, failedValue(f))
	if err != nil {
		return err
	}
	return b.settle(t, agentproto.StateFailed, agentproto.EventFailed, payload)
}

// deadlineReached reports whether t is non-terminal and its deadline is
// reached at this commit boundary, compared exactly.
func (b *batch) deadlineReached(t *taskdb.Task) bool {
	if t.Deadline == "" || t.State.Terminal() {
		return false
	}
	dl, err := xmpptime.Parse(t.Deadline)
	if err != nil {
		// Stored by the engine itself; unparsable means corrupt, and a
		// deadline that cannot be read must not run forever.
		return true
	}
	return dl.ReachedBy(b.now())
}

// expireIfDue settles t failed deadline-expired, instead of any attempted
// mutation, when its deadline has been reached. It reports whether it did.
func (b *batch) expireIfDue(t *taskdb.Task) (bool, error) {
	if !b.deadlineReached(t) {
		return false, nil
	}
	if !b.e.owns(t) {
		// Only the owner settles (its deadline timer is armed); another
		// instance refuses the mutation and leaves the row alone.
		return true, nil
	}
	return true, b.fail(t, Failure{Code: agentproto.CodeDeadlineExpired, Message: "The task deadline passed before a result."})
}

// load reads a task inside the transaction.
func (b *batch) load(id string) (*taskdb.Task, error) { return b.tx.Task(id) }

// dispatch starts an accepted task: accepted -> running (status event), then
// the executor runs after commit. A deadline reached first, a missing
// backend, or a cancellation accepted before dispatch settle the task
// instead; the backend is then never called.
//
// The backend's concurrency limit is checked last: a task without a free
// slot stays accepted and waits (in memory; a restart dispatches accepted
// tasks again, through the same limit) until pump releases it.
func (b *batch) dispatch(id string) error {
	out, ep, err := b.dispatchTask(id)
	if err != nil {
		return err // rolled back: a reserved slot stays reserved for the retry
	}
	e := b.e
	switch out {
	case dispatchStarted:
		b.onCommit(func() { e.unrelease(id) })
	case dispatchHeld:
		b.onCommit(func() { e.hold(id, ep) })
	default:
		if ep, rel := e.released[id]; rel {
			b.onCommit(func() { e.unrelease(id); e.pump(ep) })
		}
	}
	return nil
}

type dispatchOutcome int

const (
	dispatchOther   dispatchOutcome = iota // settled instead, or left alone
	dispatchStarted                        // running, the executor launches after commit
	dispatchHeld                           // accepted, waiting for a backend slot
)

func (b *batch) dispatchTask(id string) (dispatchOutcome, string, error) {
	t, err := b.load(id)
	if err != nil || t == nil || t.State.Terminal() {
		return dispatchOther, "", err
	}
	out, err := b.dispatchLoaded(t)
	return out, t.Endpoint, err
}

func (b *batch) dispatchLoaded(t *taskdb.Task) (out dispatchOutcome, err error) {
	id := t.ID
	_, dsp := telemetry.StartTask(context.Background(), id, telemetry.Dispatch)
	defer func() {
		if out != dispatchStarted || err != nil {
			dsp.End() // a started dispatch ends when the backend is launched
		}
	}()
	if done, err := b.expireIfDue(t); done || err != nil {
		return dispatchOther, err
	}
	if t.State == agentproto.StateCancelling && !t.Dispatched {
		payload, err := b.e.lifecycle.build(agentproto.EventCancelled, cancelledValue(""))
		if err != nil {
			return dispatchOther, err
		}
		return dispatchOther, b.settle(t, agentproto.StateCancelled, agentproto.EventCancelled, payload)
	}
	if t.State != agentproto.StateAccepted || b.e.closing.Load() {
		return dispatchOther, nil // shutting down: stays accepted for the next Start
	}
	backend, ok := b.e.cfg.Backends(t.Endpoint)
	if !ok || backend == nil {
		return dispatchOther, b.fail(t, Failure{Code: agentproto.CodeUnavailable, Message: "The endpoint's backend is not available.", Retryable: true})
	}
	m, ok := b.e.cfg.Directory.Manifest(t.Endpoint, t.APIVersion)
	var tool *toolInfo
	if ok {
		if tl, ok := m.Tool(t.Tool); ok {
			tool = &toolInfo{outputSchema: tl.OutputSchema}
		}
	}
	if tool == nil {
		return dispatchOther, b.fail(t, Failure{Code: agentproto.CodeManifestUnavailable, Message: "The pinned manifest is no longer available."})
	}
	if ok, err := b.mayDispatch(id, t.Endpoint); err != nil || !ok {
		return dispatchHeld, err
	}
	payload, err := statusPayload(b.e.lifecycle, agentproto.StateRunning, b.now())
	if err != nil {
		return dispatchOther, err
	}
	if err := b.commit(t, []agentproto.State{agentproto.StateAccepted}, agentproto.EventStatus, payload, func(n *taskdb.Task) {
		n.State = agentproto.StateRunning
		n.Dispatched = true
	}); err != nil {
		return dispatchOther, err
	}
	b.add(cRunning, t.Endpoint, 1)
	call := Call{
		TaskID: t.ID, Caller: t.Caller, Endpoint: t.Endpoint, Tool: t.Tool, Version: t.APIVersion,
		ManifestHash: t.ManifestHash, Arguments: append([]byte(nil), t.Arguments...),
		DelegationDepth: t.DelegationDepth,
	}
	if t.Deadline != "" {
		call.Deadline = t.DeadlineAt
	}
	b.onCommit(func() { dsp.End(); b.e.launch(call, backend, tool) })
	return dispatchStarted, nil
}

// interrupt settles a dispatched task whose backend call cannot be resumed.
func (b *batch) interrupt(id string) error {
	t, err := b.load(id)
	if err != nil || t == nil || t.State.Terminal() {
		return err
	}
	if done, err := b.expireIfDue(t); done || err != nil {
		return err
	}
	if !t.Dispatched {
		if t.State == agentproto.StateCancelling {
			return b.dispatch(id)
		}
		return nil // accepted: dispatched by the next Start
	}
	return b.fail(t, Failure{Code: agentproto.CodeInterrupted, Message: "The gateway restarted while the task was running.", Retryable: true})
}

// deadlineFired is the deadline timer's settlement. The timer fires at the
// nanosecond the deadline truncates to; a deadline with digits below the
// nanosecond is re-armed until it is exactly reached.
func (b *batch) deadlineFired(id string) error {
	t, err := b.load(id)
	if err != nil || t == nil || t.State.Terminal() {
		return err
	}
	if done, err := b.expireIfDue(t); done || err != nil {
		return err
	}
	dl, at := t.Deadline, t.DeadlineAt
	b.onCommit(func() { b.e.armDeadline(id, dl, at.Add(time.Nanosecond)) })
	return nil
}
