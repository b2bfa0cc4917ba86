package tasks

import (
	"context"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// Snapshot is the complete committed state of a task, for <task-state/>.
type Snapshot struct {
	TaskID       string
	Tool         string
	Endpoint     string
	APIVersion   string
	ManifestHash string
	State        agentproto.State
	Revision     int64
	Created      time.Time
	Updated      time.Time
	RetainUntil  time.Time
	// Deadline is the task's effective deadline as exact canonical
	// XEP-0082 text ("" for none): the invoke's, or the one the engine
	// applied from the tool's defaultTimeoutSeconds or the configured
	// default. DeadlineAt is the same instant (truncated to nanoseconds).
	Deadline        string
	DeadlineAt      *time.Time
	ResultAvailable bool
	// PendingInput is the complete input_required object while input is
	// pending, nil otherwise.
	PendingInput []byte
}

// TerminalResult is the retained result of a terminal task, for
// <task-result/>. Payload is the same object as the terminal event's.
type TerminalResult struct {
	TaskID   string
	State    agentproto.State
	Revision int64
	Payload  []byte
}

// StoredEvent is one committed event as stored.
type StoredEvent struct {
	TaskID   string
	EventID  string
	Revision int64
	Type     agentproto.EventType
	Payload  []byte
	Created  time.Time
}

// lookup reads a task for a recovery operation. Unknown, purged,
// other-caller and other-endpoint tasks are one and the same ErrNotFound;
// the same query runs in every case.
func (e *Engine) lookup(ctx context.Context, caller, endpoint, taskID string) (*taskdb.Task, *taskdb.Input, error) {
	if !ids.Valid(taskID) {
		return nil, nil, reject(ErrBadRequest, "invalid task-id")
	}
	t, in, err := e.db.TaskState(ctx, taskID)
	if err != nil {
		return nil, nil, err
	}
	if t == nil || t.Caller != caller || t.Endpoint != endpoint || caller == "" {
		return nil, nil, reject(ErrNotFound, "task")
	}
	return t, in, nil
}

// State returns the committed state of the caller's task.
func (e *Engine) State(ctx context.Context, caller, endpoint, taskID string) (*Snapshot, error) {
	t, in, err := e.lookup(ctx, caller, endpoint, taskID)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{
		TaskID: t.ID, Tool: t.Tool, Endpoint: t.Endpoint, APIVersion: t.APIVersion, ManifestHash: t.ManifestHash,
		State: t.State, Revision: t.Revision, Created: t.Created, Updated: t.Updated,
		RetainUntil: t.RetainUntil, ResultAvailable: t.State.Terminal() && t.Result != nil,
	}
	if t.Deadline != "" {
		d := t.DeadlineAt
		s.Deadline, s.DeadlineAt = t.Deadline, &d
	}
	if in != nil && t.State == agentproto.StateInputRequired {
		s.PendingInput = in.Request
	}
	return s, nil
}

// StateByRequest is State for the caller's task admitted with requestID
// (the adhoc command layer derives request IDs from its session IDs, so a
// session is found again after a restart). Unknown, purged and other
// callers' requests are one ErrNotFound.
func (e *Engine) StateByRequest(ctx context.Context, caller, endpoint, requestID string) (*Snapshot, error) {
	if !ids.Valid(requestID) || caller == "" {
		return nil, reject(ErrNotFound, "task")
	}
	t, err := e.db.TaskByRequest(ctx, caller, endpoint, requestID)
	if err != nil {
		return nil, err
	}
	if t == nil || t.Caller != caller || t.Endpoint != endpoint {
		return nil, reject(ErrNotFound, "task")
	}
	return e.State(ctx, caller, endpoint, t.ID)
}

// Result returns the retained terminal result of the caller's task, or
// ErrUnexpectedRequest while it is not terminal.
func (e *Engine) Result(ctx context.Context, caller, endpoint, taskID string) (*TerminalResult, error) {
	t, _, err := e.lookup(ctx, caller, endpoint, taskID)
	if err != nil {
		return nil, err
	}
	if !t.State.Terminal() || t.Result == nil {
		return nil, reject(ErrUnexpectedRequest, "task is not terminal")
	}
	return &TerminalResult{TaskID: t.ID, State: t.State, Revision: t.Revision, Payload: t.Result}, nil
}

// Events returns every committed event of a task in revision order, without
// authorization; for tests and operators.
func (e *Engine) Events(ctx context.Context, taskID string) ([]StoredEvent, error) {
	evs, err := e.db.Events(ctx, taskID)
	if err != nil {
		return nil, err
	}
	out := make([]StoredEvent, len(evs))
	for i, ev := range evs {
		out[i] = StoredEvent{TaskID: ev.TaskID, EventID: ev.EventID, Revision: ev.Revision, Type: ev.Type, Payload: ev.Payload, Created: ev.Created}
	}
	return out, nil
}

// VersionReferenced implements directory.ReferenceChecker: a task retained
// in the store pins its manifest version.
func (e *Engine) VersionReferenced(endpoint, version string) (bool, error) {
	return e.db.VersionReferenced(context.Background(), endpoint, version)
}

// HoldsTask reports whether caller has a retained task at endpoint: the
// task-specific authorization that keeps a caller's input, cancellation
// and recovery working after it lost visibility and invocation permission
// (the router asks before it lets such a caller's task IQs reach a
// handler). A storage error counts as no, so the answer fails closed.
func (e *Engine) HoldsTask(ctx context.Context, caller, endpoint string) bool {
	ok, err := e.db.HasTask(ctx, caller, endpoint)
	if err != nil {
		e.cfg.Log.Warn("task ownership check failed", "err", err)
		return false
	}
	return ok
}
