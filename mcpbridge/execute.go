package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
)

// Bounds of strings the bridge copies from the server into task events.
const (
	maxQuestion = 4096
	maxMessage  = 4096
)

// callState is one tools/call in flight.
type callState struct {
	token  string
	run    tasks.Run
	ctx    context.Context // the call's context; carries the callState
	cancel context.CancelFunc

	cancelRequested atomic.Bool // the caller cancelled
	settled         atomic.Bool // the engine settled the task under us
	inputExpired    atomic.Bool
	gone            atomic.Bool            // the session ended
	unsupported     atomic.Pointer[string] // first declined feature's code

	// imu orders a task call's status relay with its questions: while an
	// input request is pending nothing else is committed, because a
	// revision moved under it would make the caller's answer conflict.
	imu    sync.Mutex
	asking bool

	pmu         sync.Mutex
	lastPercent float64
	handled     atomic.Int64  // progress notifications handled
	progressed  chan struct{} // signalled after each
}

// drainProgress waits (briefly) until every progress notification the
// server sent before its result has been handled, so progress events never
// follow the terminal one.
func (st *callState) drainProgress(slot *rawReply) {
	if st.handled.Load() >= slot.progress.Load() {
		return
	}
	deadline := time.NewTimer(2 * time.Second)
	defer deadline.Stop()
	for st.handled.Load() < slot.progress.Load() {
		select {
		case <-st.progressed:
		case <-deadline.C:
			return
		}
	}
}

type callKey struct{}

// callFromContext finds the call a server request belongs to. The SDK
// fulfils MCP 2026-07-28 input requests (multi round-trip) inside CallTool,
// with the call's context.
func callFromContext(ctx context.Context) *callState {
	st, _ := ctx.Value(callKey{}).(*callState)
	return st
}

// Execute implements tasks.Executor: one task is one tools/call, alone on
// its session (pool.go).
func (b *Backend) Execute(ctx context.Context, call tasks.Call, run tasks.Run) {
	if s := b.current(); s == nil || s.ended() {
		b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server is not available.", Retryable: true}))
		return
	}
	st := &callState{token: ids.New("agw-call-"), run: run, progressed: make(chan struct{}, 1)}
	cctx, cancel := context.WithCancel(ctx)
	if !call.Deadline.IsZero() {
		var c2 context.CancelFunc
		cctx, c2 = context.WithDeadline(cctx, call.Deadline)
		defer c2()
	}
	st.ctx = context.WithValue(cctx, callKey{}, st)
	st.cancel = cancel
	defer cancel()

	go func() {
		select {
		case <-run.CancelRequested():
			st.cancelRequested.Store(true)
			// The SDK sends notifications/cancelled for a call whose
			// context ends, and returns at once.
			cancel()
		case <-st.ctx.Done():
		}
	}()

	if s := b.current(); s != nil && s.taskAugmented(call.Tool, b.o.URL) {
		// A task of the server's own: attributed by its id, so the call
		// shares the supervised session (taskcall.go).
		if b.executeTask(ctx, s, call, st) {
			return
		}
	}

	s, shared, err := b.acquire(st.ctx)
	if err != nil {
		switch {
		case st.cancelRequested.Load():
			b.settle(run.Cancelled("Cancelled at the caller's request while the call waited for a free MCP server session."))
		case ctx.Err() != nil:
			// Gateway shutdown: the engine settles the task as interrupted.
		case errors.Is(st.ctx.Err(), context.DeadlineExceeded):
			b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeDeadlineExpired, Message: "The task deadline passed while the call waited for a free MCP server session."}))
		default:
			b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server is not available.", Retryable: true}))
		}
		return
	}
	if !shared {
		defer b.release(s) // after forget: an abandoned call retires the session
	}

	slot := s.tap.expect(st.token)
	answered := false // the SDK got the server's answer to the tools/call
	defer func() { s.tap.forget(st.token, answered) }()
	s.add(st)
	defer s.remove(st)
	if s.ended() { // raced with the session's end
		st.gone.Store(true)
		cancel()
	}

	var args any = json.RawMessage(call.Arguments)
	if len(call.Arguments) == 0 {
		args = map[string]any{}
	}
	res, err := s.cs.CallTool(st.ctx, &mcp.CallToolParams{
		// The depth calls made while serving this one will have; an
		// `agentgw mcp` server passes it on to the gateway it invokes.
		Meta:      mcp.Meta{"progressToken": st.token, ns.MetaDelegationDepth: call.DelegationDepth + 1},
		Name:      call.Tool,
		Arguments: args,
	})
	var rpcErr *jsonrpc.Error
	answered = err == nil || errors.As(err, &rpcErr)

	switch {
	case st.settled.Load():
		if st.inputExpired.Load() {
			b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInputExpired, Message: "The input request expired."}))
		}
	case err == nil:
		st.drainProgress(slot)
		tr, rerr := b.toolResult(slot.get(), res)
		if rerr != nil {
			b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "The MCP server returned a result the gateway cannot represent."}))
			return
		}
		b.settle(run.Complete(tr))
	case st.cancelRequested.Load() && st.ctx.Err() != nil:
		b.settle(run.Cancelled("Cancelled at the caller's request; the MCP server was sent notifications/cancelled."))
	case ctx.Err() != nil:
		// Gateway shutdown: the engine settles the task as interrupted.
	case errors.Is(st.ctx.Err(), context.DeadlineExceeded):
		b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeDeadlineExpired, Message: "The task deadline passed before the MCP server answered."}))
	default:
		b.settle(run.Fail(b.failure(s, st, err)))
	}
}

