package a2afront

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/a2abridge/a2amap"
	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/ids"
)

// handler serves one agent's A2A methods.
type handler struct {
	f    *Front
	bare string
}

var _ a2asrv.RequestHandler = handler{}

// Limits on what a request may carry.
const (
	maxParts        = 64
	maxMessageIDLen = 256
)

// requestID derives the XMPP request-id from the A2A messageId, so a
// retried message/send is the same invocation and never runs twice.
func requestID(bare, messageID string) string {
	sum := sha256.Sum256([]byte(bare + "\x00" + messageID))
	return "a2a-" + hex.EncodeToString(sum[:16])
}

// taskRef checks a task id from a client. A2A task ids are opaque to the
// client: an id that is not an XMPP task-id (not the identifier grammar)
// names no task, so it answers -32001 TaskNotFound like a well-formed
// unknown id, without asking the gateway; only a missing id is invalid
// params. The id is never echoed.
func taskRef(id a2a.TaskID) error {
	switch {
	case id == "":
		return invalid("id is required")
	case !ids.Valid(string(id)):
		return a2a.ErrTaskNotFound
	}
	return nil
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", a2a.ErrInvalidParams, fmt.Sprintf(format, a...))
}

// xmppError turns an XMPP error into an A2A error with a safe message.
func xmppError(err error, what string) error {
	switch agentclient.Condition(err) {
	case "item-not-found":
		return a2a.ErrTaskNotFound
	case "conflict":
		return invalid("%s conflicts with the task's current state (or the messageId was already used for a different request)", what)
	case "not-acceptable", "bad-request":
		return invalid("%s was refused by the agent: %s", what, safeCondition(err))
	case "resource-constraint":
		return fmt.Errorf("%w: %s refused: the agent is at capacity, retry later", a2a.ErrServerError, what)
	case "":
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return fmt.Errorf("%w: %s timed out", a2a.ErrServerError, what)
		}
	}
	return fmt.Errorf("%w: %s failed: %s", a2a.ErrServerError, what, safeCondition(err))
}

// safeCondition is the stanza error's text when it has one (the gateway's
// texts are safe and bounded), else the condition.
func safeCondition(err error) string {
	var se *agentproto.StanzaError
	if errors.As(err, &se) {
		if se.Text != "" {
			return a2amap.Bound(se.Text, 300)
		}
		return string(se.Condition)
	}
	return "unavailable"
}

func (h handler) agent(ctx context.Context) (*agent, error) {
	a, err := h.f.lookup(ctx, h.bare)
	if err != nil {
		if errors.Is(err, errUnknownAgent) {
			return nil, fmt.Errorf("%w: no such agent", a2a.ErrInvalidRequest)
		}
		return nil, fmt.Errorf("%w: agent discovery failed", a2a.ErrServerError)
	}
	return a, nil
}

func checkMessage(m *a2a.Message) error {
	if m == nil {
		return invalid("message is required")
	}
	if m.ID == "" || len(m.ID) > maxMessageIDLen {
		return invalid("messageId is required (at most %d bytes)", maxMessageIDLen)
	}
	if m.Role != a2a.MessageRoleUser {
		return invalid("message role must be user")
	}
	if len(m.Parts) == 0 || len(m.Parts) > maxParts {
		return invalid("a message has 1 to %d parts", maxParts)
	}
	if len(m.ContextID) > maxMessageIDLen {
		return invalid("contextId is at most %d bytes", maxMessageIDLen)
	}
	return nil
}

