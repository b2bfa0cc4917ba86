package mcpfront

// MCP Tasks at the front, both revisions, beside the go-sdk (v1.8.0 has no
// Tasks): a task-augmented tools/call returns at once with an MCP task
// whose id names the XMPP task (taskid.go); tasks/* are custom methods that
// read and drive that XMPP task. docs/mcp-front.md, "Tasks".
//
//   - 2025-11-25 (SEP-1686): the host sends params.task on tools/call (the
//     transport shim moves it into _meta[metaTaskParams], since the SDK
//     drops unknown params); tasks/get, tasks/result (blocks, elicits with
//     related-task), tasks/list, tasks/cancel; capabilities.tasks.
//   - 2026-07-28 (SEP-2663, io.modelcontextprotocol/tasks): the host
//     declares the extension in its capabilities; the front answers every
//     tools/call of a task-capable tool with resultType "task"; tasks/get
//     carries inputRequests, result or error; tasks/update answers input;
//     tasks/cancel acknowledges.

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

const (
	// ExtTasks is the 2026-07-28 Tasks extension.
	ExtTasks = "io.modelcontextprotocol/tasks"
	// metaRelatedTask ties messages to a task (2025-11-25).
	metaRelatedTask = "io.modelcontextprotocol/related-task"
	// metaImmediate is the text a 2025-11-25 host may give the model at once.
	metaImmediate = "io.modelcontextprotocol/model-immediate-response"
	// metaTaskParams is where the transport shim puts a 2025-11-25
	// tools/call's params.task (the SDK drops unknown params).
	metaTaskParams = "agentgw/taskParams"
	// protocolTasks is the first revision with Tasks.
	protocolTasks = "2025-11-25"
	// pollInterval is the polling interval suggested to hosts.
	pollInterval = 1000 // ms
	// maxListPage bounds a tasks/list page.
	maxListPage = 50
	// maxWatchers bounds the tasks whose progress and status the front
	// forwards at once; beyond it hosts only poll.
	maxWatchers = 1000
)

// taskSupport is what the front declares as execution.taskSupport of b:
// every XMPP call is a durable task, so the front can give any tool a
// handle, and it can also wait for any tool; only an agent that declared
// "forbidden" keeps its calls synchronous.
func (b *binding) taskSupport() string {
	var e struct {
		TaskSupport string `json:"taskSupport"`
	}
	if len(b.tool.Execution) > 0 && json.Unmarshal(b.tool.Execution, &e) == nil && e.TaskSupport == "forbidden" {
		return "forbidden"
	}
	return "optional"
}

// taskMode is how a tools/call is to be answered.
type taskMode int

const (
	modeSync taskMode = iota
	mode2025          // CreateTaskResult {task: …}
	mode2026          // resultType "task"
)

// protocolOf is the revision of a request: its _meta (2026-07-28
// stateless requests) or the session's.
func protocolOf(meta mcp.Meta, ss *mcp.ServerSession) string {
	if v, ok := meta[mcp.MetaKeyProtocolVersion].(string); ok && v != "" {
		return v
	}
	if ss != nil {
		if p := ss.InitializeParams(); p != nil {
			return p.ProtocolVersion
		}
	}
	return ""
}

// declaresTasksExt reports whether the host declared the 2026-07-28
// extension, per request or at initialize.
func declaresTasksExt(meta mcp.Meta, ss *mcp.ServerSession) bool {
	if raw, ok := meta[mcp.MetaKeyClientCapabilities]; ok {
		b, _ := json.Marshal(raw)
		var c struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		}
		if json.Unmarshal(b, &c) == nil {
			if _, ok := c.Extensions[ExtTasks]; ok {
				return true
			}
		}
	}
	if ss != nil {
		if p := ss.InitializeParams(); p != nil && p.Capabilities != nil {
			if _, ok := p.Capabilities.Extensions[ExtTasks]; ok {
				return true
			}
		}
	}
	return false
}

// modeOf decides how the call is answered, or refuses a task-augmented
// call of a tool that forbids it (2025-11-25 requires -32601).
func modeOf(req *mcp.CallToolRequest, b *binding) (taskMode, error) {
	if req.Params == nil || req.Params.RequestState != "" {
		return modeSync, nil
	}
	proto := protocolOf(req.Params.Meta, req.Session)
	if proto >= protocolMRTR {
		if declaresTasksExt(req.Params.Meta, req.Session) && b.taskSupport() != "forbidden" {
			return mode2026, nil
		}
		return modeSync, nil
	}
	if _, ok := req.Params.Meta[metaTaskParams]; ok && proto >= protocolTasks {
		if b.taskSupport() == "forbidden" {
			return modeSync, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "this tool does not support task-augmented calls"}
		}
		return mode2025, nil
	}
	return modeSync, nil
}

