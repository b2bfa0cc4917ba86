package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

// inputKey is the one input request of an input-required result.
const inputKey = "xmpp-input"

// maxAnswerAttempts bounds how often a host is asked again after answers
// that fail the XMPP input schema.
const maxAnswerAttempts = 3

// maxFollowFailures bounds consecutive failures to follow a task (IQ
// timeouts, a lost stream) before the call gives up on it.
const maxFollowFailures = 3

// Why an input request could not be answered.
var (
	errNoElicit     = errors.New("the MCP host cannot answer elicitation requests")
	errElicitFailed = errors.New("the MCP host failed the elicitation request")
	errDeclined     = errors.New("the user declined the input request")
	errDismissed    = errors.New("the user dismissed the input request")
	errExhausted    = errors.New("no answer matched the input schema")
	errInputExpired = errors.New("the input request expired before an answer")
)

// needInput ends a Follow so the input request can be returned to a host
// that uses multi round-trip requests.
type needInput struct{ req agentclient.InputRequest }

func (*needInput) Error() string { return "input required" }

// host is what the calling host can do.
type host struct {
	elicit     bool // answers form elicitation
	mrtr       bool // MCP ≥ 2026-07-28: input requests go into the result
	objectOnly bool // structuredContent must be a JSON object
}

const protocolMRTR = "2026-07-28"

func hostOf(req *mcp.CallToolRequest) host {
	caps := req.ClientCapabilities()
	el := caps != nil && caps.Elicitation != nil && (caps.Elicitation.Form != nil || caps.Elicitation.URL == nil)
	newp := req.ProtocolVersion() >= protocolMRTR
	return host{elicit: el, mrtr: newp, objectOnly: !newp}
}

func (f *Front) handler(b *binding) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			return f.resume(ctx, b, req)
		}
		return f.call(ctx, b, req)
	}
}

// delegationDepth reads the depth a gateway put into the call's _meta
// (ns.MetaDelegationDepth): this call serves a task at depth n-1, so the
// invocations it makes are at depth n. A direct host call has none (0).
func delegationDepth(req *mcp.CallToolRequest) (int, error) {
	if req.Params == nil || req.Params.Meta == nil {
		return 0, nil
	}
	v, ok := req.Params.Meta[ns.MetaDelegationDepth]
	if !ok {
		return 0, nil
	}
	f, ok := v.(float64)
	if !ok || f < 1 || f > 1000 || f != float64(int(f)) {
		return 0, errors.New("_meta " + ns.MetaDelegationDepth + " must be an integer from 1 to 1000")
	}
	return int(f), nil
}

// stanzaText is the text of a stanza error, or "".
func stanzaText(err error) string {
	var se *agentproto.StanzaError
	if errors.As(err, &se) {
		return se.Text
	}
	return ""
}

// callRun is one tools/call bridged to one XMPP task.
type callRun struct {
	f    *Front
	b    *binding
	ep   jid.JID
	req  *mcp.CallToolRequest
	host host
	ctx  context.Context // the handler's; routes notifications to the request
	// detached: the call serves an MCP task (tasks/result); a host that
	// stops waiting leaves the XMPP task running.
	detached bool
	related  string // the MCP task id, for related-task metadata

	mu sync.Mutex
	tm taskMeta

	// progress
	token any
	last  float64
	sent  bool
}

func (f *Front) newRun(ctx context.Context, b *binding, ep jid.JID, req *mcp.CallToolRequest, tm taskMeta) *callRun {
	c := &callRun{f: f, b: b, ep: ep, req: req, host: hostOf(req), tm: tm, ctx: ctx}
	if req.Params != nil {
		c.token = req.Params.GetProgressToken()
	}
	return c
}

func (c *callRun) meta() taskMeta {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tm
}

func (c *callRun) setState(s agentproto.State) {
	c.mu.Lock()
	c.tm.State = s
	c.mu.Unlock()
}

// call invokes the tool and follows the task to its end.
func (f *Front) call(ctx context.Context, b *binding, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	canon, bad := arguments(b, req)
	if bad != "" {
		return toolError(bad, nil), nil
	}
	c, ir, acc, err, rpcErr := f.admit(ctx, b, req, canon)
	if rpcErr != nil {
		return nil, rpcErr
	}
	if err != nil {
		return c.invokeFailed(ctx, ir, err)
	}
	c.accepted(acc)
	return c.follow(ctx, *acc, nil)
}

