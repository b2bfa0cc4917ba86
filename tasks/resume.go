package tasks

import (
	"context"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// A backend whose calls have an identity of their own at the target (an
// MCP server's task) can keep a dispatched task alive across a gateway
// restart: it commits that identity with the task (Checkpointer, before it
// relies on it), and when the engine recovers the task after a restart, or
// a cluster member takes it over, the engine hands the committed state to
// the backend's Resume instead of settling the task agentgw:interrupted.

// Checkpointer is implemented by the engine's Run.
type Checkpointer interface {
	// Checkpoint commits data as the task's backend state (nil deletes
	// it) and returns once it is durable. It changes neither the task's
	// revision nor its events. resumable says that the backend can resume
	// the call from data after a restart: a gateway shutdown then leaves
	// the task running in the store for the next start instead of
	// settling it interrupted. A settled task refuses with ErrSettled.
	Checkpoint(data []byte, resumable bool) error
}

// Resumer is a Backend that re-attaches dispatched tasks after a restart.
type Resumer interface {
	// Resume continues call from the state its executor committed with
	// Checkpoint. As with Execute, it returns once the task is settled
	// through run, or when ctx ends. A task that was cancelling when the
	// gateway stopped arrives with run.CancelRequested() closed.
	Resume(ctx context.Context, call Call, state []byte, run Run)
	// Forget is told about committed state whose task the engine settled
	// instead of resuming it (it was waiting for input, or its manifest
	// is gone), so that the backend can release what the state names at
	// the target (cancel a remote task), best effort. It must not block.
	Forget(call Call, state []byte)
}

var _ Checkpointer = (*run)(nil)

func (r *run) Checkpoint(data []byte, resumable bool) error {
	err := r.mutate(r.e.doDurable, func(b *batch, t *taskdb.Task) error {
		return b.tx.SetBackendState(t.ID, data)
	})
	if err == nil {
		r.resumable.Store(resumable && data != nil)
	}
	return err
}

// resumeTarget returns the Resumer and committed state of a dispatched
// task found unsettled at recovery, or nil.
func (e *Engine) resumeTarget(t *taskdb.Task) (Resumer, []byte) {
	be, ok := e.cfg.Backends(t.Endpoint)
	if !ok || be == nil {
		return nil, nil
	}
	rs, ok := be.(Resumer)
	if !ok {
		return nil, nil
	}
	state, err := e.db.BackendState(context.Background(), t.ID)
	if err != nil {
		e.log.Warn("tasks: reading a task's backend state failed; it is settled interrupted", "task", t.ID, "err", err)
		return nil, nil
	}
	if state == nil {
		return nil, nil
	}
	return rs, state
}

func callOf(t *taskdb.Task) Call {
	c := Call{
		TaskID: t.ID, Caller: t.Caller, Endpoint: t.Endpoint, Tool: t.Tool, Version: t.APIVersion,
		ManifestHash: t.ManifestHash, Arguments: append([]byte(nil), t.Arguments...),
		DelegationDepth: t.DelegationDepth,
	}
	if t.Deadline != "" {
		c.Deadline = t.DeadlineAt
	}
	return c
}

// resume re-launches a dispatched task through its backend's Resume, or
// settles it interrupted as interrupt does when it cannot be resumed.
func (b *batch) resume(id string, rs Resumer, state []byte) error {
	t, err := b.load(id)
	if err != nil || t == nil || t.State.Terminal() {
		return err
	}
	if done, err := b.expireIfDue(t); done || err != nil {
		return err
	}
	if !t.Dispatched {
		return b.interrupt(id)
	}
	call := callOf(t)
	var tool *toolInfo
	if m, ok := b.e.cfg.Directory.Manifest(t.Endpoint, t.APIVersion); ok {
		if tl, ok := m.Tool(t.Tool); ok {
			tool = &toolInfo{outputSchema: tl.OutputSchema}
		}
	}
	msg := ""
	switch {
	case t.State != agentproto.StateRunning && t.State != agentproto.StateCancelling:
		// Waiting for input: the question was asked of the gateway that
		// stopped, and the answer has nowhere to go.
		msg = "The gateway restarted while the task was waiting for input."
	case tool == nil:
		msg = "The gateway restarted while the task was running, and its pinned manifest is no longer available."
	case b.e.closing.Load():
		msg = "The gateway restarted while the task was running."
	}
	if msg != "" {
		b.onCommit(func() { rs.Forget(call, state) })
		return b.fail(t, Failure{Code: agentproto.CodeInterrupted, Message: msg, Retryable: true})
	}
	cancelling := t.State == agentproto.StateCancelling
	b.onCommit(func() {
		b.e.start(call, tool, func(ctx context.Context, r *run) {
			if cancelling {
				r.cancelOnce.Do(func() { close(r.cancelReq) })
			}
			r.resumable.Store(true)
			rs.Resume(ctx, call, state, r)
		})
	})
	return nil
}