// middleware adds what the SDK cannot express: capabilities.tasks,
// execution.taskSupport and task-augmented tools/call.
func (f *Front) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil {
				f.mu.Lock()
				b := f.tools[r.Params.Name]
				f.mu.Unlock()
				if b != nil {
					mode, err := modeOf(r, b)
					if err != nil {
						return nil, err
					}
					if mode != modeSync {
						return f.callAsTask(ctx, b, r, mode)
					}
				}
			}
		case "initialize":
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && err == nil && ir.ProtocolVersion >= protocolTasks {
				return &patched{Result: ir, patch: addTasksCapability}, nil
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			lr, ok := res.(*mcp.ListToolsResult)
			// execution.taskSupport exists in 2025-11-25 only; 2026-07-28
			// dropped it (the server decides per call).
			if p := protocolOf(metaOf(req), sessionOf(req)); !ok || err != nil || p < protocolTasks || p >= protocolMRTR {
				return res, err
			}
			support := map[string]string{}
			f.mu.Lock()
			for _, t := range lr.Tools {
				if b := f.tools[t.Name]; b != nil {
					support[t.Name] = b.taskSupport()
				}
			}
			f.mu.Unlock()
			return &patched{Result: lr, patch: func(m map[string]json.RawMessage) { addExecution(m, support) }}, nil
		}
		return next(ctx, method, req)
	}
}

func metaOf(req mcp.Request) mcp.Meta {
	if p := req.GetParams(); p != nil {
		return p.GetMeta()
	}
	return nil
}

func sessionOf(req mcp.Request) *mcp.ServerSession {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return ss
}

// patched is an SDK result with members the SDK's types lack.
type patched struct {
	mcp.Result
	patch func(map[string]json.RawMessage)
}

func (p *patched) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(p.Result)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	p.patch(m)
	return json.Marshal(m)
}

// addTasksCapability declares the 2025-11-25 tasks capability.
func addTasksCapability(m map[string]json.RawMessage) {
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(m["capabilities"], &caps)
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	caps["tasks"] = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)
	m["capabilities"], _ = json.Marshal(caps)
}

// addExecution sets execution.taskSupport on the listed tools.
func addExecution(m map[string]json.RawMessage, support map[string]string) {
	var tools []map[string]json.RawMessage
	if json.Unmarshal(m["tools"], &tools) != nil {
		return
	}
	for _, t := range tools {
		var name string
		_ = json.Unmarshal(t["name"], &name)
		if s, ok := support[name]; ok {
			t["execution"], _ = json.Marshal(map[string]string{"taskSupport": s})
		}
	}
	m["tools"], _ = json.Marshal(tools)
}

// jsonResult is a result the front builds member by member.
type jsonResult struct {
	mcp.ResultBase
	fields map[string]any
}

func (r *jsonResult) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(r.fields)+1)
	for k, v := range r.fields {
		m[k] = v
	}
	if len(r.Meta) > 0 {
		m["_meta"] = r.Meta
	}
	return json.Marshal(m)
}