// settle logs a settlement the engine refused for a reason other than the
// task being settled already or the engine shutting down.
func (b *Backend) settle(err error) {
	if err != nil && !errors.Is(err, tasks.ErrSettled) && !errors.Is(err, tasks.ErrClosed) {
		b.log.Error("settling task failed", slog.String("error", err.Error()))
	}
}

// failure maps a failed tools/call to a task failure with a fixed, safe
// message: server error text can reflect caller input or secrets.
func (b *Backend) failure(s *session, st *callState, err error) tasks.Failure {
	if f, lost := b.oauthFailure(); lost {
		return f
	}
	var werr *jsonrpc.Error
	isRPC := errors.As(err, &werr)
	if !isRPC && !s.ended() {
		// A read error retires the call before the session reports its
		// end; give it a moment to tell the two apart.
		select {
		case <-s.done:
		case <-time.After(500 * time.Millisecond):
		}
	}
	if st.gone.Load() || s.ended() || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server stopped before answering.", Retryable: true}
	}
	if code := st.unsupported.Load(); code != nil {
		return tasks.Failure{Code: *code, Message: unsupportedMessage(*code)}
	}
	if isRPC {
		if tooLarge(werr) {
			return tasks.Failure{Code: agentproto.CodeResultTooLarge, Message: "The MCP server's response was larger than the gateway's stdio frame limit (16 MiB); it was discarded, the server stays in use."}
		}
		if werr.Code == mcp.CodeURLElicitationRequired {
			b.recordLoss(st, agentproto.CodeUnsupportedURLElicitation)
			return tasks.Failure{Code: agentproto.CodeUnsupportedURLElicitation, Message: unsupportedMessage(agentproto.CodeUnsupportedURLElicitation)}
		}
		return tasks.Failure{
			Code:      agentproto.MCPCode(werr.Code),
			Message:   "The MCP server answered with JSON-RPC error " + strconv.FormatInt(werr.Code, 10) + rpcPhrase(werr.Code) + ".",
			Retryable: werr.Code == jsonrpc.CodeInternalError,
		}
	}
	b.log.Warn("MCP tools/call failed", slog.String("error", safeText(b.red, err.Error(), 512)))
	// The target failed for an unexpected reason (an HTTP status, an
	// undecodable answer): the reserved internal-error, retryable because
	// such failures are usually transient.
	return tasks.Failure{Code: agentproto.CodeInternalError, Message: "The MCP call failed without a JSON-RPC error.", Retryable: true}
}

func unsupportedMessage(code string) string {
	switch code {
	case agentproto.CodeUnsupportedSampling:
		return "The MCP server asked for sampling, which the gateway does not support."
	case agentproto.CodeUnsupportedRoots:
		return "The MCP server asked for roots, which the gateway does not support."
	case agentproto.CodeUnsupportedURLElicitation:
		return "The MCP server asked for URL-mode elicitation, which the gateway does not support."
	case agentproto.CodeUnattributedElicitation:
		return "The MCP server asked for input the gateway could not attribute to this task."
	}
	return "The MCP server used a feature the gateway does not support."
}

func rpcPhrase(code int64) string {
	switch code {
	case jsonrpc.CodeParseError:
		return " (parse error)"
	case jsonrpc.CodeInvalidRequest:
		return " (invalid request)"
	case jsonrpc.CodeMethodNotFound:
		return " (method not found)"
	case jsonrpc.CodeInvalidParams:
		return " (invalid params)"
	case jsonrpc.CodeInternalError:
		return " (internal error)"
	}
	return ""
}