// invocation picks the tool and arguments a message asks for: the skill
// named in metadata (or the agent's only skill); arguments from the first
// data part, else from the text for a tool taking one string.
func invocation(a *agent, m *a2a.Message, params map[string]any) (*agentclient.ManifestTool, json.RawMessage, error) {
	skill, _ := m.Metadata[a2amap.MetaSkill].(string)
	if skill == "" {
		skill, _ = params[a2amap.MetaSkill].(string)
	}
	var tool *agentclient.ManifestTool
	switch {
	case skill != "":
		for i := range a.tools {
			if a.tools[i].Name == skill {
				tool = &a.tools[i]
			}
		}
		if tool == nil {
			return nil, nil, invalid("the agent has no skill with that id; its skills are in its card")
		}
	case len(a.tools) == 1:
		tool = &a.tools[0]
	default:
		return nil, nil, invalid("this agent has several skills: name one in message metadata %q", a2amap.MetaSkill)
	}
	if d, ok := a2amap.FirstData(m.Parts); ok {
		b, err := json.Marshal(d)
		return tool, b, err
	}
	text := a2amap.Text(m.Parts)
	if prop, ok := singleString(tool.InputSchema); ok {
		b, err := json.Marshal(map[string]string{prop: text})
		return tool, b, err
	}
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return tool, json.RawMessage(t), nil
	}
	return nil, nil, invalid("skill %q takes structured arguments: send them as a data part", tool.Name)
}

// singleString reports the one property of an object schema whose only
// required (or only) property is a string.
func singleString(schema json.RawMessage) (string, bool) {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return "", false
	}
	name := ""
	switch {
	case len(s.Required) == 1:
		name = s.Required[0]
	case len(s.Properties) == 1:
		for k := range s.Properties {
			name = k
		}
	default:
		return "", false
	}
	p, ok := s.Properties[name]
	if t, _ := p.Type.(string); !ok || t != "string" {
		return "", false
	}
	return name, true
}

// start invokes for a new message or answers the pending input for a
// follow-up one, and returns the task id and the revision reached.
func (h handler) start(ctx context.Context, p *a2a.MessageSendParams) (*agent, string, int64, error) {
	if p == nil {
		return nil, "", 0, invalid("params are required")
	}
	if err := checkMessage(p.Message); err != nil {
		return nil, "", 0, err
	}
	// A push config in the message's configuration is checked before
	// anything starts, and registered for the task once it is known.
	pc := fromSend(p)
	if pc != nil {
		if h.f.push == nil {
			return nil, "", 0, a2a.ErrPushNotificationNotSupported
		}
		if err := h.f.push.validate(ctx, pc); err != nil {
			return nil, "", 0, err
		}
	}
	a, err := h.agent(ctx)
	if err != nil {
		return nil, "", 0, err
	}
	ep := a.jid
	if p.Message.TaskID != "" {
		if err := taskRef(p.Message.TaskID); err != nil {
			return nil, "", 0, err
		}
		taskID := string(p.Message.TaskID)
		rev, err := h.answer(ctx, ep, taskID, p.Message)
		if err == nil {
			h.f.tasks.add(h.bare, taskID, p.Message.ContextID)
			if pc != nil {
				err = h.f.push.registerFor(ctx, a, pc, taskID)
			}
		}
		return a, taskID, rev, err
	}
	tool, args, err := invocation(a, p.Message, p.Metadata)
	if err != nil {
		return nil, "", 0, err
	}
	acc, err := h.f.c.Invoke(ctx, ep, &agentclient.InvokeRequest{
		RequestID: requestID(h.bare, p.Message.ID), Tool: tool.Name, Version: a.version, ManifestHash: a.hash, Arguments: args,
	})
	if err != nil {
		return nil, "", 0, xmppError(err, "the invocation")
	}
	h.f.tasks.add(h.bare, acc.TaskID, p.Message.ContextID)
	if pc != nil {
		if err := h.f.push.registerFor(ctx, a, pc, acc.TaskID); err != nil {
			return nil, "", 0, err
		}
	}
	return a, acc.TaskID, acc.Revision, nil
}