// arguments canonicalizes the call's arguments (none: {}) and validates
// them against the tool's input schema; bad says what is wrong.
func arguments(b *binding, req *mcp.CallToolRequest) (canon json.RawMessage, bad string) {
	args := json.RawMessage(req.Params.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	canon, v, err := ijson.Canonicalize(args, ijson.Limits{})
	if err != nil {
		return nil, "The arguments are not valid I-JSON: " + err.Error()
	}
	if err := b.input.Validate(v); err != nil {
		return nil, "The arguments do not match the tool's input schema: " + err.Error()
	}
	return canon, ""
}

// admit invokes the tool with canon and returns the run that follows it
// and the invoke's outcome; rpcErr is a malformed request (its
// delegation depth).
func (f *Front) admit(ctx context.Context, b *binding, req *mcp.CallToolRequest, canon json.RawMessage) (c *callRun, ir *agentclient.InvokeRequest, acc *agentclient.Accepted, err error, rpcErr error) {
	depth, derr := delegationDepth(req)
	if derr != nil {
		return nil, nil, nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: derr.Error()}
	}
	c = f.newRun(ctx, b, b.ep, req, taskMeta{Endpoint: b.ep.String(), Tool: b.tool.Name, Version: b.version})
	ir = &agentclient.InvokeRequest{Tool: b.tool.Name, Version: b.version, ManifestHash: b.hash, Arguments: canon}
	if b.delegation {
		ir.DelegationDepth = depth
	}
	acc, err = f.c.Invoke(ctx, b.ep, ir)
	c.tm.RequestID = ir.RequestID
	return c, ir, acc, err, nil
}

func (c *callRun) accepted(acc *agentclient.Accepted) {
	c.mu.Lock()
	c.tm.TaskID, c.tm.RequestID, c.tm.Revision, c.tm.RetainUntil, c.tm.State = acc.TaskID, acc.RequestID, acc.Revision, acc.RetainUntil, agentproto.StateAccepted
	c.mu.Unlock()
	c.progress(nil, "accepted as XMPP task "+acc.TaskID)
}

// invokeFailed maps an invocation that created no known task.
func (c *callRun) invokeFailed(ctx context.Context, ir *agentclient.InvokeRequest, err error) (*mcp.CallToolResult, error) {
	tm := c.meta()
	if ctx.Err() != nil {
		// The host gave up while the invoke was in flight; the task may
		// exist. The identical request-id finds it, so it can be
		// cancelled rather than left running unobserved.
		c.f.orphan(c, ir)
		return nil, rpcError(CodeAgentUnavailable, "the call was cancelled by the host before the agent accepted it", tm)
	}
	cond := string(agentclient.Condition(err))
	tm.Condition = cond
	switch cond {
	case "":
		return nil, rpcError(CodeAgentUnavailable, "the agent did not answer the invocation; a task may exist: query it, or retry with the same request-id ("+tm.RequestID+")", tm)
	case "bad-request", "not-acceptable":
		c.f.soon()
		return toolError("The agent rejected the call ("+cond+"): the arguments do not match its schema, or the tool's pinned version is no longer active. The tool list is being refreshed.", &tm), nil
	case "item-not-found":
		c.f.soon()
		return nil, rpcError(CodeAgentUnavailable, "the tool is not available to this account (item-not-found): the agent may have a new active version or have revoked access; the tool list is being refreshed", tm)
	case "policy-violation":
		// The gateway's delegation-depth bound (the only policy-violation
		// it sends): a tool error with the gateway's own text, so every
		// hop of the chain returns it to its caller as it is.
		return toolError("The agent refused the call (policy-violation): "+safeText(stanzaText(err), 300), &tm), nil
	case "resource-constraint":
		return nil, rpcError(CodeAgentUnavailable, "the agent is at capacity or rate-limits this account (resource-constraint); try again later", tm)
	default:
		return nil, rpcError(CodeAgentUnavailable, "the agent refused the invocation ("+safeText(cond, 64)+")", tm)
	}
}