// callAsTask invokes the tool and answers with the task at once.
func (f *Front) callAsTask(ctx context.Context, b *binding, req *mcp.CallToolRequest, mode taskMode) (mcp.Result, error) {
	canon, bad := arguments(b, req)
	if bad != "" {
		if mode == mode2026 {
			return toolError(bad, nil), nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: bad}
	}
	c, ir, acc, err, rpcErr := f.admit(ctx, b, req, canon)
	if rpcErr != nil {
		return nil, rpcErr
	}
	if err != nil {
		res, rerr := c.invokeFailed(ctx, ir, err)
		if rerr != nil || mode == mode2026 {
			return res, rerr
		}
		msg := "the agent refused the call"
		if res != nil && len(res.Content) > 0 {
			if t, ok := res.Content[0].(*mcp.TextContent); ok {
				msg = t.Text
			}
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
	}
	c.accepted(acc)
	id := encodeTaskID(b.ep, acc.TaskID, b.tool.Name)
	st := &agentclient.TaskState{TaskID: acc.TaskID, State: agentproto.StateAccepted, Revision: acc.Revision,
		Created: acc.Created, Updated: acc.Created, RetainUntil: acc.RetainUntil}
	tm := c.meta()
	if mode == mode2025 {
		// 2026-07-28 sends no progress for tasks, and task notifications
		// only after subscriptions/listen, which the front does not serve:
		// those hosts poll.
		go f.watch(req.Session, b.ep, *st, id, c.token, tm)
	}
	if mode == mode2026 {
		fields := task2026(id, st)
		fields["resultType"] = "task"
		return &jsonResult{fields: fields, ResultBase: mcp.ResultBase{Meta: mcp.Meta{MetaTask: tm}}}, nil
	}
	return &jsonResult{
		fields: map[string]any{"task": task2025(id, st, "", false, false)},
		ResultBase: mcp.ResultBase{Meta: mcp.Meta{
			MetaTask:      tm,
			metaImmediate: "The tool runs as XMPP task " + acc.TaskID + " of " + b.ep.String() + "; its result follows when it is done.",
		}},
	}, nil
}

// ttlOf is retain-until minus created in ms, or nil (unlimited/unknown).
func ttlOf(st *agentclient.TaskState) *int64 {
	c, err1 := xmpptime.Parse(st.Created)
	r, err2 := xmpptime.Parse(st.RetainUntil)
	if err1 != nil || err2 != nil {
		return nil
	}
	ms := r.Time().Sub(c.Time()).Milliseconds()
	if ms < 0 {
		ms = 0
	}
	return &ms
}

// status maps an XMPP state onto MCP's five.
func status(s agentproto.State) string {
	switch s {
	case agentproto.StateInputRequired:
		return "input_required"
	case agentproto.StateCompleted:
		return "completed"
	case agentproto.StateFailed:
		return "failed"
	case agentproto.StateCancelled:
		return "cancelled"
	default: // accepted, running, cancelling
		return "working"
	}
}

func stamp(s string) string {
	if t, err := xmpptime.Parse(s); err == nil {
		return t.Time().UTC().Format(time.RFC3339Nano)
	}
	return time.Now().UTC().Format(time.RFC3339Nano)
}

// task2025 is the 2025-11-25 Task. toolError marks a completed task whose
// result is a tool error, which that revision reports as failed;
// cancelled marks a task whose cancellation the gateway accepted, which
// that revision reports cancelled from then on.
func task2025(id string, st *agentclient.TaskState, msg string, toolError, cancelled bool) map[string]any {
	s := status2025(st.State, cancelled)
	if toolError && s == "completed" {
		s = "failed"
	}
	if msg == "" {
		msg = "XMPP task " + st.TaskID + ": " + string(st.State)
		if s == "cancelled" && st.State != agentproto.StateCancelled {
			msg += " (its cancellation was accepted; the MCP task is cancelled)"
		}
	}
	return map[string]any{
		"taskId": id, "status": s, "statusMessage": msg,
		"createdAt": stamp(st.Created), "lastUpdatedAt": stamp(st.Updated),
		"ttl": ttlOf(st), "pollInterval": pollInterval,
	}
}

// status2025 is status for 2025-11-25, where tasks/cancel makes a task
// cancelled for good: XMPP cancelling, and any state after an accepted
// cancellation, is cancelled.
func status2025(s agentproto.State, cancelAccepted bool) string {
	if s == agentproto.StateCancelling || cancelAccepted {
		return "cancelled"
	}
	return status(s)
}

// task2026 is the 2026-07-28 Task (without the status-specific members).
func task2026(id string, st *agentclient.TaskState) map[string]any {
	return map[string]any{
		"taskId": id, "status": status(st.State), "statusMessage": "XMPP task " + st.TaskID + ": " + string(st.State),
		"createdAt": stamp(st.Created), "lastUpdatedAt": stamp(st.Updated),
		"ttlMs": ttlOf(st), "pollIntervalMs": pollInterval,
	}
}

// taskParams are the params of every tasks/* method. They decode without
// failing, so a malformed member gets the front's own error, which names
// the member and never repeats the request (the SDK's decoding error
// would quote it).
type taskParams struct {
	mcp.ParamsBase
	TaskID         *string
	Cursor         *string
	InputResponses map[string]json.RawMessage
	bad            string // what is malformed, for the error
}

func (p *taskParams) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		p.bad = "params must be an object"
		return nil
	}
	if raw, ok := m["_meta"]; ok && json.Unmarshal(raw, &p.Meta) != nil {
		p.bad = "params._meta must be an object"
	}
	str := func(name string) *string {
		raw, ok := m[name]
		if !ok {
			return nil
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			p.bad = "params." + name + " must be a string"
			return nil
		}
		return &s
	}
	p.TaskID, p.Cursor = str("taskId"), str("cursor")
	if raw, ok := m["inputResponses"]; ok && json.Unmarshal(raw, &p.InputResponses) != nil {
		p.bad = "params.inputResponses must be an object"
	}
	return nil
}