// answer sends a follow-up message as the answer to the task's pending
// input request. A repeated answer (the same message retried) is harmless.
func (h handler) answer(ctx context.Context, ep jid.JID, taskID string, m *a2a.Message) (int64, error) {
	st, err := h.f.c.State(ctx, ep, taskID)
	if err != nil {
		return 0, xmppError(err, "reading the task")
	}
	if st.State != agentproto.StateInputRequired || len(st.PendingInput) == 0 {
		if st.Terminal() {
			return 0, fmt.Errorf("%w: the task has ended", a2a.ErrTaskNotCancelable)
		}
		return st.Revision, nil // already answered: a retried message
	}
	var req agentclient.InputRequest
	if err := json.Unmarshal(st.PendingInput, &req); err != nil {
		return 0, fmt.Errorf("%w: the pending input request is unreadable", a2a.ErrServerError)
	}
	var value json.RawMessage
	if d, ok := a2amap.FirstData(m.Parts); ok {
		value, _ = json.Marshal(d)
	} else if prop, ok := singleString(req.InputSchema); ok {
		value, _ = json.Marshal(map[string]string{prop: a2amap.Text(m.Parts)})
	} else if t := strings.TrimSpace(a2amap.Text(m.Parts)); json.Valid([]byte(t)) && t != "" {
		value = json.RawMessage(t)
	} else {
		return 0, invalid("the question asks for structured input: send it as a data part")
	}
	rev, err := h.f.c.ProvideInput(ctx, ep, taskID, req.RequestID, st.Revision, value)
	if err != nil {
		return 0, xmppError(err, "the answer")
	}
	return rev, nil
}

// OnSendMessage invokes (or answers) and, when the client blocks, waits
// until the task settles or needs input.
func (h handler) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	a, taskID, rev, err := h.start(ctx, p)
	if err != nil {
		return nil, err
	}
	if p.Config == nil || p.Config.Blocking == nil || *p.Config.Blocking {
		// Build the answer from the stream itself: the final update and
		// the artifacts, without reading task-state and result again.
		wctx, cancel := context.WithTimeout(ctx, h.f.opts.BlockingWait)
		defer cancel()
		t := &a2a.Task{ID: a2a.TaskID(taskID), ContextID: h.f.tasks.contextOf(taskID)}
		for ev, err := range h.f.follow(wctx, a, taskID, rev) {
			if err != nil {
				break
			}
			switch v := ev.(type) {
			case *a2a.TaskArtifactUpdateEvent:
				t.Artifacts = append(t.Artifacts, v.Artifact)
			case *a2a.TaskStatusUpdateEvent:
				if v.Final {
					t.Status, t.Metadata = v.Status, v.Metadata
					return t, nil
				}
			}
		}
	}
	return h.f.snapshot(ctx, a, taskID)
}

// OnSendMessageStream invokes (or answers) and streams the task: its
// snapshot first, then every status change until it settles or needs input.
func (h handler) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		a, taskID, rev, err := h.start(ctx, p)
		if err != nil {
			yield(nil, err)
			return
		}
		if p.Message.TaskID != "" {
			h.f.stream(ctx, a, taskID, yield)
			return
		}
		// A new task starts as submitted at its admission revision; every
		// event after it (buffered by the client since the invoke) follows.
		t := &a2a.Task{ID: a2a.TaskID(taskID), ContextID: h.f.tasks.contextOf(taskID), Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted},
			Metadata: map[string]any{a2amap.MetaTask: map[string]any{"endpoint": a.jid.String(), "taskId": taskID, "revision": rev, "manifestVersion": a.version}}}
		if !yield(t, nil) {
			return
		}
		for ev, err := range h.f.follow(ctx, a, taskID, rev) {
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// OnResubscribeToTask streams a running task from its current state.
func (h handler) OnResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		a, err := h.agent(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		if p == nil {
			yield(nil, invalid("id is required"))
			return
		}
		if err := taskRef(p.ID); err != nil {
			yield(nil, err)
			return
		}
		h.f.stream(ctx, a, string(p.ID), yield)
	}
}

// OnGetTask reads the XMPP task-state (and result).
func (h handler) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	if q == nil {
		return nil, invalid("id is required")
	}
	if err := taskRef(q.ID); err != nil {
		return nil, err
	}
	a, err := h.agent(ctx)
	if err != nil {
		return nil, err
	}
	return h.f.snapshot(ctx, a, string(q.ID))
}

