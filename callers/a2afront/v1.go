package a2afront

import (
	"context"
	"errors"
	"fmt"
	"iter"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentgw/agentgw/internal/ids"
)

// v1handler serves A2A 1.0 (JSON-RPC and HTTP+JSON) for one agent. It is
// an adapter over the 0.3 handler: both versions run the same bridging
// code (one task model, one mapping), the 1.0 shapes converted with the
// SDK's a2av0 conversions at the edge. ListTasks is 1.0's own.
type v1handler struct{ h handler }

var _ a2asrv.RequestHandler = v1handler{}

// Page sizes of ListTasks (A2A 1.0 §3.1.4: the server picks when unset).
const (
	defaultPageSize = 50
	maxPageSize     = 100
	// maxListScan bounds the task-state reads one ListTasks page may make
	// when a status filter skips tasks.
	maxListScan = 500
)

// errPairs maps the 0.3 SDK's error sentinels to 1.0's, so the 1.0
// transports answer the same codes (the message is kept: it is ours).
var errPairs = []struct{ old, v1 error }{
	{legacy.ErrParseError, a2a.ErrParseError},
	{legacy.ErrInvalidRequest, a2a.ErrInvalidRequest},
	{legacy.ErrMethodNotFound, a2a.ErrMethodNotFound},
	{legacy.ErrInvalidParams, a2a.ErrInvalidParams},
	{legacy.ErrInternalError, a2a.ErrInternalError},
	{legacy.ErrServerError, a2a.ErrServerError},
	{legacy.ErrTaskNotFound, a2a.ErrTaskNotFound},
	{legacy.ErrTaskNotCancelable, a2a.ErrTaskNotCancelable},
	{legacy.ErrPushNotificationNotSupported, a2a.ErrPushNotificationNotSupported},
	{legacy.ErrUnsupportedOperation, a2a.ErrUnsupportedOperation},
	{legacy.ErrAuthenticatedExtendedCardNotConfigured, a2a.ErrExtendedCardNotConfigured},
}

type v1Error struct {
	msg    string
	target error
}

func (e *v1Error) Error() string        { return e.msg }
func (e *v1Error) Is(target error) bool { return target == e.target }

// v1err is err with the 1.0 sentinel of its 0.3 one.
func v1err(err error) error {
	if err == nil {
		return nil
	}
	for _, p := range errPairs {
		if errors.Is(err, p.old) {
			return &v1Error{msg: err.Error(), target: p.v1}
		}
	}
	return &v1Error{msg: "internal error", target: a2a.ErrInternalError}
}

func (v v1handler) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	if req == nil || req.Message == nil {
		return nil, v1err(invalid("message is required"))
	}
	res, err := v.h.OnSendMessage(ctx, a2av0.FromV1SendMessageRequest(req))
	if err != nil {
		return nil, v1err(err)
	}
	switch r := res.(type) {
	case *legacy.Task:
		return convTask(r)
	case *legacy.Message:
		m, err := a2av0.ToV1Message(r)
		return m, v1err(convErr(err))
	}
	return nil, v1err(legacy.ErrInternalError)
}

func (v v1handler) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	if req == nil || req.Message == nil {
		return func(yield func(a2a.Event, error) bool) { yield(nil, v1err(invalid("message is required"))) }
	}
	return events(v.h.OnSendMessageStream(ctx, a2av0.FromV1SendMessageRequest(req)))
}

func (v v1handler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	if req == nil {
		return func(yield func(a2a.Event, error) bool) { yield(nil, v1err(invalid("id is required"))) }
	}
	return events(v.h.OnResubscribeToTask(ctx, a2av0.FromV1SubscribeToTaskRequest(req)))
}

func (v v1handler) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	if req == nil {
		return nil, v1err(invalid("id is required"))
	}
	t, err := v.h.OnGetTask(ctx, a2av0.FromV1GetTaskRequest(req))
	if err != nil {
		return nil, v1err(err)
	}
	return convTask(t)
}

func (v v1handler) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	if req == nil {
		return nil, v1err(invalid("id is required"))
	}
	t, err := v.h.OnCancelTask(ctx, a2av0.FromV1CancelTaskRequest(req))
	if err != nil {
		return nil, v1err(err)
	}
	return convTask(t)
}