// orphan finds and cancels the task of an invocation whose host gave up
// before the result arrived. It runs in the background with a bound.
func (f *Front) orphan(c *callRun, ir *agentclient.InvokeRequest) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), f.opts.CancelWait)
		defer cancel()
		acc, err := f.c.Invoke(ctx, c.ep, ir)
		if err != nil {
			return // nothing was admitted, or the agent cannot be reached
		}
		c.accepted(acc)
		if _, err := c.cancelAndSettle(ctx, "the MCP host cancelled the call"); err != nil {
			f.log.Warn("cancelling an abandoned task failed", "endpoint", c.ep.String(), "task", acc.TaskID, "error", err)
		}
	}()
}

// follow waits for the task to settle, bridging progress and input, and
// resumes after transient failures from the committed state. pending is
// an input request to answer before following.
func (c *callRun) follow(ctx context.Context, cur agentclient.Accepted, pending *agentclient.InputRequest) (*mcp.CallToolResult, error) {
	opts := agentclient.CallOptions{
		OnProgress:   c.onProgress,
		OnStatus:     c.onStatus,
		OnInput:      c.onInput,
		RecoverAfter: c.f.opts.RecoverAfter,
	}
	failures := 0
	for {
		var out *agentclient.Outcome
		var err error
		if pending != nil {
			err = c.answer(ctx, *pending)
			pending = nil
		}
		if err == nil {
			out, err = c.f.c.Follow(ctx, c.ep, &cur, opts)
		}
		if err == nil {
			return c.settled(out)
		}
		if ctx.Err() != nil {
			return c.hostGone()
		}
		var need *needInput
		switch {
		case errors.As(err, &need):
			return c.inputRequired(need.req, 0, "")
		case errors.Is(err, errNoElicit):
			return c.cancelFor("the tool needs input and this MCP host cannot answer elicitation requests; the XMPP task was cancelled", "the caller cannot provide input")
		case errors.Is(err, errElicitFailed):
			return c.cancelFor("the tool needs input and the MCP host failed the elicitation request; the XMPP task was cancelled", "the caller could not provide input")
		case errors.Is(err, errDeclined):
			return c.cancelFor("the user declined the input request; the XMPP task was cancelled", "the user declined to provide input")
		case errors.Is(err, errDismissed):
			return c.cancelFor("the user dismissed the input request; the XMPP task was cancelled", "the user dismissed the input request")
		case errors.Is(err, errExhausted):
			return c.cancelFor("no answer matched the tool's input schema; the XMPP task was cancelled", "no valid input was provided")
		case errors.Is(err, errInputExpired):
			// The agent asks again or settles; the state says which.
		default:
			failures++
			if failures > maxFollowFailures {
				c.f.log.Warn("lost track of a task", "endpoint", c.ep.String(), "task", cur.TaskID, "error", err)
				return nil, rpcError(CodeTaskLost, "lost track of the XMPP task; it may still run: recover it with its task-id", c.meta())
			}
			if !sleep(ctx, time.Duration(failures)*time.Second) {
				return c.hostGone()
			}
		}
		st, err := c.f.c.State(ctx, c.ep, cur.TaskID)
		if err != nil {
			if ctx.Err() != nil {
				return c.hostGone()
			}
			failures++
			if failures > maxFollowFailures {
				return nil, rpcError(CodeTaskLost, "lost track of the XMPP task; it may still run: recover it with its task-id", c.meta())
			}
			continue
		}
		if st.Terminal() {
			return c.settledFromState(ctx, st)
		}
		cur.Revision = st.Revision
		pending = pendingInput(st)
	}
}

// pendingInput returns the input request a task-state carries.
func pendingInput(st *agentclient.TaskState) *agentclient.InputRequest {
	if st.State != agentproto.StateInputRequired || len(st.PendingInput) == 0 {
		return nil
	}
	var ir agentclient.InputRequest
	if json.Unmarshal(st.PendingInput, &ir) != nil || ir.RequestID == "" {
		return nil
	}
	ir.Revision = st.Revision
	return &ir
}

// answer asks the host for one pending input and provides it.
func (c *callRun) answer(ctx context.Context, ir agentclient.InputRequest) error {
	val, err := c.onInput(ctx, ir)
	if err != nil {
		return err
	}
	_, err = c.f.c.ProvideInput(ctx, c.ep, c.meta().TaskID, ir.RequestID, ir.Revision, val)
	if err != nil && agentclient.Condition(err) != "conflict" {
		return fmt.Errorf("providing input: %w", err)
	}
	return nil
}

