package tasks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"strconv"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// CancelRequest is one <cancel/>.
type CancelRequest struct {
	Caller           string // bare JID of the authenticated sender
	Endpoint         string // bare JID the IQ was addressed to
	TaskID           string
	ExpectedRevision int64
	HasReason        bool
	Reason           string // parsed XML character data of <reason/>
}

var errGuard = errors.New("tasks: guarded update found the row changed")

// Cancel accepts a cancellation request. After the caller is authorized for
// the task, an identical tuple returns the original acceptance revision
// before any other check; a different tuple after an accepted cancellation,
// a terminal task or a stale expected revision is ErrConflict. The first
// accepted cancellation moves the task to cancelling (status event) and
// closes the executor's CancelRequested; it stays advisory and the engine
// settles only what the executor reports. A task not yet dispatched is
// settled cancelled by the engine, without calling the backend. A backend
// that does not support cancellation gets ErrServiceUnavailable.
func (e *Engine) Cancel(ctx context.Context, c CancelRequest) (string, int64, error) {
	if !e.started.Load() || e.closing.Load() {
		return "", 0, reject(ErrServiceUnavailable, "engine not running")
	}
	if !ids.Valid(c.TaskID) || c.ExpectedRevision < 0 || c.Caller == "" || c.Endpoint == "" {
		return "", 0, reject(ErrBadRequest, "invalid identifiers")
	}
	key := cancelKey(c)
	var (
		rev    int64
		result error
	)
	err := e.doRetry(func(b *batch) error {
		rev, result = 0, nil
		t, err := b.load(c.TaskID)
		if err != nil {
			return err
		}
		if t == nil || t.Caller != c.Caller || t.Endpoint != c.Endpoint {
			result = reject(ErrNotFound, "task")
			return nil
		}
		if t.CancelKey != nil {
			if bytes.Equal(t.CancelKey, key) {
				rev = t.CancelRev
			} else {
				result = reject(ErrConflict, "a different cancellation was accepted")
			}
			return nil
		}
		if t.State.Terminal() {
			result = reject(ErrConflict, "task already settled")
			return nil
		}
		if t.Dispatched {
			if be, ok := e.cfg.Backends(t.Endpoint); ok && be != nil && !be.Features().Cancel {
				result = reject(ErrServiceUnavailable, "cancellation not supported")
				return nil
			}
		}
		if c.ExpectedRevision != t.Revision {
			result = reject(ErrConflict, "stale expected revision")
			return nil
		}
		if done, err := b.expireIfDue(t); done || err != nil {
			result = reject(ErrConflict, "task deadline passed")
			return err
		}
		pendingInput := t.InputRequest
		if pendingInput != "" {
			if _, err := b.tx.SetInputStatus(t.ID, pendingInput, taskdb.InputSuperseded, nil, 0); err != nil {
				return err
			}
		}
		payload, err := statusPayload(e.lifecycle, agentproto.StateCancelling, b.now())
		if err != nil {
			return err
		}
		if err := b.commit(t, fromCancellab, agentproto.EventStatus, payload, func(n *taskdb.Task) {
			n.State = agentproto.StateCancelling
			n.InputRequest = ""
			n.CancelKey = key
			n.CancelRev = n.Revision + 1
		}); err != nil {
			return err
		}
		rev = t.Revision
		id, dispatched := t.ID, t.Dispatched
		if !e.owns(t) {
			return b.queueSignal(signal{Kind: sigCancel, Task: id, Owner: t.Owner, Input: pendingInput, Dispatched: dispatched})
		}
		b.onCommit(func() {
			e.requestCancel(id)
			if pendingInput != "" {
				e.deliverInput(id, pendingInput, nil, ErrInputSuperseded)
			}
			if !dispatched {
				e.submitDurable(func(b *batch) error { return b.dispatch(id) })
			}
		})
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	if result != nil {
		return "", 0, result
	}
	return c.TaskID, rev, nil
}

// cancelKey hashes the ordered cancellation tuple.
func cancelKey(c CancelRequest) []byte {
	h := sha256.New()
	field(h, "agentgw cancel acceptance v1")
	field(h, c.Caller)
	field(h, c.Endpoint)
	field(h, ns.Task)
	field(h, c.TaskID)
	field(h, strconv.FormatInt(c.ExpectedRevision, 10))
	if c.HasReason {
		field(h, "reason")
		field(h, c.Reason)
	} else {
		field(h, "no-reason")
	}
	return h.Sum(nil)
}

// CancelAsOperator cancels a task on its caller's behalf, for an operator
// acting where via names (the console, the admin command): the caller's
// own cancel at the task's current revision, so it is idempotent, settles
// as any cancel does and reaches the owner in a cluster. Unknown and
// purged tasks are ErrNotFound; operator is only logged. The console and
// the admin command both call this, so an operator's cancel means one
// thing wherever it is made.
func (e *Engine) CancelAsOperator(ctx context.Context, taskID, operator, via string) (int64, error) {
	if !ids.Valid(taskID) {
		return 0, reject(ErrBadRequest, "invalid task-id")
	}
	t, _, err := e.db.TaskState(ctx, taskID)
	if err != nil {
		return 0, err
	}
	if t == nil {
		return 0, reject(ErrNotFound, "task")
	}
	_, rev, err := e.Cancel(ctx, CancelRequest{Caller: t.Caller, Endpoint: t.Endpoint, TaskID: t.ID,
		ExpectedRevision: t.Revision, HasReason: true, Reason: "canceled by an operator (" + via + ")"})
	e.log.Info("tasks: operator cancel", "operator", operator, "via", via, "task", t.ID, "err", err)
	return rev, err
}
