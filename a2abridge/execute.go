package a2abridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentgw/agentgw/a2abridge/a2amap"
	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/tasks"
)

// remote follows one remote A2A task for one XMPP task.
type remote struct {
	mu    sync.Mutex // guards id, ctxID and cancel: sendCancel runs beside the stream
	b     *Backend
	tr    *rpcTransport // the interface this task is called on
	run   tasks.Run
	call  tasks.Call
	id    a2a.TaskID // the remote task, once known
	ctxID string
	parts []a2a.Part // artifact parts collected so far, artifact by artifact
	// arts is where each artifact's parts are in parts: an update with
	// append:false replaces them, append:true extends them.
	arts []artifactSpan
	// partBytes is the size of parts, bounded by MaxResponseBytes.
	partBytes int64
	cancel    bool // a cancellation was sent
	// answered: an answer was just sent; the next stream opens with the
	// task's snapshot, still input-required, which is not a new question.
	answered bool
	stop     context.CancelFunc
	lastMsg  string
}

// Execute sends the invocation as an A2A message and follows the remote
// task until it settles. The message id derives from the task id, so a
// resend of the same task is the same message to the agent.
func (b *Backend) Execute(ctx context.Context, call tasks.Call, run tasks.Run) {
	tr := b.transport()
	if tr == nil {
		run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The A2A agent's card has not been fetched yet.", Retryable: true})
		return
	}
	msg, err := message(call)
	if err != nil {
		run.Fail(tasks.Failure{Code: agentproto.CodeInternalError, Message: "The arguments cannot be sent as an A2A message."})
		return
	}
	// stop ends every remote call of this task, once it is settled here
	// without the agent's word (an unconfirmed cancellation).
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	r := &remote{b: b, run: run, call: call, stop: stop, tr: tr}
	params := &a2a.MessageSendParams{Message: msg, Metadata: map[string]any{a2amap.MetaSkill: skillOf(b, call.Tool)}}
	r.follow(ctx, tr.SendStreamingMessage(ctx, params))
}

// message is the A2A message for an invocation: for the message schema,
// its text (and data) parts; otherwise the arguments as one data part.
func message(call tasks.Call) (*a2a.Message, error) {
	var args map[string]any
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return nil, err
	}
	var parts []a2a.Part
	text, isText := args["text"].(string)
	data, _ := args["data"].(map[string]any)
	if isText && len(args) <= 2 && (len(args) == 1 || data != nil) {
		parts = append(parts, a2a.TextPart{Text: text})
		if data != nil {
			parts = append(parts, a2a.DataPart{Data: data})
		}
	} else {
		parts = append(parts, a2a.DataPart{Data: args})
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	m.ID = "agentgw-" + call.TaskID
	m.ContextID = contextFor(call)
	m.Metadata = map[string]any{a2amap.MetaSkill: call.Tool}
	return m, nil
}

// skillOf is the remote skill id of a tool (tool names are sanitized ids).
func skillOf(b *Backend, tool string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.card != nil {
		for _, s := range b.card.Skills {
			if toolNameRE.ReplaceAllString(s.ID, "_") == tool {
				return s.ID
			}
		}
	}
	return tool
}