// registerTaskMethods adds tasks/get, tasks/result, tasks/list,
// tasks/cancel and tasks/update.
func (f *Front) registerTaskMethods() {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(mcp.AddReceivingCustomMethod(f.srv, "tasks/get", f.tasksGet))
	must(mcp.AddReceivingCustomMethod(f.srv, "tasks/result", f.tasksResult))
	must(mcp.AddReceivingCustomMethod(f.srv, "tasks/list", f.tasksList))
	must(mcp.AddReceivingCustomMethod(f.srv, "tasks/cancel", f.tasksCancel))
	must(mcp.AddReceivingCustomMethod(f.srv, "tasks/update", f.tasksUpdate))
}

func invalid(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

var errNoTaskRPC = invalid(errNoTask.Error())

// lookup decodes the id and reads the XMPP task's state. Every id that
// does not resolve gets the same error.
func (f *Front) lookup(ctx context.Context, p *taskParams) (string, taskRef, *agentclient.TaskState, error) {
	if p != nil && p.bad != "" {
		return "", taskRef{}, nil, invalid(p.bad)
	}
	if p == nil || p.TaskID == nil {
		return "", taskRef{}, nil, invalid("params.taskId (a string) is required")
	}
	ref, err := decodeTaskID(*p.TaskID)
	if err != nil || !f.reachable(ref.ep) {
		f.lookupFailed()
		return "", taskRef{}, nil, errNoTaskRPC
	}
	st, err := f.c.State(ctx, ref.ep, ref.taskID)
	if err != nil {
		if ctx.Err() != nil {
			return "", taskRef{}, nil, ctx.Err()
		}
		if cond := agentclient.Condition(err); cond != "" {
			// item-not-found (unknown, expired, another account's) and
			// every other refusal look the same.
			f.lookupFailed()
			return "", taskRef{}, nil, errNoTaskRPC
		}
		return "", taskRef{}, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the agent did not answer the task-state query; try again"}
	}
	return *p.TaskID, ref, st, nil
}

// lookupFailed logs failed lookups at most once a minute (enumeration
// shows as a count, not as a flood of lines).
func (f *Front) lookupFailed() {
	f.known.Lock()
	defer f.known.Unlock()
	f.known.misses++
	if time.Since(f.known.logged) >= time.Minute {
		f.log.Warn("MCP task lookups that did not resolve", "count", f.known.misses)
		f.known.misses, f.known.logged = 0, time.Now()
	}
}

// runFor is a callRun for an existing task, as tasks/result and
// tasks/update need one.
func (f *Front) runFor(ctx context.Context, ss *mcp.ServerSession, ref taskRef, st *agentclient.TaskState, id string) *callRun {
	b := f.bindingFor(ref)
	req := &mcp.CallToolRequest{Session: ss, Params: &mcp.CallToolParamsRaw{Name: b.name}}
	c := f.newRun(ctx, b, ref.ep, req, taskMeta{Endpoint: ref.ep.String(), Tool: ref.tool, Version: st.APIVersion,
		TaskID: ref.taskID, State: st.State, Revision: st.Revision, RetainUntil: st.RetainUntil})
	c.detached, c.related = true, id
	return c
}

// bindingFor is the current binding of the task's tool, or a bare one when
// the tool is no longer listed (its result is still the task's).
func (f *Front) bindingFor(ref taskRef) *binding {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.tools {
		if b.ep.Bare().Equal(ref.ep.Bare()) && b.tool.Name == ref.tool {
			return b
		}
	}
	return &binding{name: ref.tool, ep: ref.ep, tool: agentclient.ManifestTool{Name: ref.tool}}
}

// tasksGet: 2025-11-25 Task, or 2026-07-28 DetailedTask.
func (f *Front) tasksGet(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*jsonResult, error) {
	id, ref, st, err := f.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	var meta mcp.Meta
	if p != nil {
		meta = p.Meta
	}
	if protocolOf(meta, ss) >= protocolMRTR {
		return &jsonResult{fields: f.detailed(ctx, ss, ref, st, id)}, nil
	}
	msg, toolErr := "", false
	switch st.State {
	case agentproto.StateInputRequired:
		if ir := pendingInput(st); ir != nil {
			msg = safeText(ir.Question, maxMessageText)
		}
	case agentproto.StateCompleted, agentproto.StateFailed, agentproto.StateCancelled:
		c := f.runFor(ctx, ss, ref, st, id)
		res, rerr := c.settledFromState(ctx, st)
		switch {
		case rerr != nil:
			var je *jsonrpc.Error
			if errors.As(rerr, &je) {
				msg = je.Message
			}
		case res != nil && res.IsError:
			toolErr = true
			if len(res.Content) > 0 {
				if t, ok := res.Content[0].(*mcp.TextContent); ok {
					msg = safeText(t.Text, maxMessageText)
				}
			}
		}
	}
	cancelled := false
	if st.State == agentproto.StateCompleted || st.State == agentproto.StateFailed {
		// Settled after an accepted cancellation: still cancelled here.
		if cancelled = f.cancelAccepted(ctx, ref); cancelled {
			msg = ""
		}
	}
	return &jsonResult{fields: task2025(id, st, msg, toolErr, cancelled)}, nil
}

// detailed is the 2026-07-28 DetailedTask of st.
func (f *Front) detailed(ctx context.Context, ss *mcp.ServerSession, ref taskRef, st *agentclient.TaskState, id string) map[string]any {
	fields := task2026(id, st)
	fields["resultType"] = "complete"
	switch st.State {
	case agentproto.StateInputRequired:
		reqs := map[string]any{}
		if ir := pendingInput(st); ir != nil {
			c := f.runFor(ctx, ss, ref, st, id)
			form := formFor(ir.InputSchema)
			reqs[inputKey+":"+ir.RequestID] = map[string]any{
				"method": "elicitation/create",
				"params": &mcp.ElicitParams{Mode: "form", Message: c.question(*ir, ""), RequestedSchema: form.Schema},
			}
			fields["statusMessage"] = safeText(ir.Question, maxMessageText)
		}
		fields["inputRequests"] = reqs
	case agentproto.StateCompleted, agentproto.StateFailed, agentproto.StateCancelled:
		c := f.runFor(ctx, ss, ref, st, id)
		c.host.objectOnly = false
		res, err := c.settledFromState(ctx, st)
		var je *jsonrpc.Error
		switch {
		case err == nil:
			// A tool error (XMPP failed included) is a completed call
			// whose result says isError, as the call would have returned.
			fields["status"] = "completed"
			fields["result"] = res
		case errors.As(err, &je) && je.Code == CodeTaskCancelled:
			fields["status"] = "cancelled"
			fields["statusMessage"] = je.Message
		case errors.As(err, &je):
			fields["status"] = "failed"
			fields["error"] = je
		default:
			fields["status"] = "failed"
			fields["error"] = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task's result could not be retrieved"}
		}
	}
	return fields
}

// tasksResult (2025-11-25) blocks until the task settles, asks the host
// for input meanwhile (elicitation/create with related-task), and returns
// what the call would have returned. A host that stops waiting leaves the
// task running.
func (f *Front) tasksResult(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*mcp.CallToolResult, error) {
	id, ref, st, err := f.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	c := f.runFor(ctx, ss, ref, st, id)
	var res *mcp.CallToolResult
	if st.Terminal() {
		res, err = c.settledFromState(ctx, st)
	} else {
		res, err = c.follow(ctx, agentclient.Accepted{TaskID: ref.taskID, Revision: st.Revision}, pendingInput(st))
	}
	if res != nil {
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		res.Meta[metaRelatedTask] = map[string]string{"taskId": id}
	}
	return res, err
}

// tasksCancel sends <cancel/> to the XMPP task (retrying on conflict).
// 2025-11-25 must move the task to cancelled before it answers and keep
// it there: the front answers cancelled once the gateway accepted the
// cancellation, and from then on reports the task cancelled whatever the
// agent settles (cancelAccepted); a task that settled before the
// cancellation was accepted is -32602, as for any terminal task.
// 2026-07-28 acknowledges once the cancellation was accepted
// (cooperative: the task may still complete).
func (f *Front) tasksCancel(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*jsonResult, error) {
	id, ref, st, err := f.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	mrtr := protocolOf(p.Meta, ss) >= protocolMRTR
	if st.Terminal() || (!mrtr && st.State == agentproto.StateCancelling) {
		return nil, invalid("cannot cancel the task: it is already in terminal status " + status2025(st.State, true))
	}
	c := f.runFor(ctx, ss, ref, st, id)
	now, accepted, err := c.requestCancel(ctx, "the MCP host cancelled the task")
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the cancel could not be delivered to the agent; try again"}
	}
	if mrtr {
		return &jsonResult{fields: map[string]any{"resultType": "complete"}}, nil
	}
	if !accepted && now.State != agentproto.StateCancelling {
		// It settled before the cancellation reached it.
		return nil, invalid("cannot cancel the task: it is already in terminal status " + status(now.State))
	}
	return &jsonResult{fields: task2025(id, now, "the XMPP task accepted the cancellation (revision "+
		strconv.FormatInt(now.Revision, 10)+"); the agent may still finish its work, the MCP task stays cancelled", false, true)}, nil
}