func (c *callRun) settledFromState(ctx context.Context, st *agentclient.TaskState) (*mcp.CallToolResult, error) {
	res, err := c.f.c.Result(ctx, c.ep, st.TaskID)
	if err != nil {
		if ctx.Err() != nil {
			return c.hostGone()
		}
		return nil, rpcError(CodeTaskLost, "the XMPP task settled "+string(st.State)+" but its result could not be retrieved", c.meta())
	}
	return c.settled(&agentclient.Outcome{State: res.State, Revision: res.Revision, Payload: res.Payload})
}

// settled maps a terminal outcome.
func (c *callRun) settled(out *agentclient.Outcome) (*mcp.CallToolResult, error) {
	c.mu.Lock()
	c.tm.State, c.tm.Revision = out.State, out.Revision
	c.mu.Unlock()
	tm := c.meta()
	switch out.State {
	case agentproto.StateCompleted:
		res, err := completedResult(out.Payload, tm, c.host.objectOnly)
		if err != nil {
			return nil, rpcError(jsonrpc.CodeInternalError, "the completed task's result cannot be represented in MCP: "+err.Error(), tm)
		}
		return res, nil
	case agentproto.StateFailed:
		return failedResult(out.Payload, tm), nil
	default:
		return nil, cancelledError(out.Payload, tm)
	}
}

// hostGone is the answer when the host stopped waiting: a plain call
// cancels its task; an MCP task's keeps running.
func (c *callRun) hostGone() (*mcp.CallToolResult, error) {
	if c.detached {
		return nil, rpcError(CodeTaskLost, "the host stopped waiting; the task continues", c.meta())
	}
	return c.hostCancelled()
}

// hostCancelled cancels the XMPP task after the host cancelled the call
// (or went away) and waits, bounded, for it to settle. Cancellation is
// advisory in XMPP: the task may still complete or fail, and then that
// outcome is returned (the host has stopped listening in any case).
func (c *callRun) hostCancelled() (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.f.opts.CancelWait)
	defer cancel()
	out, err := c.cancelAndSettle(ctx, "the MCP host cancelled the call")
	if err != nil {
		c.f.log.Warn("cancelling a task for the host failed", "endpoint", c.ep.String(), "task", c.meta().TaskID, "error", err)
		return nil, rpcError(CodeTaskLost, "the call was cancelled; the XMPP task's settlement could not be confirmed", c.meta())
	}
	if out.State == agentproto.StateCancelled {
		c.setState(agentproto.StateCancelled)
		return nil, rpcError(CodeTaskCancelled, "the call was cancelled and the XMPP task settled cancelled", c.meta())
	}
	return c.settled(out)
}

// cancelFor cancels the task because its input cannot be provided, and
// reports msg once it settled (or the wait ran out).
func (c *callRun) cancelFor(msg, reason string) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.f.opts.CancelWait)
	defer cancel()
	out, err := c.cancelAndSettle(ctx, reason)
	switch {
	case err != nil:
		c.f.log.Warn("cancelling a task failed", "endpoint", c.ep.String(), "task", c.meta().TaskID, "error", err)
		return nil, rpcError(CodeInputUnavailable, msg+" (its settlement could not be confirmed)", c.meta())
	case out.State == agentproto.StateCancelled:
		c.setState(agentproto.StateCancelled)
		return nil, rpcError(CodeInputUnavailable, msg, c.meta())
	default:
		// It settled otherwise first; that outcome is the truth.
		return c.settled(out)
	}
}