// OnCancelTask asks the XMPP task to cancel and waits (bounded) for it to
// settle; a task that has already ended is not cancelable.
func (h handler) OnCancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	if p == nil {
		return nil, invalid("id is required")
	}
	if err := taskRef(p.ID); err != nil {
		return nil, err
	}
	a, err := h.agent(ctx)
	if err != nil {
		return nil, err
	}
	taskID := string(p.ID)
	for attempt := 0; ; attempt++ {
		st, err := h.f.c.State(ctx, a.jid, taskID)
		if err != nil {
			return nil, xmppError(err, "reading the task")
		}
		if st.Terminal() {
			if st.State == agentproto.StateCancelled {
				return h.f.snapshot(ctx, a, taskID)
			}
			return nil, a2a.ErrTaskNotCancelable
		}
		if st.State == agentproto.StateCancelling {
			break
		}
		reason := "cancelled by the A2A client"
		_, err = h.f.c.Cancel(ctx, a.jid, taskID, st.Revision, &reason)
		if err == nil {
			break
		}
		if agentclient.Condition(err) != "conflict" || attempt >= 5 {
			return nil, xmppError(err, "the cancellation")
		}
		// The task moved on between the read and the cancel: read again.
	}
	wctx, cancel := context.WithTimeout(ctx, h.f.opts.CancelWait)
	defer cancel()
	for range h.f.follow(wctx, a, taskID, 0) {
	}
	return h.f.snapshot(ctx, a, taskID)
}

// Push notifications are not offered (the card says so).
func (h handler) OnGetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	if h.f.push == nil || p == nil {
		return nil, a2a.ErrPushNotificationNotSupported
	}
	c, err := v1handler{h: h}.GetTaskPushConfig(ctx, a2av0.ToV1GetTaskPushConfigRequest(p))
	if err != nil {
		return nil, legacyErr(err)
	}
	return a2av0.FromV1PushConfig(c), nil
}
func (h handler) OnListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	if h.f.push == nil || p == nil {
		return nil, a2a.ErrPushNotificationNotSupported
	}
	r, err := v1handler{h: h}.ListTaskPushConfigs(ctx, a2av0.ToV1ListTaskPushConfigRequest(p))
	if err != nil {
		return nil, legacyErr(err)
	}
	return a2av0.FromV1PushConfigs(r.Configs), nil
}
func (h handler) OnSetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	if h.f.push == nil || p == nil {
		return nil, a2a.ErrPushNotificationNotSupported
	}
	c, err := v1handler{h: h}.CreateTaskPushConfig(ctx, a2av0.ToV1PushConfig(p))
	if err != nil {
		return nil, legacyErr(err)
	}
	return a2av0.FromV1PushConfig(c), nil
}
func (h handler) OnDeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	if h.f.push == nil || p == nil {
		return a2a.ErrPushNotificationNotSupported
	}
	return legacyErr(v1handler{h: h}.DeleteTaskPushConfig(ctx, a2av0.ToV1DeleteTaskPushConfigRequest(p)))
}

// legacyErr is a 1.0 error with its 0.3 sentinel, for the 0.3 transport.
func legacyErr(err error) error {
	if err == nil {
		return nil
	}
	for _, p := range errPairs {
		if errors.Is(err, p.v1) {
			return &v1Error{msg: err.Error(), target: p.old}
		}
	}
	return a2a.ErrInternalError
}
func (handler) OnGetExtendedAgentCard(context.Context) (*a2a.AgentCard, error) {
	return nil, a2a.ErrAuthenticatedExtendedCardNotConfigured
}

// snapshot is the A2A task for an XMPP task: its state, the pending
// question or failure as the status message, the result as an artifact.
func (f *Front) snapshot(ctx context.Context, a *agent, taskID string) (*a2a.Task, error) {
	st, err := f.c.State(ctx, a.jid, taskID)
	if err != nil {
		return nil, xmppError(err, "reading the task")
	}
	t := &a2a.Task{
		ID: a2a.TaskID(taskID), ContextID: f.tasks.contextOf(taskID),
		Status:   a2a.TaskStatus{State: a2amap.State(st.State), Timestamp: stamp(st.Updated)},
		Metadata: map[string]any{a2amap.MetaTask: map[string]any{"endpoint": a.jid.String(), "taskId": taskID, "revision": st.Revision, "manifestVersion": st.APIVersion}},
	}
	if t.Status.Timestamp != nil {
		f.tasks.touch(taskID, *t.Status.Timestamp)
	}
	switch {
	case st.State == agentproto.StateInputRequired && len(st.PendingInput) > 0:
		var req agentclient.InputRequest
		if json.Unmarshal(st.PendingInput, &req) == nil {
			t.Status.Message = inputMessage(t, req)
		}
	case st.State == agentproto.StateCancelling:
		t.Status.Message = agentMessage(t, "cancelling")
	case st.Terminal():
		res, err := f.c.Result(ctx, a.jid, taskID)
		if err != nil {
			return nil, xmppError(err, "reading the result")
		}
		f.settle(t, res.State, res.Payload)
	}
	return t, nil
}

