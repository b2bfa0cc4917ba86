package mcpbridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/tasks"
)

// MCP Tasks, 2025-11-25 form (docs/mcp-bridge.md, "Tasks"). A tool whose
// server declares tasks.requests.tools.call and whose execution.taskSupport
// is "optional" or "required" is called task-augmented: the server answers
// at once with a task, the bridge commits the task's handle with the XMPP
// task (tasks.Checkpointer) before it relies on it, then waits for the
// result with tasks/result while it polls tasks/get for status; questions
// arrive with related-task metadata and are attributed by it. After a
// gateway restart the engine hands the handle back (Resume): a task on an
// HTTP server is re-attached through the session it lives in, one on a
// stdio server (which stopped with the gateway) settles interrupted.

const (
	metaRelatedTask = "io.modelcontextprotocol/related-task"
	// taskTTL is the lifetime asked for a task without a deadline.
	taskTTL = time.Hour
	// Poll bounds: the server's pollInterval, kept within these.
	minPoll = 250 * time.Millisecond
	maxPoll = 10 * time.Second
	// maxTaskID bounds a remote task id the bridge keeps.
	maxTaskID = 256
	// ttlGrace is how long past the task's ttl the bridge still waits.
	ttlGrace = 5 * time.Second
	// Status notifications handled per task: a burst, then per second;
	// the rest are dropped (and counted, logged once per task).
	statusBurst     = 20
	statusPerSecond = 5
	// A poll that fails this many times in a row (the server is gone)
	// ends the wait.
	maxPollFailures = 5
)

// remoteState is the handle committed with the XMPP task.
type remoteState struct {
	V         int    `json:"v"`
	Transport string `json:"transport"` // "http" or "stdio"
	URL       string `json:"url,omitempty"`
	Session   string `json:"session,omitempty"`
	Protocol  string `json:"protocol,omitempty"`
	TaskID    string `json:"taskId"`
	Token     string `json:"token"`
	Created   int64  `json:"created"` // unix ms, at the gateway
	TTL       int64  `json:"ttl,omitempty"`
	Poll      int64  `json:"poll,omitempty"`
	Cancel    bool   `json:"cancel,omitempty"` // tasks.cancel declared
	// Form is "ext" for the 2026-07-28 extension form (taskext.go), ""
	// for 2025-11-25.
	Form string `json:"form,omitempty"`
}