// ListTasks lists the tasks this front started for the agent, most
// recently updated first, each read from the XMPP task-state, with an
// opaque cursor (A2A 1.0 §3.1.4).
func (v v1handler) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	if req == nil {
		req = &a2a.ListTasksRequest{}
	}
	size := req.PageSize
	switch {
	case size < 0 || size > maxPageSize:
		return nil, v1err(invalid("pageSize is 1 to %d", maxPageSize))
	case size == 0:
		size = defaultPageSize
	}
	if len(req.ContextID) > maxMessageIDLen {
		return nil, v1err(invalid("contextId is at most %d bytes", maxMessageIDLen))
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return nil, v1err(invalid("historyLength must not be negative"))
	}
	if req.Status == "TASK_STATE_UNSPECIFIED" {
		req.Status = a2a.TaskStateUnspecified
	}
	switch req.Status {
	case a2a.TaskStateUnspecified, a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
		a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected:
	default:
		return nil, v1err(invalid("status is not a TASK_STATE_* value"))
	}
	cur, err := parseToken(req.PageToken)
	if err != nil {
		return nil, v1err(invalid("%s", err.Error()))
	}
	a, err := v.h.agent(ctx)
	if err != nil {
		return nil, v1err(err)
	}
	f := v.h.f
	all := f.tasks.after(v.h.bare, req.ContextID, nil)
	cands := all
	if cur != nil {
		cands = f.tasks.after(v.h.bare, req.ContextID, cur)
	}
	out := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, TotalSize: len(all)}
	scanned := 0
	var last *indexed
	for i := range cands {
		if len(out.Tasks) == size || scanned == maxListScan {
			break
		}
		e := cands[i]
		last = &cands[i]
		scanned++
		lt, err := f.snapshot(ctx, a, e.id)
		if err != nil {
			if errors.Is(err, legacy.ErrTaskNotFound) {
				continue // the gateway forgot it (retention)
			}
			return nil, v1err(err)
		}
		t, err := convTask(lt)
		if err != nil {
			return nil, err
		}
		if req.Status != a2a.TaskStateUnspecified && t.Status.State != req.Status {
			continue
		}
		if req.StatusTimestampAfter != nil && (t.Status.Timestamp == nil || !t.Status.Timestamp.After(*req.StatusTimestampAfter)) {
			continue
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		out.Tasks = append(out.Tasks, t)
	}
	out.PageSize = len(out.Tasks)
	if last != nil && (len(out.Tasks) == size || scanned == maxListScan) && last != &cands[len(cands)-1] {
		out.NextPageToken = cursor{updated: last.updated.UnixNano(), seq: last.seq}.token()
	}
	return out, nil
}

// Push notification configs (push.go); not supported without an outbox.
func (v v1handler) GetTaskPushConfig(ctx context.Context, req *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	if v.h.f.push == nil {
		return nil, a2a.ErrPushNotificationNotSupported
	}
	if req == nil || taskRef(legacy.TaskID(req.TaskID)) != nil {
		return nil, a2a.ErrTaskNotFound
	}
	return v.h.f.push.get(ctx, string(req.TaskID), req.ID)
}
func (v v1handler) ListTaskPushConfigs(ctx context.Context, req *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	if v.h.f.push == nil {
		return nil, a2a.ErrPushNotificationNotSupported
	}
	if req == nil || taskRef(legacy.TaskID(req.TaskID)) != nil {
		return nil, a2a.ErrTaskNotFound
	}
	cfgs, err := v.h.f.push.configs(ctx, string(req.TaskID))
	if err != nil {
		return nil, v1err(fmt.Errorf("%w: reading push configs failed", legacy.ErrServerError))
	}
	if cfgs == nil {
		cfgs = []*a2a.PushConfig{}
	}
	return &a2a.ListTaskPushConfigResponse{Configs: cfgs}, nil
}
func (v v1handler) CreateTaskPushConfig(ctx context.Context, c *a2a.PushConfig) (*a2a.PushConfig, error) {
	if v.h.f.push == nil {
		return nil, a2a.ErrPushNotificationNotSupported
	}
	return v.h.f.push.create(ctx, v.h, c)
}
func (v v1handler) DeleteTaskPushConfig(ctx context.Context, req *a2a.DeleteTaskPushConfigRequest) error {
	if v.h.f.push == nil {
		return a2a.ErrPushNotificationNotSupported
	}
	if req == nil || taskRef(legacy.TaskID(req.TaskID)) != nil {
		return a2a.ErrTaskNotFound
	}
	return v.h.f.push.remove(ctx, string(req.TaskID), req.ID)
}
func (v1handler) GetExtendedAgentCard(context.Context, *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, a2a.ErrExtendedCardNotConfigured
}

// OnListTasks serves tasks/list to a 0.3 client through the 1.0 listing.
func (h handler) OnListTasks(ctx context.Context, req *legacy.ListTasksRequest) (*legacy.ListTasksResponse, error) {
	if req == nil {
		req = &legacy.ListTasksRequest{}
	}
	res, err := v1handler{h: h}.ListTasks(ctx, a2av0.ToV1ListTasksRequest(req))
	if err != nil {
		return nil, err
	}
	return a2av0.FromV1ListTasksResponse(res), nil
}

func convTask(t *legacy.Task) (*a2a.Task, error) {
	v, err := a2av0.ToV1Task(t)
	if err != nil {
		return nil, v1err(convErr(err))
	}
	return v, nil
}

// convErr is a conversion failure as an internal error without its text.
func convErr(err error) error {
	if err == nil {
		return nil
	}
	return legacy.ErrInternalError
}

// events converts a 0.3 event stream to 1.0.
func events(seq iter.Seq2[legacy.Event, error]) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		for ev, err := range seq {
			if err != nil {
				yield(nil, v1err(err))
				return
			}
			e, cerr := a2av0.ToV1Event(ev)
			if cerr != nil {
				yield(nil, v1err(convErr(cerr)))
				return
			}
			if !yield(e, nil) {
				return
			}
		}
	}
}

// validTaskPath reports whether a task id from a URL path names a task
// (the XMPP identifier grammar); others are answered 404 without echo.
func validTaskPath(id string) bool { return ids.Valid(id) }