// settle fills a terminal task from its terminal event payload.
func (f *Front) settle(t *a2a.Task, state agentproto.State, payload json.RawMessage) {
	t.Status.State = a2amap.State(state)
	switch state {
	case agentproto.StateCompleted:
		var c agentproto.CompletedPayload
		if json.Unmarshal(payload, &c) == nil {
			if art, err := a2amap.ResultArtifact(c.Result, a2a.ArtifactID("result-"+string(t.ID))); err == nil {
				t.Artifacts = []*a2a.Artifact{art}
				return
			}
		}
		// A result the front cannot read is not an empty success: the A2A
		// task fails with the code saying so (the XMPP task is completed).
		fe := agentproto.TaskError{Code: a2amap.CodeProtocol, Message: "The task completed with a result that cannot be represented in A2A."}
		t.Status.State = a2a.TaskStateFailed
		m := agentMessage(t, fe.Code+": "+fe.Message)
		m.Metadata = map[string]any{a2amap.MetaFailure: fe}
		t.Status.Message = m
	case agentproto.StateFailed:
		var fp agentproto.FailedPayload
		if json.Unmarshal(payload, &fp) == nil {
			m := agentMessage(t, fp.Error.Code+": "+a2amap.Bound(fp.Error.Message, 2000))
			m.Metadata = map[string]any{a2amap.MetaFailure: fp.Error}
			t.Status.Message = m
		}
	case agentproto.StateCancelled:
		var cp agentproto.CancelledPayload
		if json.Unmarshal(payload, &cp) == nil && cp.Reason != "" {
			t.Status.Message = agentMessage(t, a2amap.Bound(cp.Reason, 2000))
		}
	}
}

func agentMessage(t a2a.TaskInfoProvider, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, t, a2a.TextPart{Text: text})
}

// inputMessage is the status message of input-required: the question as
// text, and the request id and JSON Schema of the expected answer as data.
func inputMessage(t a2a.TaskInfoProvider, req agentclient.InputRequest) *a2a.Message {
	var schema any
	_ = json.Unmarshal(req.InputSchema, &schema)
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, t,
		a2a.TextPart{Text: a2amap.Bound(req.Question, 4000)},
		a2a.DataPart{Data: map[string]any{"requestId": req.RequestID, "inputSchema": schema, "expiresAt": req.ExpiresAt}},
	)
	m.Metadata = map[string]any{a2amap.MetaInput: map[string]any{"requestId": req.RequestID}}
	return m
}

func stamp(s string) *time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	return &t
}

// stream yields the task's snapshot, then its events until it settles or
// needs input (the A2A stream's final event).
func (f *Front) stream(ctx context.Context, a *agent, taskID string, yield func(a2a.Event, error) bool) {
	t, err := f.snapshot(ctx, a, taskID)
	if err != nil {
		yield(nil, err)
		return
	}
	if !yield(t, nil) || t.Status.State.Terminal() || t.Status.State == a2a.TaskStateInputRequired {
		return
	}
	rev, _ := t.Metadata[a2amap.MetaTask].(map[string]any)["revision"].(int64)
	for ev, err := range f.follow(ctx, a, taskID, rev) {
		if !yield(ev, err) || err != nil {
			return
		}
	}
}