// remoteTask is the wire form of an MCP Task.
type remoteTask struct {
	TaskID        string   `json:"taskId"`
	Status        string   `json:"status"`
	StatusMessage string   `json:"statusMessage"`
	TTL           *float64 `json:"ttl"`
	PollInterval  *float64 `json:"pollInterval"`
	// The 2026-07-28 extension form (DetailedTask).
	TTLMs          *float64                   `json:"ttlMs"`
	PollIntervalMs *float64                   `json:"pollIntervalMs"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
	Result         json.RawMessage            `json:"result"`
	Error          *jsonrpc.Error             `json:"error"`
}

// ttl and poll are the task's ttl and poll interval in either form.
func (t *remoteTask) ttl() *float64 {
	if t.TTLMs != nil {
		return t.TTLMs
	}
	return t.TTL
}

func (t *remoteTask) poll() *float64 {
	if t.PollIntervalMs != nil {
		return t.PollIntervalMs
	}
	return t.PollInterval
}

func terminalStatus(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

// taskCall is one task-augmented call in flight.
type taskCall struct {
	sess  *session // nil for a resumed call (its own HTTP wire)
	st    *callState
	state remoteState
	wire  taskWire
	wake  chan struct{} // a status notification arrived
	// ready is closed once the handle is committed: nothing the server
	// says about the task reaches the XMPP task before that.
	ready chan struct{}

	mu         sync.Mutex
	lastMsg    string
	tokens     float64
	last       time.Time
	dropped    int
	dropLogged bool
}

func validTaskID(id string) bool {
	if id == "" || len(id) > maxTaskID {
		return false
	}
	for _, r := range id {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' {
			return false
		}
	}
	return true
}

func urlKey(u string) string {
	h := sha256.Sum256([]byte(u))
	return hex.EncodeToString(h[:8])
}

// taskAugmented reports whether a call of tool on s is made as a task:
// in the 2025-11-25 form by the tool's taskSupport, in the 2026-07-28
// extension form for every tool of a server that advertises the
// extension (the server decides per call; taskext.go).
func (s *session) taskAugmented(tool string, httpURL string) bool {
	if s.multiRoundTrip() {
		if !serverTasksExt(s.state) {
			return false
		}
		if s.proc != nil {
			return s.nd != nil
		}
		return httpURL != ""
	}
	if s.proc == nil && s.cs.ID() == "" {
		return false // injected transports: plain calls
	}
	if s.proc != nil && s.nd == nil {
		return false
	}
	if !serverTasks(s.state) {
		return false
	}
	s.mu.Lock()
	ts := s.taskSupport[tool]
	s.mu.Unlock()
	return ts == "optional" || ts == "required"
}

func (s *session) cancelDeclared() bool {
	var caps struct {
		Cancel json.RawMessage `json:"cancel"`
	}
	return json.Unmarshal(s.state.capabilities["tasks"], &caps) == nil && caps.Cancel != nil
}

// wireOf returns the task wire of a live session.
func (b *Backend) wireOf(s *session) (taskWire, remoteState, error) {
	if s.proc != nil {
		rs := remoteState{V: 1, Transport: "stdio"}
		if s.multiRoundTrip() {
			rs.Form, rs.Protocol = "ext", s.state.protocolVersion
			return extWire{s.nd.wire, rs.Protocol}, rs, nil
		}
		return s.nd.wire, rs, nil
	}
	client, err := b.rawHTTPClient()
	if err != nil {
		return nil, remoteState{}, err
	}
	st := remoteState{V: 1, Transport: "http", URL: urlKey(b.o.URL), Session: s.cs.ID(), Protocol: s.state.protocolVersion}
	if s.multiRoundTrip() {
		st.Form = "ext"
	}
	return &httpWire{b: b, client: client, url: b.o.URL, session: st.Session, protocol: st.Protocol, ext: st.Form == "ext"}, st, nil
}

// register makes tc findable by its remote task id and progress token.
// A server that hands out an id already in use is refused.
func (b *Backend) register(tc *taskCall) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.remote == nil {
		b.remote, b.remoteTokens = map[string]*taskCall{}, map[string]*taskCall{}
	}
	if _, dup := b.remote[tc.state.TaskID]; dup {
		return false
	}
	b.remote[tc.state.TaskID] = tc
	b.remoteTokens[tc.state.Token] = tc
	return true
}

// recentTasks is how many ended remote task ids the bridge remembers: a
// status notification for one that just ended is late, not foreign.
const recentTasks = 256

func (b *Backend) unregister(tc *taskCall) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.remote[tc.state.TaskID] == tc {
		delete(b.remote, tc.state.TaskID)
		if b.recent == nil {
			b.recent = map[string]bool{}
		}
		if len(b.recentOrder) >= recentTasks {
			delete(b.recent, b.recentOrder[0])
			b.recentOrder = b.recentOrder[1:]
		}
		b.recent[tc.state.TaskID] = true
		b.recentOrder = append(b.recentOrder, tc.state.TaskID)
	}
	if b.remoteTokens[tc.state.Token] == tc {
		delete(b.remoteTokens, tc.state.Token)
	}
}

func (tc *taskCall) committed() bool {
	select {
	case <-tc.ready:
		return true
	default:
		return false
	}
}

// taskCallsOn reports whether task-augmented calls are in flight on s.
func (b *Backend) taskCallsOn(s *session) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, tc := range b.remote {
		if tc.sess == s {
			return true
		}
	}
	return false
}

func (b *Backend) remoteCall(taskID string) *taskCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.remote[taskID]
}

func (b *Backend) remoteByToken(token string) *taskCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.remoteTokens[token]
}

// unknownTask logs, once per backend, that the server named a task the
// bridge never created; the message is dropped (or the request refused).
func (b *Backend) unknownTask(what string) {
	if b.unknownLogged.CompareAndSwap(false, true) {
		b.log.Warn("MCP server named a task the gateway did not create; dropped (logged once)", slog.String("in", what))
	}
	b.unknownDropped.Add(1)
}

// relatedTask reads the related-task id of a message's _meta.
func relatedTask(meta map[string]any) (string, bool) {
	v, ok := meta[metaRelatedTask].(map[string]any)
	if !ok {
		return "", false
	}
	id, _ := v["taskId"].(string)
	return id, true
}

// executeTask runs one task-augmented call on s (shared: attribution is by
// related-task, not by session). It returns false, having done nothing
// the server acted on, when the call is to be made as a plain one.
func (b *Backend) executeTask(ctx context.Context, s *session, call tasks.Call, st *callState) bool {
	run := st.run
	w, rs, err := b.wireOf(s)
	if err != nil {
		b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server is not available.", Retryable: true}))
		return true
	}
	rs.Token, rs.Cancel = st.token, s.cancelDeclared()
	var args any = json.RawMessage(call.Arguments)
	if len(call.Arguments) == 0 {
		args = map[string]any{}
	}
	ttl := taskTTL
	if !call.Deadline.IsZero() {
		ttl = max(time.Until(call.Deadline)+time.Minute, time.Minute)
	}
	params := map[string]any{
		"name": call.Tool, "arguments": args,
		"task":  map[string]any{"ttl": ttl.Milliseconds()},
		"_meta": map[string]any{"progressToken": st.token, ns.MetaDelegationDepth: call.DelegationDepth + 1},
	}
	if rs.Form == "ext" {
		// The extension form: no task parameter (the server decides),
		// the extension declared in the request's capabilities
		// (extWire adds them), no progress for tasks.
		params = map[string]any{"name": call.Tool, "arguments": args,
			"_meta": map[string]any{"progressToken": st.token, ns.MetaDelegationDepth: call.DelegationDepth + 1}}
		b.trackExtCall(st)
		defer b.untrackExtCall(st)
	}
	b.creating.Add(1)
	raw, err := w.request(st.ctx, "tools/call", params)
	b.creating.Add(-1)
	if err != nil {
		b.settleTaskError(ctx, st, s, err, "before the MCP server created its task")
		return true
	}
	var created struct {
		Task       *remoteTask `json:"task"`
		ResultType string      `json:"resultType"`
	}
	ok := json.Unmarshal(raw, &created) == nil
	if rs.Form == "ext" {
		switch created.ResultType {
		case "task":
			created.Task = &remoteTask{}
			ok = json.Unmarshal(raw, created.Task) == nil
		case "input_required":
			// A multi round-trip answer: the server wants input before
			// it decides; nothing ran yet. The SDK's plain call does
			// multi round-trip.
			return false
		default:
			created.Task = nil
		}
	}
	if !ok || created.Task == nil {
		// The server ran the call as a plain one after all.
		tr, rerr := b.toolResult(raw, &mcp.CallToolResult{})
		if rerr != nil {
			b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "The MCP server returned a result the gateway cannot represent."}))
			return true
		}
		b.settle(run.Complete(tr))
		return true
	}
	if !validTaskID(created.Task.TaskID) {
		b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "The MCP server created a task without a usable task id."}))
		return true
	}
	rs.TaskID, rs.Created = created.Task.TaskID, time.Now().UnixMilli()
	if v := created.Task.ttl(); v != nil && *v > 0 {
		rs.TTL = int64(*v)
	}
	if v := created.Task.poll(); v != nil && *v > 0 {
		rs.Poll = int64(*v)
	}
	tc := &taskCall{sess: s, st: st, state: rs, wire: w, wake: make(chan struct{}, 1), ready: make(chan struct{}), tokens: statusBurst, last: time.Now()}
	if !b.register(tc) {
		b.log.Warn("MCP server created a task with an id already in use; the call is refused")
		b.cancelRemote(tc)
		b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "The MCP server created a task whose id another call holds."}))
		return true
	}
	defer b.unregister(tc)
	data, _ := json.Marshal(rs)
	if cp, ok := run.(tasks.Checkpointer); ok {
		// Committed before it is relied on: a crash from here on finds
		// the handle with the XMPP task.
		if err := cp.Checkpoint(data, rs.Transport == "http"); err != nil {
			b.cancelRemote(tc)
			if !errors.Is(err, tasks.ErrSettled) && !errors.Is(err, tasks.ErrClosed) {
				b.log.Error("committing the MCP task handle failed; the remote task was cancelled", slog.String("error", err.Error()))
				b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInternalError, Message: "The gateway could not record the MCP server's task.", Retryable: true}))
			}
			return true
		}
	}
	close(tc.ready)
	b.relayStatus(tc, created.Task)
	b.waitTask(ctx, tc, false)
	return true
}

// Resume implements tasks.Resumer: a task-augmented call whose gateway
// restarted (or whose cluster member died) is re-attached when its server
// can still be reached, or settled interrupted, saying why.
func (b *Backend) Resume(ctx context.Context, call tasks.Call, state []byte, run tasks.Run) {
	var rs remoteState
	interrupted := func(msg string) {
		b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInterrupted, Message: msg, Retryable: true}))
	}
	if json.Unmarshal(state, &rs) != nil || rs.V != 1 || !validTaskID(rs.TaskID) {
		interrupted("The gateway restarted while the task was running, and its record of the MCP server's task is unreadable.")
		return
	}
	switch {
	case rs.Transport == "stdio":
		b.log.Info("MCP task not resumed: its stdio server stopped with the gateway", slog.String("task", call.TaskID))
		interrupted("The gateway restarted while the task was running; its MCP server runs over stdio and stopped with the gateway, taking its task along.")
		return
	case rs.Transport != "http" || b.o.URL == "" || rs.URL != urlKey(b.o.URL):
		interrupted("The gateway restarted while the task was running, and the MCP server it ran on is no longer configured.")
		return
	}
	client, err := b.rawHTTPClient()
	if err != nil {
		interrupted("The gateway restarted while the task was running, and cannot reach the MCP server again.")
		return
	}
	w := &httpWire{b: b, client: client, url: b.o.URL, session: rs.Session, protocol: rs.Protocol, ext: rs.Form == "ext"}
	st := &callState{token: rs.Token, run: run, progressed: make(chan struct{}, 1)}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !call.Deadline.IsZero() {
		var c2 context.CancelFunc
		cctx, c2 = context.WithDeadline(cctx, call.Deadline)
		defer c2()
	}
	st.ctx, st.cancel = context.WithValue(cctx, callKey{}, st), cancel
	tc := &taskCall{st: st, state: rs, wire: w, wake: make(chan struct{}, 1), ready: make(chan struct{}), tokens: statusBurst, last: time.Now()}
	close(tc.ready) // resumed: committed before the restart
	// The server must still know the task.
	var t *remoteTask
	for attempt := 0; ; attempt++ {
		gctx, gcancel := context.WithTimeout(st.ctx, 10*time.Second)
		t, err = b.getTask(gctx, tc)
		gcancel()
		if err == nil || ctx.Err() != nil || attempt >= 2 {
			break
		}
		var rerr *jsonrpc.Error
		if errors.As(err, &rerr) || errors.Is(err, errSessionGone) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	switch {
	case ctx.Err() != nil:
		return // shutting down again: the task stays for the next start
	case err != nil:
		b.log.Warn("MCP task not resumed: the server does not know it any more", slog.String("task", call.TaskID), slog.String("error", safeText(b.red, err.Error(), 256)))
		b.cancelRemote(tc)
		interrupted("The gateway restarted while the task was running, and the MCP server no longer knows its task (its session or the task is gone).")
		return
	}
	if !b.register(tc) {
		interrupted("The gateway restarted while the task was running, and its MCP task is already attached.")
		return
	}
	defer b.unregister(tc)
	b.log.Info("MCP task re-attached after a restart", slog.String("task", call.TaskID), slog.String("status", t.Status))
	b.relayStatus(tc, t)
	b.waitTask(ctx, tc, true)
}

// Forget implements tasks.Resumer: the engine settled the task instead of
// resuming it; cancel the remote task where possible.
func (b *Backend) Forget(call tasks.Call, state []byte) {
	var rs remoteState
	if json.Unmarshal(state, &rs) != nil || rs.Transport != "http" || rs.URL != urlKey(b.o.URL) || !validTaskID(rs.TaskID) {
		return
	}
	go func() {
		client, err := b.rawHTTPClient()
		if err != nil {
			return
		}
		tc := &taskCall{state: rs, wire: &httpWire{b: b, client: client, url: b.o.URL, session: rs.Session, protocol: rs.Protocol, ext: rs.Form == "ext"}}
		b.cancelRemote(tc)
	}()
}

func (b *Backend) getTask(ctx context.Context, tc *taskCall) (*remoteTask, error) {
	raw, err := tc.wire.request(ctx, "tasks/get", map[string]any{"taskId": tc.state.TaskID})
	if err != nil {
		return nil, err
	}
	var t remoteTask
	if json.Unmarshal(raw, &t) != nil || t.TaskID != tc.state.TaskID || t.Status == "" {
		return nil, errors.New("tasks/get answered with something other than the task")
	}
	return &t, nil
}

// cancelRemote sends tasks/cancel, best effort and bounded.
func (b *Backend) cancelRemote(tc *taskCall) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := tc.wire.request(ctx, "tasks/cancel", map[string]any{"taskId": tc.state.TaskID})
	return err == nil
}

// relayStatus turns a task's status message into task progress, once per
// distinct message.
func (b *Backend) relayStatus(tc *taskCall, t *remoteTask) {
	if t == nil || tc.st == nil || !tc.committed() {
		return
	}
	msg := safeText(b.red, t.StatusMessage, maxMessage)
	tc.mu.Lock()
	same := msg == "" || msg == tc.lastMsg
	if !same {
		tc.lastMsg = msg
	}
	tc.mu.Unlock()
	if same || terminalStatus(t.Status) || t.Status == "input_required" {
		// The question itself carries input_required.
		return
	}
	st := tc.st
	st.imu.Lock()
	defer st.imu.Unlock()
	if st.asking {
		return
	}
	if err := st.run.Progress(tasks.Progress{Message: msg}); errors.Is(err, tasks.ErrSettled) {
		st.settled.Store(true)
		st.cancel()
	}
}

// taskProgress relays a task call's progress notification, unless a
// question is pending (see callState.imu).
func (b *Backend) taskProgress(tc *taskCall, p *mcp.ProgressNotificationParams) {
	if !tc.committed() {
		return
	}
	st := tc.st
	st.imu.Lock()
	defer st.imu.Unlock()
	if st.asking {
		return
	}
	b.progress(st, p)
}

// onTaskStatus handles notifications/tasks/status, bounded per task.
func (b *Backend) onTaskStatus(params json.RawMessage) {
	var t remoteTask
	if json.Unmarshal(params, &t) != nil || t.TaskID == "" {
		return
	}
	tc := b.remoteCall(t.TaskID)
	if tc == nil {
		b.mu.Lock()
		late := b.recent[t.TaskID]
		b.mu.Unlock()
		// A server may report a task before its CreateTaskResult
		// arrives: while a creation is in flight an unknown id is
		// dropped without blame.
		if !late && b.creating.Load() == 0 {
			b.unknownTask("notifications/tasks/status")
		}
		return
	}
	now := time.Now()
	tc.mu.Lock()
	tc.tokens = min(statusBurst, tc.tokens+now.Sub(tc.last).Seconds()*statusPerSecond)
	tc.last = now
	ok := tc.tokens >= 1 || terminalStatus(t.Status)
	if ok {
		tc.tokens = max(0, tc.tokens-1)
	} else {
		tc.dropped++
	}
	logDrop := !ok && !tc.dropLogged
	if logDrop {
		tc.dropLogged = true
	}
	tc.mu.Unlock()
	if logDrop {
		b.log.Warn("MCP server floods task status notifications; the excess is dropped (logged once per task)")
	}
	if !ok {
		return
	}
	b.relayStatus(tc, &t)
	if terminalStatus(t.Status) || t.Status == "input_required" {
		select {
		case tc.wake <- struct{}{}:
		default:
		}
	}
}

// wireNotification handles a notification read by an httpWire.
func (b *Backend) wireNotification(method string, params json.RawMessage) {
	switch method {
	case "notifications/tasks/status":
		b.onTaskStatus(params)
	case "notifications/progress":
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		token, _ := p.ProgressToken.(string)
		if tc := b.remoteByToken(token); tc != nil {
			b.taskProgress(tc, &p)
		} else if st := b.extCall(token); st != nil {
			st.imu.Lock()
			if !st.asking {
				b.progress(st, &p)
			}
			st.imu.Unlock()
		}
	}
}

// serverRequest answers a request the server sent on an httpWire answer
// stream: the task's questions (elicitation/create with related-task).
func (b *Backend) serverRequest(ctx context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
	switch method {
	case "ping":
		return map[string]any{}, nil
	case "elicitation/create":
		var p mcp.ElicitParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "malformed elicitation"}
		}
		res, err := b.elicit(ctx, nil, nil, &p)
		if err != nil {
			var rerr *jsonrpc.Error
			if errors.As(err, &rerr) {
				return nil, rerr
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "elicitation failed"}
		}
		return res, nil
	case "sampling/createMessage":
		b.recordLoss(nil, agentproto.CodeUnsupportedSampling)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "agentgw does not support sampling: the gateway has no model to sample from"}
	case "roots/list":
		b.recordLoss(nil, agentproto.CodeUnsupportedRoots)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "agentgw does not support roots: the gateway exposes no filesystem roots"}
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not supported"}
}

// stopPastTTL ends the wait for a remote task past its ttl (plus
// ttlGrace; never for a task without one): the remote task is cancelled and the XMPP task
// fails, since waiting longer would wait on something the server may
// already have discarded. It reports whether it did.
func (b *Backend) stopPastTTL(tc *taskCall) bool {
	if tc.state.TTL <= 0 {
		return false
	}
	expires := time.UnixMilli(tc.state.Created).Add(time.Duration(tc.state.TTL)*time.Millisecond + ttlGrace)
	if !time.Now().After(expires) {
		return false
	}
	b.log.Warn("MCP task outlived its ttl; the gateway stopped waiting", slog.String("task_ttl_ms", strconv.FormatInt(tc.state.TTL, 10)))
	b.cancelRemote(tc)
	b.settle(tc.st.run.Fail(tasks.Failure{Code: agentproto.CodeInternalError, Message: "The MCP server's task passed its time-to-live without a result; the gateway stopped waiting for it."}))
	tc.st.cancel()
	return true
}

// waitTask waits for the remote task's result: tasks/result (which also
// carries the task's questions) while tasks/get polls status, until the
// task ends, the caller cancels, the deadline or the task's ttl passes, or
// ctx ends (shutdown: the task stays for Resume when it is resumable).
func (b *Backend) waitTask(ctx context.Context, tc *taskCall, resumed bool) {
	if tc.state.Form == "ext" {
		b.waitTaskExt(ctx, tc)
		return
	}
	st, run := tc.st, tc.st.run
	go func() {
		select {
		case <-run.CancelRequested():
			st.cancelRequested.Store(true)
			st.cancel()
		case <-st.ctx.Done():
		}
	}()
	type outcome struct {
		raw json.RawMessage
		err error
	}
	results := make(chan outcome, 1)
	fetch := func() {
		raw, err := tc.wire.request(st.ctx, "tasks/result", map[string]any{"taskId": tc.state.TaskID})
		results <- outcome{raw, err}
	}
	go fetch()
	poll := time.Duration(tc.state.Poll) * time.Millisecond
	poll = min(max(poll, minPoll), maxPoll)
	if poll == minPoll && tc.state.Poll == 0 {
		poll = time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	failures := 0
	for {
		select {
		case o := <-results:
			if o.err == nil {
				b.finishTask(tc, o.raw)
				return
			}
			var rerr *jsonrpc.Error
			if errors.As(o.err, &rerr) {
				b.settle(run.Fail(b.rpcFailure(st, rerr)))
				return
			}
			if st.ctx.Err() != nil {
				b.endTask(ctx, tc)
				return
			}
			if errors.Is(o.err, errWireClosed) {
				b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server stopped before its task ended.", Retryable: true}))
				st.cancel()
				return
			}
			// The answer stream broke (the server restarted its stream,
			// a proxy cut it): ask again after a poll.
			go func() {
				select {
				case <-time.After(poll):
					fetch()
				case <-st.ctx.Done():
					results <- outcome{nil, st.ctx.Err()}
				}
			}()
		case <-st.ctx.Done():
			b.endTask(ctx, tc)
			return
		case <-tc.wake:
		case <-tick.C:
		}
		if b.stopPastTTL(tc) {
			return
		}
		gctx, gcancel := context.WithTimeout(st.ctx, 10*time.Second)
		t, err := b.getTask(gctx, tc)
		gcancel()
		switch {
		case err == nil:
			failures = 0
			b.relayStatus(tc, t)
			if t.Status == "cancelled" && !st.cancelRequested.Load() {
				b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInternalError, Message: "The MCP server cancelled its task."}))
				st.cancel()
				return
			}
		case st.ctx.Err() != nil:
		default:
			var rerr *jsonrpc.Error
			if errors.As(err, &rerr) || errors.Is(err, errSessionGone) {
				b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server no longer knows its task.", Retryable: true}))
				st.cancel()
				return
			}
			if errors.Is(err, errWireClosed) {
				// A stdio server that exited took its task along.
				b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server stopped before its task ended.", Retryable: true}))
				st.cancel()
				return
			}
			if failures++; failures >= maxPollFailures {
				b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server stopped answering about its task.", Retryable: true}))
				st.cancel()
				return
			}
		}
	}
}

// endTask settles a wait that ended by cancellation, deadline, settlement
// or shutdown.
func (b *Backend) endTask(ctx context.Context, tc *taskCall) {
	st, run := tc.st, tc.st.run
	switch {
	case st.settled.Load():
		b.cancelRemote(tc)
		if st.inputExpired.Load() {
			b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInputExpired, Message: "The input request expired."}))
		}
	case st.cancelRequested.Load():
		if b.cancelRemote(tc) {
			b.settle(run.Cancelled("Cancelled at the caller's request; the MCP server's task was cancelled (tasks/cancel)."))
		} else {
			b.settle(run.Cancelled("Cancelled at the caller's request; the MCP server could not be told (tasks/cancel failed)."))
		}
	case ctx.Err() != nil:
		// Shutdown: an HTTP task stays for Resume at the next start (its
		// session is kept: keepSession); the engine settles a stdio one
		// interrupted.
		if tc.state.Transport == "http" {
			b.leftBehind.Add(1)
		}
	case errors.Is(st.ctx.Err(), context.DeadlineExceeded):
		b.cancelRemote(tc)
		b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeDeadlineExpired, Message: "The task deadline passed before the MCP server's task ended; it was cancelled."}))
	}
}

// finishTask maps tasks/result's answer to the task's settlement.
func (b *Backend) finishTask(tc *taskCall, raw json.RawMessage) {
	run := tc.st.run
	// The result carries the related-task key the server must add; it
	// names the remote task, which is not part of the tool's result.
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		if meta, ok := m["_meta"]; ok {
			var mm map[string]json.RawMessage
			if json.Unmarshal(meta, &mm) == nil {
				delete(mm, metaRelatedTask)
				if len(mm) == 0 {
					delete(m, "_meta")
				} else {
					m["_meta"], _ = json.Marshal(mm)
				}
				raw, _ = json.Marshal(m)
			}
		}
	}
	tr, err := b.toolResult(raw, &mcp.CallToolResult{})
	if err != nil {
		b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "The MCP server returned a result the gateway cannot represent."}))
		return
	}
	b.settle(run.Complete(tr))
}

// rpcFailure maps a JSON-RPC error of a task request.
func (b *Backend) rpcFailure(st *callState, werr *jsonrpc.Error) tasks.Failure {
	if code := st.unsupported.Load(); code != nil {
		return tasks.Failure{Code: *code, Message: unsupportedMessage(*code)}
	}
	if tooLarge(werr) {
		return tasks.Failure{Code: agentproto.CodeResultTooLarge, Message: "The MCP server's answer about its task was larger than the gateway's stdio frame limit (16 MiB); it was discarded."}
	}
	return tasks.Failure{
		Code:      agentproto.MCPCode(werr.Code),
		Message:   "The MCP server answered with JSON-RPC error " + strconv.FormatInt(werr.Code, 10) + rpcPhrase(werr.Code) + ".",
		Retryable: werr.Code == jsonrpc.CodeInternalError,
	}
}

// settleTaskError settles a failed task request made before the task
// existed.
func (b *Backend) settleTaskError(ctx context.Context, st *callState, s *session, err error, when string) {
	run := st.run
	var rerr *jsonrpc.Error
	switch {
	case errors.As(err, &rerr):
		b.settle(run.Fail(b.rpcFailure(st, rerr)))
	case st.cancelRequested.Load():
		b.settle(run.Cancelled("Cancelled at the caller's request " + when + "."))
	case ctx.Err() != nil:
	case errors.Is(st.ctx.Err(), context.DeadlineExceeded):
		b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeDeadlineExpired, Message: "The task deadline passed " + when + "."}))
	default:
		b.log.Warn("MCP task-augmented tools/call failed", slog.String("error", safeText(b.red, err.Error(), 512)))
		b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server could not be reached " + when + ".", Retryable: true}))
	}
}

var _ tasks.Resumer = (*Backend)(nil)

// keepSession reports whether the HTTP session must outlive this process:
// a task-augmented call runs in it, or one was left for Resume.
func (b *Backend) keepSession() bool {
	b.mu.Lock()
	n := len(b.remote)
	b.mu.Unlock()
	return n > 0 || b.leftBehind.Load() > 0
}

// unknownCount reports the messages dropped for naming unknown tasks
// (tests).
func (b *Backend) unknownCount() int64 { return b.unknownDropped.Load() }