// follow consumes a stream and everything after it: answers, cancels,
// resubscriptions, until the task is settled.
func (r *remote) follow(ctx context.Context, events iter.Seq2[a2a.Event, error]) {
	tr := r.tr
	bo := backendkit.Supervisor{Min: 500 * time.Millisecond, Max: 10 * time.Second}.Backoff()
	attempts := 0
	for {
		next, done, err := r.consume(ctx, events)
		if done {
			return
		}
		if ctx.Err() != nil {
			return // shutdown: the engine settles the task interrupted
		}
		if next != nil {
			events, attempts = next, 0
			continue
		}
		if r.unreadable(err) {
			return
		}
		// The stream broke or ended without a final event: read the remote
		// task, then resubscribe to it.
		if r.id == "" {
			r.run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The A2A agent did not start a task: " + safeErr(err), Retryable: true})
			return
		}
		if attempts >= r.b.o.Resubscribes {
			r.run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "Lost the A2A agent's task stream and could not resubscribe.", Retryable: true})
			return
		}
		attempts++
		r.b.log.Warn("A2A task stream interrupted; resubscribing", "task", r.call.TaskID, "attempt", attempts, "error", safeErr(err))
		if !backendkit.Sleep(ctx, bo.Next()) {
			return
		}
		t, gerr := tr.GetTask(ctx, &a2a.TaskQueryParams{ID: r.id})
		if r.unreadable(gerr) {
			return
		}
		if gerr == nil {
			if next, done := r.onTask(ctx, t); done {
				return
			} else if next != nil {
				events = next
				continue
			}
		}
		events = tr.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: r.id})
	}
}

// consume reads one stream. It reports done when the task is settled, or
// a next stream to follow (after an answer), or the error that ended it.
func (r *remote) consume(ctx context.Context, events iter.Seq2[a2a.Event, error]) (next iter.Seq2[a2a.Event, error], done bool, err error) {
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	cancelled := r.run.CancelRequested()
	go func() {
		select {
		case <-cancelled:
			r.sendCancel(ctx)
		case <-cctx.Done():
		}
	}()
	for ev, err := range events {
		if err != nil {
			return nil, false, err
		}
		switch v := ev.(type) {
		case *a2a.Task:
			if next, done := r.onTask(ctx, v); done || next != nil {
				return next, done, nil
			}
		case *a2a.TaskStatusUpdateEvent:
			r.learn(v.TaskID, v.ContextID)
			r.answered = false
			if next, done := r.onStatus(ctx, v.Status); done || next != nil {
				return next, done, nil
			}
		case *a2a.TaskArtifactUpdateEvent:
			r.learn(v.TaskID, v.ContextID)
			if v.Artifact != nil {
				r.addArtifact(v.Artifact.ID, v.Artifact.Parts, v.Append)
				if r.partBytes > r.b.o.MaxResponseBytes {
					return nil, false, fmt.Errorf("%w: the artifacts of the result", errTooLarge)
				}
			}
		case *a2a.Message:
			// A direct reply without a task: the whole answer.
			r.complete(v.Parts, false)
			return nil, true, nil
		}
	}
	return nil, false, errors.New("the stream ended before the task did")
}

// artifactSpan is one artifact's parts in remote.parts.
type artifactSpan struct {
	id    a2a.ArtifactID
	parts []a2a.Part
}

// addArtifact applies one artifact update: append:false replaces the
// parts of the artifact with that id (or adds it), append:true extends
// them. The result keeps the artifacts in the order they first came.
func (r *remote) addArtifact(id a2a.ArtifactID, parts []a2a.Part, appendTo bool) {
	i := -1
	for j := range r.arts {
		if r.arts[j].id == id {
			i = j
			break
		}
	}
	switch {
	case i < 0:
		r.arts = append(r.arts, artifactSpan{id: id, parts: append([]a2a.Part(nil), parts...)})
	case appendTo:
		r.arts[i].parts = append(r.arts[i].parts, parts...)
	default:
		r.arts[i].parts = append([]a2a.Part(nil), parts...)
	}
	r.parts, r.partBytes = r.parts[:0], 0
	for _, a := range r.arts {
		r.parts = append(r.parts, a.parts...)
		r.partBytes += partsSize(a.parts)
	}
}

// learn notes the remote task the agent named and, the first time,
// commits it with the XMPP task before anything relies on it.
func (r *remote) learn(id a2a.TaskID, ctxID string) {
	r.mu.Lock()
	first := r.id == "" && id != ""
	if first {
		r.id, r.ctxID = id, ctxID
	}
	r.mu.Unlock()
	if first {
		r.checkpoint(r.tr, id, ctxID)
	}
}