// cancelAndSettle requests cancellation at the current revision and
// follows the task until it is terminal.
func (c *callRun) cancelAndSettle(ctx context.Context, reason string) (*agentclient.Outcome, error) {
	taskID := c.meta().TaskID
	var rev int64
	for attempt := 0; ; attempt++ {
		st, err := c.f.c.State(ctx, c.ep, taskID)
		if err != nil {
			return nil, err
		}
		rev = st.Revision
		if st.Terminal() {
			res, err := c.f.c.Result(ctx, c.ep, taskID)
			if err != nil {
				return nil, err
			}
			return &agentclient.Outcome{State: res.State, Revision: res.Revision, Payload: res.Payload}, nil
		}
		if st.State == agentproto.StateCancelling {
			break
		}
		_, err = c.f.c.Cancel(ctx, c.ep, taskID, st.Revision, &reason)
		if err == nil {
			break
		}
		// conflict: the revision moved (progress) or the task settled.
		if agentclient.Condition(err) != "conflict" || attempt >= 5 {
			return nil, err
		}
	}
	recoverAfter := time.Second
	if c.f.opts.RecoverAfter > 0 && c.f.opts.RecoverAfter < recoverAfter {
		recoverAfter = c.f.opts.RecoverAfter
	}
	return c.f.c.Follow(ctx, c.ep, &agentclient.Accepted{TaskID: taskID, Revision: rev}, agentclient.CallOptions{RecoverAfter: recoverAfter})
}

// onInput answers an input request through the host.
func (c *callRun) onInput(ctx context.Context, ir agentclient.InputRequest) (json.RawMessage, error) {
	c.setState(agentproto.StateInputRequired)
	if !c.host.elicit {
		return nil, errNoElicit
	}
	if c.host.mrtr {
		return nil, &needInput{req: ir}
	}
	form := formFor(ir.InputSchema)
	ectx := ctx
	if ir.ExpiresAt != "" {
		if t, err := xmpptime.Parse(ir.ExpiresAt); err == nil {
			var cancel context.CancelFunc
			ectx, cancel = context.WithDeadline(ctx, t.Time())
			defer cancel()
		}
	}
	problem := ""
	for attempt := 0; attempt < maxAnswerAttempts; attempt++ {
		ep := &mcp.ElicitParams{
			Mode:            "form",
			Message:         c.question(ir, problem),
			RequestedSchema: form.Schema,
		}
		if c.related != "" {
			ep.Meta = mcp.Meta{metaRelatedTask: map[string]string{"taskId": c.related}}
		}
		res, err := c.req.Session.Elicit(ectx, ep)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case ectx.Err() != nil:
				return nil, errInputExpired
			case strings.Contains(err.Error(), "does not match requested schema"):
				problem = "the answer does not match the form"
				continue
			}
			c.f.log.Info("elicitation failed", "error", err)
			return nil, errElicitFailed
		}
		switch res.Action {
		case "accept":
			val, err := form.answer(res.Content, ir.InputSchema)
			if errors.Is(err, errAnswerInvalid) {
				problem = err.Error()
				continue
			}
			if err != nil {
				return nil, errElicitFailed
			}
			c.setState(agentproto.StateRunning)
			return val, nil
		case "decline":
			return nil, errDeclined
		default:
			return nil, errDismissed
		}
	}
	return nil, errExhausted
}

// question is the elicitation message: who asks, what, and why a previous
// answer was refused.
func (c *callRun) question(ir agentclient.InputRequest, problem string) string {
	q := safeText(ir.Question, maxMessageText)
	if q == "" {
		q = "The tool asks for input."
	}
	msg := c.ep.String() + " (" + c.b.tool.Name + ") asks: " + q
	if problem != "" {
		msg += "\n\nThe previous answer was not accepted: " + problem
	}
	return msg
}

// inputRequired returns the input request to a multi round-trip host.
func (c *callRun) inputRequired(ir agentclient.InputRequest, attempt int, problem string) (*mcp.CallToolResult, error) {
	tm := c.meta()
	exp := time.Now().Add(stateLifetime)
	if ir.ExpiresAt != "" {
		if t, err := xmpptime.Parse(ir.ExpiresAt); err == nil && t.Time().Before(exp) {
			exp = t.Time()
		}
	}
	tok := stateToken{
		Tool: c.b.name, Endpoint: c.ep.String(), Version: tm.Version, TaskID: tm.TaskID, RequestID: tm.RequestID,
		Input: ir.RequestID, Attempt: attempt, Expires: exp.Unix() + 1,
	}
	form := formFor(ir.InputSchema)
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{inputKey: &mcp.ElicitParams{
			Mode: "form", Message: c.question(ir, problem), RequestedSchema: form.Schema,
		}},
		RequestState: c.f.seal(tok),
		Meta:         mcp.Meta{MetaTask: tm},
	}, nil
}

