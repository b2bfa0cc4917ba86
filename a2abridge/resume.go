package a2abridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/tasks"
)

// A remote A2A task outlives a gateway restart: the bridge commits the
// remote task id with the XMPP task (tasks.Checkpointer, in the store's
// task_backend_state) as soon as the agent names it and before anything
// uses it (an answer, a cancel, a resubscription). After a restart, kill -9
// included, the engine hands the state back (Resume): the bridge reads the
// remote task and resubscribes to it, so the call completes with the
// agent's result, executed once. A task that cannot be followed (the agent
// no longer knows it, or it cannot be read) is cancelled at the agent and
// settles agentgw:interrupted; so is one the engine will not resume (it was
// waiting for input: Forget).

// remoteState is what the bridge commits with a task.
type remoteState struct {
	V       int    `json:"v"`
	URL     string `json:"url"`     // the JSON-RPC interface called
	V10     bool   `json:"v10"`     // its A2A version is 1.0
	TaskID  string `json:"taskId"`  // the remote task
	Context string `json:"context"` // its context
}

// contextFor is the A2A context of a caller's calls to an endpoint: one
// context per XMPP caller (bare JID) and endpoint, the same after a
// restart, opaque to the agent (docs/a2a.md).
func contextFor(call tasks.Call) string {
	sum := sha256.Sum256([]byte(call.Caller + "\x00" + call.Endpoint))
	return "agentgw-ctx-" + hex.EncodeToString(sum[:12])
}

// checkpoint commits the remote task id before it is relied on. It runs
// once per remote task; an error is logged and the call goes on (it then
// cannot be resumed after a restart).
func (r *remote) checkpoint(tr *rpcTransport, id a2a.TaskID, ctxID string) {
	cp, ok := r.run.(tasks.Checkpointer)
	if !ok || tr == nil || id == "" {
		return
	}
	data, _ := json.Marshal(remoteState{V: 1, URL: tr.url, V10: tr.v10, TaskID: string(id), Context: ctxID})
	if err := cp.Checkpoint(data, true); err != nil && !errors.Is(err, tasks.ErrSettled) {
		r.b.log.Warn("committing the A2A task id failed; the call cannot be resumed after a restart", "task", r.call.TaskID, "error", err.Error())
	}
}

var _ tasks.Resumer = (*Backend)(nil)

// Resume re-attaches a task whose remote A2A task was running when the
// gateway stopped.
func (b *Backend) Resume(ctx context.Context, call tasks.Call, state []byte, run tasks.Run) {
	var st remoteState
	if json.Unmarshal(state, &st) != nil || st.TaskID == "" {
		run.Fail(tasks.Failure{Code: agentproto.CodeInterrupted, Message: "The gateway restarted and the A2A task's state is unreadable.", Retryable: true})
		return
	}
	tr, err := b.resumeTransport(ctx, st)
	if err != nil {
		if ctx.Err() == nil {
			run.Fail(tasks.Failure{Code: agentproto.CodeInterrupted, Message: "The gateway restarted and " + err.Error(), Retryable: true})
		}
		return
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	r := &remote{b: b, run: run, call: call, stop: stop, id: a2a.TaskID(st.TaskID), ctxID: st.Context, tr: tr}
	// Read the remote task (a few tries: the agent may be restarting too).
	bo := backendkit.Supervisor{Min: 500 * time.Millisecond, Max: 8 * time.Second}.Backoff()
	var t *a2a.Task
	for attempt := 0; ; attempt++ {
		gctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		t, err = tr.GetTask(gctx, &a2a.TaskQueryParams{ID: r.id})
		cancel()
		if err == nil || errors.Is(err, a2a.ErrTaskNotFound) || errors.Is(err, errUnreadable) || errors.Is(err, errTooLarge) || attempt >= 4 || ctx.Err() != nil {
			break
		}
		if !backendkit.Sleep(ctx, bo.Next()) {
			return
		}
	}
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, a2a.ErrTaskNotFound):
		b.log.Warn("the A2A agent no longer knows a task running at the restart; settling it interrupted", "task", call.TaskID)
		run.Fail(tasks.Failure{Code: agentproto.CodeInterrupted, Message: "The gateway restarted and the A2A agent no longer knows the task.", Retryable: true})
		return
	case r.unreadable(err):
		return
	case err != nil:
		b.log.Warn("the A2A task running at the restart cannot be read; cancelling it and settling it interrupted", "task", call.TaskID, "error", safeErr(err))
		b.cancelRemote(tr, st.TaskID)
		run.Fail(tasks.Failure{Code: agentproto.CodeInterrupted, Message: "The gateway restarted and the A2A task could not be followed; it was cancelled at the agent.", Retryable: true})
		return
	}
	b.log.Info("resuming an A2A task after a restart", "task", call.TaskID, "remote_state", string(t.Status.State))
	if next, done := r.onTask(ctx, t); done {
		return
	} else if next != nil {
		r.follow(ctx, next)
		return
	}
	r.follow(ctx, tr.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: r.id}))
}

// Forget cancels, best effort, the remote task of a task the engine
// settled interrupted instead of resuming it.
func (b *Backend) Forget(call tasks.Call, state []byte) {
	var st remoteState
	if json.Unmarshal(state, &st) != nil || st.TaskID == "" {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), b.o.CancelWait+30*time.Second)
		defer cancel()
		tr, err := b.resumeTransport(ctx, st)
		if err != nil {
			return
		}
		b.log.Info("cancelling the A2A task of a task settled interrupted at the restart", "task", call.TaskID)
		b.cancelRemote(tr, st.TaskID)
	}()
}

// cancelRemote sends CancelTask once, bounded by CancelWait.
func (b *Backend) cancelRemote(tr *rpcTransport, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.o.CancelWait)
	defer cancel()
	if _, err := tr.CancelTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(id)}); err != nil && !errors.Is(err, a2a.ErrTaskNotCancelable) {
		b.log.Warn("cancelling the A2A task failed", "error", safeErr(err))
	}
}

// resumeTransport is a transport to the interface the state names, which
// must still be on the card's host. It waits (bounded) for the first card
// fetch after the restart, so that the endpoint's HTTP client is set up.
func (b *Backend) resumeTransport(ctx context.Context, st remoteState) (*rpcTransport, error) {
	u, err := b.onCardHost(st.URL)
	if err != nil {
		return nil, errors.New("the A2A task's interface is not on the card's host")
	}
	select {
	case <-b.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(60 * time.Second):
		// Called without the card: the interface is the committed one.
	}
	if cur := b.transport(); cur != nil && cur.url == u && cur.v10 == st.V10 {
		return cur, nil
	}
	return newRPCTransport(u, b.http, b.o.MaxResponseBytes, st.V10), nil
}