func (r *remote) onTask(ctx context.Context, t *a2a.Task) (iter.Seq2[a2a.Event, error], bool) {
	r.learn(t.ID, t.ContextID)
	if r.answered && t.Status.State == a2a.TaskStateInputRequired {
		return nil, false
	}
	if len(t.Artifacts) > 0 {
		r.parts, r.arts, r.partBytes = nil, nil, 0
		for _, a := range t.Artifacts {
			r.addArtifact(a.ID, a.Parts, false)
		}
	}
	return r.onStatus(ctx, t.Status)
}

// onStatus applies one remote status.
func (r *remote) onStatus(ctx context.Context, st a2a.TaskStatus) (iter.Seq2[a2a.Event, error], bool) {
	text := ""
	if st.Message != nil {
		text = a2amap.Text(st.Message.Parts)
	}
	switch st.State {
	case a2a.TaskStateSubmitted:
	case a2a.TaskStateWorking:
		if text != "" && text != r.lastMsg {
			r.lastMsg = text
			r.run.Progress(tasks.Progress{Message: a2amap.Bound(text, 1000)})
		}
	case a2a.TaskStateInputRequired:
		return r.ask(ctx, text)
	case a2a.TaskStateCompleted:
		parts := r.parts
		if len(parts) == 0 && st.Message != nil {
			parts = st.Message.Parts
		}
		r.complete(parts, false)
		return nil, true
	case a2a.TaskStateCanceled:
		r.run.Cancelled(firstNonEmpty(a2amap.Bound(text, 500), "cancelled by the A2A agent"))
		return nil, true
	case a2a.TaskStateFailed, a2a.TaskStateRejected, a2a.TaskStateAuthRequired:
		msg := firstNonEmpty(a2amap.Bound(text, 2000), "The A2A agent reported "+string(st.State)+".")
		r.run.Fail(tasks.Failure{Code: a2amap.FailureCode(st.State), Message: msg})
		return nil, true
	default:
		r.run.Fail(tasks.Failure{Code: a2amap.CodeProtocol, Message: "The A2A agent reported an unknown task state."})
		return nil, true
	}
	return nil, false
}

// ask turns input-required into input_required and sends the answer back
// as the next message of the remote task.
func (r *remote) ask(ctx context.Context, question string) (iter.Seq2[a2a.Event, error], bool) {
	if question == "" {
		question = "The A2A agent asks for input."
	}
	ans, err := r.run.RequestInput(ctx, tasks.InputRequest{Question: question, Schema: a2amap.AnswerSchema})
	if err != nil {
		if ctx.Err() != nil {
			return nil, true
		}
		// Expired, superseded by a cancellation, or settled: cancel the
		// remote task and settle here.
		r.sendCancel(ctx)
		if errors.Is(err, tasks.ErrInputExpired) {
			r.run.Fail(tasks.Failure{Code: agentproto.CodeDeadlineExpired, Message: "The input request expired."})
		} else {
			r.run.Cancelled("cancelled while the A2A agent waited for input")
		}
		return nil, true
	}
	var a struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(ans, &a)
	r.answered = true
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: a.Text})
	r.mu.Lock()
	m.TaskID, m.ContextID = r.id, r.ctxID
	r.mu.Unlock()
	m.ID = fmt.Sprintf("agentgw-%s-answer-%d", r.call.TaskID, time.Now().UnixNano())
	return r.tr.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: m}), false
}