// follow yields A2A events for the task's lifecycle events after revision
// from, ending after the terminal or input-required update. Lost events
// are recovered from task-state after RecoverAfter without news.
func (f *Front) follow(ctx context.Context, a *agent, taskID string, from int64) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		events, stop := f.c.Subscribe(a.jid, taskID)
		defer stop()
		info := &a2a.Task{ID: a2a.TaskID(taskID), ContextID: f.tasks.contextOf(taskID)}
		last := from
		timer := time.NewTimer(f.opts.RecoverAfter)
		defer timer.Stop()
		status := func(state a2a.TaskState, msg *a2a.Message, final bool) bool {
			f.tasks.touch(taskID, time.Now())
			ev := a2a.NewStatusUpdateEvent(info, state, msg)
			ev.Final = final
			ev.Metadata = map[string]any{a2amap.MetaTask: map[string]any{"endpoint": a.jid.String(), "taskId": taskID, "revision": last, "manifestVersion": a.version}}
			return yield(ev, nil)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-events:
				if ev.Revision <= last {
					continue
				}
				last = ev.Revision
				if !timer.Stop() {
					select {
					case <-timer.C:
					default:
					}
				}
				timer.Reset(f.opts.RecoverAfter)
				switch ev.Type {
				case agentproto.EventStatus:
					var s agentproto.StatusPayload
					_ = json.Unmarshal(ev.Payload, &s)
					var msg *a2a.Message
					if s.State == agentproto.StateCancelling {
						msg = agentMessage(info, "cancelling")
					}
					if !status(a2amap.State(s.State), msg, false) {
						return
					}
				case agentproto.EventProgress:
					var p agentproto.ProgressPayload
					_ = json.Unmarshal(ev.Payload, &p)
					msg := agentMessage(info, progressText(p))
					msg.Metadata = map[string]any{a2amap.MetaProgress: p}
					if !status(a2a.TaskStateWorking, msg, false) {
						return
					}
				case agentproto.EventInputRequired:
					var req agentclient.InputRequest
					_ = json.Unmarshal(ev.Payload, &req)
					status(a2a.TaskStateInputRequired, inputMessage(info, req), true)
					return
				default:
					if ev.Type.Terminal() {
						t := &a2a.Task{ID: info.ID, ContextID: info.ContextID}
						f.settle(t, agentproto.State(ev.Type), ev.Payload)
						for _, art := range t.Artifacts {
							ae := a2a.NewArtifactEvent(info, art.Parts...)
							ae.Artifact.ID, ae.Artifact.Name, ae.Artifact.Metadata, ae.LastChunk = art.ID, art.Name, art.Metadata, true
							if !yield(ae, nil) {
								return
							}
						}
						status(t.Status.State, t.Status.Message, true)
						return
					}
				}
			case <-timer.C:
				t, err := f.snapshot(ctx, a, taskID)
				if err != nil {
					yield(nil, err)
					return
				}
				rev, _ := t.Metadata[a2amap.MetaTask].(map[string]any)["revision"].(int64)
				if rev > last {
					last = rev
					final := t.Status.State.Terminal() || t.Status.State == a2a.TaskStateInputRequired
					if final {
						for _, art := range t.Artifacts {
							ae := a2a.NewArtifactEvent(info, art.Parts...)
							ae.Artifact.ID, ae.Artifact.Name, ae.Artifact.Metadata, ae.LastChunk = art.ID, art.Name, art.Metadata, true
							if !yield(ae, nil) {
								return
							}
						}
					}
					if !status(t.Status.State, t.Status.Message, final) || final {
						return
					}
				}
				timer.Reset(f.opts.RecoverAfter)
			}
		}
	}
}

func progressText(p agentproto.ProgressPayload) string {
	var parts []string
	if p.Percent != nil {
		parts = append(parts, fmt.Sprintf("%.0f%%", *p.Percent))
	}
	if p.Stage != "" {
		parts = append(parts, a2amap.Bound(p.Stage, 200))
	}
	if p.Message != "" {
		parts = append(parts, a2amap.Bound(p.Message, 2000))
	}
	if len(parts) == 0 {
		return "working"
	}
	return strings.Join(parts, " · ")
}