// requestCancel sends cancel at the current revision, retrying on
// conflict; it does not wait for the task to settle. It returns the
// task's state after (cancelling at the acceptance revision when this
// request was accepted) and whether it was.
func (c *callRun) requestCancel(ctx context.Context, reason string) (*agentclient.TaskState, bool, error) {
	for attempt := 0; ; attempt++ {
		st, err := c.f.c.State(ctx, c.ep, c.meta().TaskID)
		if err != nil {
			return nil, false, err
		}
		if st.Terminal() || st.State == agentproto.StateCancelling {
			return st, false, nil
		}
		rev, err := c.f.c.Cancel(ctx, c.ep, st.TaskID, st.Revision, &reason)
		if err == nil {
			st.State, st.Revision, st.Updated = agentproto.StateCancelling, rev, xmpptime.Format(time.Now())
			return st, true, nil
		}
		if agentclient.Condition(err) != "conflict" || attempt >= 5 {
			return nil, false, err
		}
	}
}

// cancelAccepted reports whether the gateway accepted a cancellation of
// the task (the task-list extension says so; a gateway without it: no).
func (f *Front) cancelAccepted(ctx context.Context, ref taskRef) bool {
	tl, ok := f.c.(taskLister)
	if !ok {
		return false
	}
	page, err := tl.ListTasks(ctx, ref.ep.Domain(), agentclient.TaskListQuery{TaskID: ref.taskID, Max: 1})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].TaskID != ref.taskID {
		return false
	}
	return page.Tasks[0].CancelRevision > 0
}