// resume continues a call after a multi round-trip host answered (or not)
// the input request named by its requestState.
func (f *Front) resume(ctx context.Context, b *binding, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	tok, err := f.open(req.Params.RequestState, time.Now())
	if err != nil || tok.Tool != b.name {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: errBadState.Error()}
	}
	ep, err := jid.Parse(tok.Endpoint)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: errBadState.Error()}
	}
	c := f.newRun(ctx, b, ep, req, taskMeta{Endpoint: tok.Endpoint, Tool: b.tool.Name, Version: tok.Version, TaskID: tok.TaskID, RequestID: tok.RequestID, State: agentproto.StateInputRequired})
	st, err := f.c.State(ctx, ep, tok.TaskID)
	if err != nil {
		if ctx.Err() != nil {
			return c.hostCancelled()
		}
		return nil, rpcError(CodeTaskLost, "the XMPP task's state could not be retrieved", c.meta())
	}
	if st.Terminal() {
		return c.settledFromState(ctx, st)
	}
	cur := agentclient.Accepted{TaskID: tok.TaskID, RequestID: tok.RequestID, Revision: st.Revision}
	ir := pendingInput(st)
	if ir == nil || ir.RequestID != tok.Input {
		// The request was answered, expired or replaced meanwhile.
		return c.follow(ctx, cur, ir)
	}
	resp, _ := req.Params.InputResponses[inputKey].(*mcp.ElicitResult)
	if resp == nil {
		return c.inputRequired(*ir, tok.Attempt, "")
	}
	switch resp.Action {
	case "accept":
	case "decline":
		return c.cancelFor("the user declined the input request; the XMPP task was cancelled", "the user declined to provide input")
	default:
		return c.cancelFor("the user dismissed the input request; the XMPP task was cancelled", "the user dismissed the input request")
	}
	val, err := formFor(ir.InputSchema).answer(resp.Content, ir.InputSchema)
	if errors.Is(err, errAnswerInvalid) {
		if tok.Attempt+1 >= maxAnswerAttempts {
			return c.cancelFor("no answer matched the tool's input schema; the XMPP task was cancelled", "no valid input was provided")
		}
		return c.inputRequired(*ir, tok.Attempt+1, err.Error())
	}
	if err != nil {
		return c.cancelFor("the input request cannot be answered; the XMPP task was cancelled", "the caller could not provide input")
	}
	if _, err := f.c.ProvideInput(ctx, ep, tok.TaskID, ir.RequestID, ir.Revision, val); err != nil {
		if ctx.Err() != nil {
			return c.hostCancelled()
		}
		if agentclient.Condition(err) == "not-acceptable" && tok.Attempt+1 < maxAnswerAttempts {
			return c.inputRequired(*ir, tok.Attempt+1, "the agent did not accept the answer")
		}
		// conflict and the rest: the state tells what happened.
	}
	c.setState(agentproto.StateRunning)
	return c.follow(ctx, cur, nil)
}

func (c *callRun) onStatus(state agentproto.State) {
	c.setState(state)
	c.progress(nil, "state: "+string(state))
}

func (c *callRun) onProgress(p agentclient.Progress) {
	var parts []string
	if p.Stage != "" {
		parts = append(parts, safeText(p.Stage, 200)+":")
	}
	if p.Message != "" {
		parts = append(parts, safeText(p.Message, maxMessageText))
	}
	c.progress(p.Percent, strings.Join(parts, " "))
}

// progress sends notifications/progress when the host asked for it. MCP
// progress must increase with every notification; the XMPP percent is
// used when it does, and otherwise the value creeps up by a thousandth so
// status changes and messages still reach the host.
func (c *callRun) progress(percent *float64, msg string) {
	if c.token == nil || c.req.Session == nil {
		return
	}
	c.mu.Lock()
	var v, total float64
	switch {
	case percent != nil && (*percent > c.last || (!c.sent && *percent >= 0)):
		v, total = *percent, 100
	case c.sent:
		v = c.last + 0.001
	}
	c.last, c.sent = v, true
	tm := c.tm
	c.mu.Unlock()
	p := &mcp.ProgressNotificationParams{
		ProgressToken: c.token, Progress: v, Total: total, Message: msg,
		Meta: mcp.Meta{MetaTask: tm},
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
	defer cancel()
	if err := c.req.Session.NotifyProgress(ctx, p); err != nil {
		c.f.log.Debug("progress notification not sent", "error", err)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