// sendCancel asks the remote task to cancel, once; the remote task's
// canceled state settles the XMPP task. Without a confirmation within
// CancelWait the task settles cancelled anyway.
func (r *remote) sendCancel(ctx context.Context) {
	r.mu.Lock()
	id, sent := r.id, r.cancel
	r.cancel = true
	r.mu.Unlock()
	if sent {
		return
	}
	if id == "" {
		r.run.Cancelled("cancelled before the A2A agent started a task")
		return
	}
	wait := r.b.o.CancelWait
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	t, err := r.tr.CancelTask(cctx, &a2a.TaskIDParams{ID: id})
	switch {
	case err == nil && t.Status.State == a2a.TaskStateCanceled:
		r.run.Cancelled("cancelled")
	case err != nil && errors.Is(err, a2a.ErrTaskNotCancelable):
		// It settled meanwhile; its own terminal state will arrive.
	default:
		// Unconfirmed: give the agent CancelWait in all to settle itself,
		// then settle here and stop following it.
		go func() {
			if backendkit.Sleep(ctx, wait) {
				r.b.log.Warn("the A2A agent did not confirm a cancellation; settling the task cancelled", "task", r.call.TaskID)
				r.run.Cancelled("cancelled (the A2A agent did not confirm)")
				r.stop()
			}
		}()
	}
}

func (r *remote) complete(parts []a2a.Part, isError bool) {
	res, err := a2amap.PartsResult(parts, isError)
	if errors.Is(err, a2amap.ErrTooLarge) {
		r.run.Fail(tasks.Failure{Code: agentproto.CodeResultTooLarge, Message: "The A2A agent's result exceeds the bridge's size limit: " + err.Error()})
		return
	}
	if err != nil {
		r.run.Fail(tasks.Failure{Code: a2amap.CodeProtocol, Message: "The A2A agent's result cannot be carried: " + err.Error()})
		return
	}
	var tr tasks.ToolResult
	if err := json.Unmarshal(res, &tr); err != nil {
		r.run.Fail(tasks.Failure{Code: agentproto.CodeInternalError, Message: "The A2A result could not be encoded."})
		return
	}
	if err := r.run.Complete(tr); err != nil && !errors.Is(err, tasks.ErrSettled) {
		r.b.log.Warn("A2A result refused", "task", r.call.TaskID, "error", err.Error())
	}
}

// unreadable fails the task when err says the agent's answer cannot be
// carried: over the size cap (agentgw:result-too-large) or not readable
// A2A (agentgw:a2a-protocol). Such an answer is never retried by
// resubscribing, and never completes the task with what was read.
func (r *remote) unreadable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, errTooLarge):
		r.b.log.Warn("an A2A answer exceeds the size limit; failing the task", "task", r.call.TaskID, "limit_bytes", r.b.o.MaxResponseBytes)
		r.run.Fail(tasks.Failure{Code: agentproto.CodeResultTooLarge, Message: fmt.Sprintf("The A2A agent's answer exceeds the bridge's limit of %d bytes (one event, one response, or the artifacts of the result).", r.b.o.MaxResponseBytes)})
	case errors.Is(err, errUnreadable):
		r.b.log.Warn("an A2A answer is not readable; failing the task", "task", r.call.TaskID, "error", err.Error())
		r.run.Fail(tasks.Failure{Code: a2amap.CodeProtocol, Message: "The A2A agent's answer cannot be read: " + a2amap.Bound(err.Error(), 300)})
	default:
		return false
	}
	return true
}

// partsSize is about the bytes parts take (their text, data or file).
func partsSize(parts []a2a.Part) int64 {
	var n int64
	for _, p := range parts {
		switch v := p.(type) {
		case a2a.TextPart:
			n += int64(len(v.Text))
		case a2a.DataPart:
			b, _ := json.Marshal(v.Data)
			n += int64(len(b))
		case a2a.FilePart:
			switch f := v.File.(type) {
			case a2a.FileURI:
				n += int64(len(f.URI))
			case a2a.FileBytes:
				n += int64(len(f.Bytes))
			}
		}
		n += 64
	}
	return n
}

// safeErr is an error's text without remote payloads: only the kind.
func safeErr(err error) string {
	switch {
	case err == nil:
		return "no error"
	case errors.Is(err, errTooLarge):
		return "response too large"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	var se interface{ Error() string }
	if errors.As(err, &se) {
		return a2amap.Bound(scrubURLError(err).Error(), 200)
	}
	return "transport error"
}