// tasksUpdate (2026-07-28) answers the task's outstanding input request.
// Responses to keys that are not outstanding are ignored, as the
// extension says.
func (f *Front) tasksUpdate(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*jsonResult, error) {
	id, ref, st, err := f.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	ack := &jsonResult{fields: map[string]any{"resultType": "complete"}}
	ir := pendingInput(st)
	if ir == nil {
		return ack, nil
	}
	raw, ok := p.InputResponses[inputKey+":"+ir.RequestID]
	if !ok {
		return ack, nil
	}
	var resp mcp.ElicitResult
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, invalid("inputResponses: the response is not an elicitation result")
	}
	c := f.runFor(ctx, ss, ref, st, id)
	switch resp.Action {
	case "accept":
	case "decline", "cancel":
		reason := "the user declined to provide input"
		if resp.Action == "cancel" {
			reason = "the user dismissed the input request"
		}
		if _, _, err := c.requestCancel(ctx, reason); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the cancel could not be delivered to the agent; try again"}
		}
		return ack, nil
	default:
		return nil, invalid(`inputResponses: action must be "accept", "decline" or "cancel"`)
	}
	val, err := formFor(ir.InputSchema).answer(resp.Content, ir.InputSchema)
	if err != nil {
		return nil, invalid("inputResponses: the answer does not match the input request's schema: " + err.Error())
	}
	if _, err := f.c.ProvideInput(ctx, ref.ep, ref.taskID, ir.RequestID, ir.Revision, val); err != nil {
		switch agentclient.Condition(err) {
		case "conflict":
			return ack, nil // answered or superseded meanwhile
		case "not-acceptable", "bad-request":
			return nil, invalid("inputResponses: the agent did not accept the answer")
		default:
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the answer could not be delivered to the agent; try again"}
		}
	}
	return ack, nil
}

// knownTasks counts the lookups that did not resolve, for the log.
type knownTasks struct {
	sync.Mutex
	misses int
	logged time.Time
}

// taskLister is the optional listing side of a Client: agentgw's
// task-list extension (docs/task-list.md), which *agentclient.Client has.
type taskLister interface {
	ListTasks(ctx context.Context, gateway jid.JID, q agentclient.TaskListQuery) (*agentclient.TaskList, error)
}

var _ taskLister = (*agentclient.Client)(nil)

// Bounds of a tasks/list cursor.
const (
	maxCursorLen     = 4096
	maxCursorDomains = 32
)