// toolResult keeps the server's CallToolResult members as they were sent.
// Without the raw frame it marshals the SDK's decoding, which loses an
// explicit "isError": false and content members the SDK does not model.
func (b *Backend) toolResult(raw json.RawMessage, res *mcp.CallToolResult) (tasks.ToolResult, error) {
	var tr tasks.ToolResult
	var wire struct {
		Content           json.RawMessage `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           *bool           `json:"isError"`
		Meta              json.RawMessage `json:"_meta"`
	}
	if raw != nil && json.Unmarshal(raw, &wire) == nil {
		tr = tasks.ToolResult{Content: wire.Content, StructuredContent: wire.StructuredContent, IsError: wire.IsError, Meta: wire.Meta}
		if string(tr.StructuredContent) == "null" {
			tr.StructuredContent = nil
		}
		if string(tr.Meta) == "null" {
			tr.Meta = nil
		}
	} else {
		b.log.Warn("raw tools/call result unavailable; using the SDK's decoded result")
		content := res.Content
		if content == nil {
			content = []mcp.Content{}
		}
		c, err := json.Marshal(content)
		if err != nil {
			return tr, err
		}
		tr.Content = c
		if res.StructuredContent != nil {
			if tr.StructuredContent, err = json.Marshal(res.StructuredContent); err != nil {
				return tr, err
			}
		}
		if res.IsError {
			t := true
			tr.IsError = &t
		}
		if len(res.Meta) > 0 {
			if tr.Meta, err = json.Marshal(res.Meta); err != nil {
				return tr, err
			}
		}
	}
	if len(tr.Content) == 0 || string(tr.Content) == "null" {
		tr.Content = json.RawMessage("[]")
	}
	if tr.Content[0] != '[' {
		return tr, errors.New("content is not an array")
	}
	if len(tr.Meta) > 0 && tr.Meta[0] != '{' {
		return tr, errors.New("_meta is not an object")
	}
	// Secrets never reach results, whatever the server echoes.
	var hit bool
	for _, m := range []*json.RawMessage{&tr.Content, &tr.StructuredContent, &tr.Meta} {
		if len(*m) > 0 {
			var found bool
			*m, found, _ = b.red.ScrubJSON(*m)
			hit = hit || found
		}
	}
	if hit {
		b.log.Warn("MCP result contained a configured secret; redacted")
	}
	return tr, nil
}

// onProgress turns notifications/progress into task progress.
func (b *Backend) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	s := b.sessionOf(req.Session)
	if s == nil || req.Params == nil {
		return
	}
	token, _ := req.Params.ProgressToken.(string)
	st := s.call(token)
	if st == nil {
		if tc := b.remoteByToken(token); tc != nil {
			b.taskProgress(tc, req.Params)
		}
		return
	}
	b.progress(st, req.Params)
}

// progress turns one notifications/progress into task progress.
func (b *Backend) progress(st *callState, p *mcp.ProgressNotificationParams) {
	defer func() {
		st.handled.Add(1)
		select {
		case st.progressed <- struct{}{}:
		default:
		}
	}()
	var pr tasks.Progress
	st.pmu.Lock()
	if p.Total > 0 && !math.IsNaN(p.Progress) && !math.IsInf(p.Progress, 0) && !math.IsInf(p.Total, 0) {
		pct := math.Min(100, math.Max(0, p.Progress/p.Total*100))
		// Percent should not go down; a server that goes back keeps the
		// high-water mark.
		pct = math.Max(pct, st.lastPercent)
		st.lastPercent = pct
		pr.Percent = &pct
	}
	st.pmu.Unlock()
	pr.Message = safeText(b.red, p.Message, maxMessage)
	if pr.Percent == nil && pr.Message == "" {
		pr.Message = "progress " + strconv.FormatFloat(p.Progress, 'g', -1, 64)
	}
	if err := st.run.Progress(pr); errors.Is(err, tasks.ErrSettled) {
		st.settled.Store(true)
		st.cancel()
	}
}

// onElicit turns a form elicitation into an input request and the answer
// into "accept". An input that expires is answered "decline", a task that
// is cancelled or settled meanwhile "cancel".
func (b *Backend) onElicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	s := b.sessionOf(req.Session)
	st := callFromContext(ctx)
	if st != nil && (s == nil || s.call(st.token) != st) {
		// Only a call in flight on this very session can own the
		// request; a context carrying another call must not decide.
		st = nil
	}
	return b.elicit(ctx, s, st, req.Params)
}

// elicit carries one elicitation as an input request. A request with
// related-task metadata (MCP Tasks) belongs to the task it names, and to
// nothing else; without it, to the call its context carries or the
// session's sole call.
func (b *Backend) elicit(ctx context.Context, s *session, st *callState, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	why := "unknown session"
	if id, ok := relatedTask(p.Meta); ok {
		tc := b.remoteCall(id)
		if tc == nil {
			b.unknownTask("elicitation/create")
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "agentgw has no task with this related-task id"}
		}
		select {
		case <-tc.ready: // the handle is committed
		case <-tc.st.ctx.Done():
			return &mcp.ElicitResult{Action: "cancel"}, nil
		case <-ctx.Done():
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}
		st = tc.st
	}
	if st == nil && s != nil {
		st, why = s.soleCall()
		if st != nil && b.taskCallsOn(s) {
			// A task's question must name its task; without the
			// metadata it could be any task's on this session.
			st, why = nil, "task-augmented calls share the session and the request names no task"
		}
	}
	mode := p.Mode
	if mode == "" && p.URL != "" {
		mode = "url"
	}
	if mode == "url" {
		b.recordLoss(st, agentproto.CodeUnsupportedURLElicitation)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "agentgw does not support URL-mode elicitation"}
	}
	if st == nil {
		// Refused, never guessed: see soleCall.
		b.log.Warn("MCP elicitation refused: it cannot be attributed to a tool call with certainty", slog.String("reason", why))
		b.recordLoss(nil, agentproto.CodeUnattributedElicitation)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "agentgw cannot attribute this elicitation to a single tool call"}
	}
	schema := json.RawMessage(`{"type":"object","properties":{}}`)
	if p.RequestedSchema != nil {
		data, err := requestedSchema(p.RequestedSchema)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "agentgw cannot represent the requested schema"}
		}
		schema, _, _ = b.red.ScrubJSON(data)
	}
	q := safeText(b.red, p.Message, maxQuestion)
	if q == "" {
		q = "The tool asks for input."
	}

	// The elicitation ends with the call, and with the request itself (the
	// server may cancel it, or the connection may drop).
	ictx, cancel := context.WithCancel(st.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()

	st.imu.Lock()
	st.asking = true
	st.imu.Unlock()
	answer, err := st.run.RequestInput(ictx, tasks.InputRequest{Question: q, Schema: schema})
	st.imu.Lock()
	st.asking = false
	st.imu.Unlock()
	switch {
	case err == nil:
		var content map[string]any
		if err := json.Unmarshal(answer, &content); err != nil {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		return &mcp.ElicitResult{Action: "accept", Content: content}, nil
	case errors.Is(err, tasks.ErrInputExpired):
		st.inputExpired.Store(true)
		st.settled.Store(true)
		defer st.cancel() // the call ends too; the answer still goes out
		return &mcp.ElicitResult{Action: "decline"}, nil
	case errors.Is(err, tasks.ErrSettled):
		st.settled.Store(true)
		defer st.cancel()
		return &mcp.ElicitResult{Action: "cancel"}, nil
	case errors.Is(err, tasks.ErrInvalidRequest), errors.Is(err, tasks.ErrInvalidTransition):
		// The schema does not compile under the gateway's rules, or a
		// second elicitation arrived while one is pending.
		b.log.Warn("elicitation cannot be carried as an input request", slog.String("reason", err.Error()))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "agentgw cannot carry this elicitation as an XMPP input request"}
	default:
		if st.ctx.Err() == nil && ctx.Err() == nil {
			b.log.Warn("elicitation could not be carried as an input request; answered cancel", slog.String("error", err.Error()))
		}
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
}

// requestedSchema marshals an elicitation schema, rewritten to JSON Schema
// 2020-12 when it declares an older dialect.
func requestedSchema(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	switch d := dialectOf(m); d {
	case "", "2020-12":
		return data, nil
	case "unknown":
		return nil, errors.New("unsupported dialect")
	default:
		if !to202012(m, d) {
			return nil, errors.New("untranslatable schema")
		}
		return json.Marshal(m)
	}
}

// tooLarge reports the error the stdio reader put in place of a response
// over the frame limit (oversize.go).
func tooLarge(werr *jsonrpc.Error) bool {
	return werr.Code == codeFrameTooLarge && werr.Message == msgFrameTooLarge
}