// listCursor is the position of a tasks/list walk in each gateway that
// may still hold tasks: domain → the cursor of the last task taken from
// it ("" for none yet). A domain absent from it is exhausted.
type listCursor map[string]string

func decodeListCursor(s string) (listCursor, bool) {
	if len(s) > maxCursorLen {
		return nil, false
	}
	b, err := b64.DecodeString(s)
	if err != nil {
		return nil, false
	}
	var c listCursor
	if json.Unmarshal(b, &c) != nil || len(c) == 0 || len(c) > maxCursorDomains {
		return nil, false
	}
	for d, after := range c {
		if _, err := jid.Parse(d); err != nil || len(after) > 256 {
			return nil, false
		}
	}
	return c, true
}

// gatewayDomains are the domains of the endpoints the front lists: the
// gateways it may ask for the account's tasks.
func (f *Front) gatewayDomains() []string {
	seen := map[string]bool{}
	for bare := range f.cat.Snapshot() {
		if j, err := jid.Parse(bare); err == nil {
			seen[j.Domainpart()] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	if len(out) > maxCursorDomains {
		out = out[:maxCursorDomains]
	}
	return out
}

// tasksList (2025-11-25) pages the account's own tasks, newest first,
// from the gateways themselves (the task-list extension): a restarted
// front lists the tasks an earlier process created, and a gateway lists
// only the tasks of the account that asks. Pages of several gateways are
// merged by creation time; the cursor holds each gateway's position. A
// gateway without the extension contributes nothing.
func (f *Front) tasksList(ctx context.Context, ss *mcp.ServerSession, p *taskParams) (*jsonResult, error) {
	if p != nil && p.bad != "" {
		return nil, invalid(p.bad)
	}
	cur := listCursor{}
	if p != nil && p.Cursor != nil {
		c, ok := decodeListCursor(*p.Cursor)
		if !ok {
			return nil, invalid("invalid cursor")
		}
		cur = c
	} else {
		for _, d := range f.gatewayDomains() {
			cur[d] = ""
		}
	}
	tl, ok := f.c.(taskLister)
	if !ok {
		return &jsonResult{fields: map[string]any{"tasks": []any{}}}, nil
	}
	type source struct {
		domain string
		tasks  []agentclient.ListedTask
		more   bool
		taken  int
	}
	var srcs []*source
	domains := make([]string, 0, len(cur))
	for d := range cur {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	for _, d := range domains {
		gw, err := jid.Parse(d)
		if err != nil {
			continue
		}
		page, err := tl.ListTasks(ctx, gw, agentclient.TaskListQuery{After: cur[d], Max: maxListPage})
		switch {
		case err == nil:
			srcs = append(srcs, &source{domain: d, tasks: page.Tasks, more: page.More})
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case agentclient.Condition(err) != "":
			// No extension there (or not for this account): nothing
			// to list from that gateway.
			f.log.Debug("a gateway did not list tasks", "gateway", d, "condition", agentclient.Condition(err))
		default:
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a gateway did not answer the task list query; try again"}
		}
	}
	// Merge newest first.
	out := []map[string]any{}
	for len(out) < maxListPage {
		var best *source
		var bestAt time.Time
		for _, s := range srcs {
			if s.taken == len(s.tasks) {
				continue
			}
			t := s.tasks[s.taken]
			at := parseStamp(t.Created)
			if best == nil || at.After(bestAt) || (at.Equal(bestAt) && t.TaskID > best.tasks[best.taken].TaskID) {
				best, bestAt = s, at
			}
		}
		if best == nil {
			break
		}
		t := best.tasks[best.taken]
		best.taken++
		st := &agentclient.TaskState{TaskID: t.TaskID, Endpoint: t.Endpoint.String(), APIVersion: t.APIVersion, State: t.State,
			Revision: t.Revision, Created: t.Created, Updated: t.Updated, RetainUntil: t.RetainUntil, ResultAvailable: t.ResultAvailable}
		out = append(out, task2025(encodeTaskID(t.Endpoint, t.TaskID, t.Tool), st, "", false, t.CancelRevision > 0))
	}
	next := listCursor{}
	for _, s := range srcs {
		switch {
		case s.taken < len(s.tasks) || s.more:
			if s.taken > 0 {
				next[s.domain] = s.tasks[s.taken-1].Cursor
			} else {
				next[s.domain] = cur[s.domain]
			}
		}
	}
	fields := map[string]any{"tasks": out}
	if len(next) > 0 {
		b, _ := json.Marshal(next)
		fields["nextCursor"] = b64.EncodeToString(b)
	}
	return &jsonResult{fields: fields}, nil
}

func parseStamp(s string) time.Time {
	if t, err := xmpptime.Parse(s); err == nil {
		return t.Time()
	}
	return time.Time{}
}

// watch forwards a 2025-11-25 task's progress to the host that created it
// (when it sent a progress token) and its status changes as
// notifications/tasks/status (stdio), for as long as that session lives. It never acts on the task: the host's going
// away leaves the task running.
func (f *Front) watch(ss *mcp.ServerSession, ep jid.JID, st agentclient.TaskState, id string, token any, tm taskMeta) {
	taskID, cur := st.TaskID, st
	if ss == nil || (token == nil && f.notifier() == nil) {
		return // nothing to forward: hosts poll
	}
	if f.watchers.Add(1) > maxWatchers {
		f.watchers.Add(-1)
		f.log.Debug("too many watched tasks; this one is only polled", "task", taskID)
		return
	}
	defer f.watchers.Add(-1)
	ctx := f.sessionContext(ss)
	events, stop := f.c.Subscribe(ep, taskID)
	defer stop()
	var last float64
	sent := false
	progress := func(percent *float64, msg string) {
		if token == nil {
			return
		}
		var v, total float64
		switch {
		case percent != nil && (*percent > last || (!sent && *percent >= 0)):
			v, total = *percent, 100
		case sent:
			v = last + 0.001
		}
		last, sent = v, true
		nctx, ncancel := context.WithTimeout(ctx, 5*time.Second)
		defer ncancel()
		_ = ss.NotifyProgress(nctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: v, Total: total, Message: msg,
			Meta: mcp.Meta{MetaTask: tm, metaRelatedTask: map[string]string{"taskId": id}}})
	}
	poll := time.NewTicker(30 * time.Second)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			if st, err := f.c.State(ctx, ep, taskID); err == nil && st.Terminal() {
				f.notifyStatus(id, st)
				return
			}
		case ev := <-events:
			switch ev.Type {
			case agentproto.EventProgress:
				var p agentclient.Progress
				if json.Unmarshal(ev.Payload, &p) == nil {
					msg := safeText(p.Stage, 200)
					if p.Message != "" {
						if msg != "" {
							msg += ": "
						}
						msg += safeText(p.Message, maxMessageText)
					}
					progress(p.Percent, msg)
				}
				continue
			case agentproto.EventStatus, agentproto.EventInputRequired:
				progress(nil, "state: "+string(stateOfEvent(ev)))
			}
			// The event says the new state; no query is needed for the
			// notification (hosts read the rest with tasks/get).
			if ev.Revision < cur.Revision {
				continue
			}
			cur.Revision, cur.Updated = ev.Revision, xmpptime.Format(time.Now())
			if ev.Terminal() {
				cur.State = agentproto.State(ev.Type)
			} else {
				cur.State = stateOfEvent(ev)
			}
			f.notifyStatus(id, &cur)
			if cur.State.Terminal() || cur.State == agentproto.StateCancelling {
				return // cancelling is 2025-11-25's terminal cancelled
			}
		}
	}
}

// sessionContext is done when the session ends; one goroutine per
// session waits for that.
func (f *Front) sessionContext(ss *mcp.ServerSession) context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sessions == nil {
		f.sessions = map[*mcp.ServerSession]context.Context{}
	}
	if ctx, ok := f.sessions[ss]; ok {
		return ctx
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.sessions[ss] = ctx
	go func() {
		_ = ss.Wait()
		cancel()
		f.mu.Lock()
		delete(f.sessions, ss)
		f.mu.Unlock()
	}()
	return ctx
}

func stateOfEvent(ev agentclient.Event) agentproto.State {
	if ev.Type == agentproto.EventInputRequired {
		return agentproto.StateInputRequired
	}
	var s agentproto.StatusPayload
	_ = json.Unmarshal(ev.Payload, &s)
	return s.State
}

// notifyStatus sends notifications/tasks/status (2025-11-25) where the
// front can write to the session outside a request (stdio); elsewhere
// hosts poll, as they must be able to.
func (f *Front) notifyStatus(id string, st *agentclient.TaskState) {
	n := f.notifier()
	if n == nil {
		return
	}
	raw, err := json.Marshal(task2025(id, st, "", false, false))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.Write(ctx, &jsonrpc.Request{Method: "notifications/tasks/status", Params: raw}); err != nil {
		f.log.Debug("task status notification not sent", "error", err)
	}
}
