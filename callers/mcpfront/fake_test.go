package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/ijson"
)

// fakeAgents is an in-memory stand-in for the XMPP side, for unit tests of
// the front's own logic: naming, diffing, result mapping, and how calls
// react to progress, input and cancellation. What the real protocol does
// is proven against a real gateway elsewhere.
type fakeAgents struct {
	me jid.JID

	mu       sync.Mutex
	gateways []jid.JID
	dir      map[string][]string // gateway → endpoint JIDs
	eps      map[string]*fakeEP
	tasks    map[string]*fakeTask
	byReq    map[string]*fakeTask
	ops      []string // "invoke <tool>", "cancel <task>", "input <task>", "manifest <ep>"
	n        int
	listErr  error // AllItems fails with this when set
	invokeFn func(ep, tool string) error
}

type fakeEP struct {
	version string
	hash    string
	tools   []agentclient.ManifestTool
	hidden  bool
	run     func(t *fakeTask) // the agent's behaviour per tool call
}

// fakeTask is one task; the agent script drives it through its methods.
type fakeTask struct {
	fa        *fakeAgents
	id, ep    string
	tool      string
	args      json.RawMessage
	events    []agentclient.Event
	changed   chan struct{} // closed and replaced on every event
	state     agentproto.State
	pending   *agentclient.InputRequest
	inputs    chan json.RawMessage
	cancelled chan struct{}
	result    json.RawMessage
}

func newFake(t *testing.T) *fakeAgents {
	t.Helper()
	return &fakeAgents{
		me:    jid.MustParse("alice@example.test/mcp"),
		dir:   map[string][]string{},
		eps:   map[string]*fakeEP{},
		tasks: map[string]*fakeTask{},
		byReq: map[string]*fakeTask{},
	}
}

func (fa *fakeAgents) addEndpoint(gw, ep string, e *fakeEP) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	g := jid.MustParse(gw)
	found := false
	for _, x := range fa.gateways {
		if x.Equal(g) {
			found = true
		}
	}
	if !found {
		fa.gateways = append(fa.gateways, g)
	}
	fa.dir[gw] = append(fa.dir[gw], ep)
	if e.hash == "" {
		e.hash = "hash-" + e.version
	}
	fa.eps[ep] = e
}

func (fa *fakeAgents) setVersion(ep, version string, tools []agentclient.ManifestTool) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	e := fa.eps[ep]
	e.version, e.hash = version, "hash-"+version
	if tools != nil {
		e.tools = tools
	}
}

func (fa *fakeAgents) log() []string {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	return append([]string(nil), fa.ops...)
}

func (fa *fakeAgents) op(s string) {
	fa.mu.Lock()
	fa.ops = append(fa.ops, s)
	fa.mu.Unlock()
}

var errNotFound = &agentproto.StanzaError{Type: "cancel", Condition: "item-not-found"}

func (fa *fakeAgents) JID() jid.JID { return fa.me }

func (fa *fakeAgents) FindGateways(ctx context.Context, server jid.JID) ([]jid.JID, error) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	return append([]jid.JID(nil), fa.gateways...), nil
}

func (fa *fakeAgents) AllItems(ctx context.Context, to jid.JID, node string, pageSize int) ([]agentclient.Item, error) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if fa.listErr != nil {
		return nil, fa.listErr
	}
	var out []agentclient.Item
	for _, ep := range fa.dir[to.String()] {
		if e := fa.eps[ep]; e != nil && !e.hidden {
			out = append(out, agentclient.Item{JID: ep})
		}
	}
	return out, nil
}

func (fa *fakeAgents) Endpoint(ctx context.Context, ep jid.JID) (*agentclient.EndpointInfo, error) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	e := fa.eps[ep.String()]
	if e == nil || e.hidden {
		return nil, errNotFound
	}
	return &agentclient.EndpointInfo{JID: ep.String(), Version: e.version, ManifestHash: e.hash,
		Features: map[string]bool{ns.Task: true}, IsEndpoint: true}, nil
}

func (fa *fakeAgents) GetManifest(ctx context.Context, ep jid.JID, version string) (*agentclient.Manifest, error) {
	fa.mu.Lock()
	e := fa.eps[ep.String()]
	fa.mu.Unlock()
	if e == nil || e.hidden {
		return nil, errNotFound
	}
	fa.op("manifest " + ep.String())
	m := &agentclient.Manifest{Version: e.version, Hash: e.hash}
	m.Doc.Agent.JID = ep.String()
	m.Doc.Tools = e.tools
	return m, nil
}

func (fa *fakeAgents) Invoke(ctx context.Context, ep jid.JID, req *agentclient.InvokeRequest) (*agentclient.Accepted, error) {
	if req.RequestID == "" {
		req.RequestID = fmt.Sprintf("req-%022d", len(fa.log()))
	}
	fa.mu.Lock()
	if t := fa.byReq[req.RequestID]; t != nil {
		fa.mu.Unlock()
		return &agentclient.Accepted{TaskID: t.id, RequestID: req.RequestID}, nil
	}
	e := fa.eps[ep.String()]
	fn := fa.invokeFn
	fa.mu.Unlock()
	if e == nil || e.version != req.Version || e.hash != req.ManifestHash {
		return nil, errNotFound
	}
	if fn != nil {
		if err := fn(ep.String(), req.Tool); err != nil {
			return nil, err
		}
	}
	fa.mu.Lock()
	fa.n++
	t := &fakeTask{fa: fa, id: fmt.Sprintf("task-%022d", fa.n), ep: ep.String(), tool: req.Tool, args: req.Arguments,
		changed: make(chan struct{}), state: "accepted", inputs: make(chan json.RawMessage, 1), cancelled: make(chan struct{})}
	fa.tasks[t.id] = t
	fa.byReq[req.RequestID] = t
	fa.ops = append(fa.ops, "invoke "+req.Tool)
	fa.mu.Unlock()
	go e.run(t)
	return &agentclient.Accepted{TaskID: t.id, RequestID: req.RequestID, Revision: 0, RetainUntil: "2099-01-01T00:00:00Z"}, nil
}

// emit appends an event (revision = previous + 1).
func (t *fakeTask) emit(typ string, payload any) {
	b, _ := json.Marshal(payload)
	t.fa.mu.Lock()
	defer t.fa.mu.Unlock()
	if t.terminal() {
		return
	}
	rev := int64(len(t.events) + 1)
	t.events = append(t.events, agentclient.Event{Endpoint: t.ep, TaskID: t.id, Revision: rev, Type: agentproto.EventType(typ), Payload: b})
	switch typ {
	case "status":
		t.state = agentproto.State(payload.(map[string]any)["state"].(string))
	case "input_required", "completed", "failed", "cancelled":
		t.state = agentproto.State(typ)
	}
	if typ == "completed" || typ == "failed" || typ == "cancelled" {
		t.result = b
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *fakeTask) terminal() bool {
	return t.state == "completed" || t.state == "failed" || t.state == "cancelled"
}

func (t *fakeTask) status(s string) { t.emit("status", map[string]any{"state": s}) }

func (t *fakeTask) progress(pct float64, msg string) {
	t.emit("progress", map[string]any{"percent": pct, "message": msg})
}

// ask requests input and waits for it or for cancellation.
func (t *fakeTask) ask(question string, schema string) (json.RawMessage, bool) {
	t.fa.mu.Lock()
	ir := &agentclient.InputRequest{RequestID: fmt.Sprintf("input-%022d", len(t.events)), Question: question, InputSchema: json.RawMessage(schema), CreatedAt: "2026-01-01T00:00:00Z"}
	t.pending = ir
	t.fa.mu.Unlock()
	t.emit("input_required", ir)
	select {
	case v := <-t.inputs:
		t.status("running")
		return v, true
	case <-t.cancelled:
		return nil, false
	}
}

func (t *fakeTask) complete(result string) {
	t.emit("completed", map[string]any{"result": json.RawMessage(result)})
}

func (t *fakeTask) fail(code, msg string) {
	t.emit("failed", map[string]any{"error": map[string]any{"code": code, "message": msg, "retryable": false}})
}

func (fa *fakeAgents) task(id string) (*fakeTask, error) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	t := fa.tasks[id]
	if t == nil {
		return nil, errNotFound
	}
	return t, nil
}

func (fa *fakeAgents) State(ctx context.Context, ep jid.JID, taskID string) (*agentclient.TaskState, error) {
	t, err := fa.task(taskID)
	if err != nil {
		return nil, err
	}
	fa.mu.Lock()
	defer fa.mu.Unlock()
	st := &agentclient.TaskState{TaskID: t.id, Endpoint: t.ep, State: t.state, Revision: int64(len(t.events)), ResultAvailable: t.terminal()}
	if t.state == "input_required" && t.pending != nil {
		st.PendingInput, _ = json.Marshal(t.pending)
	}
	return st, nil
}

func (fa *fakeAgents) Result(ctx context.Context, ep jid.JID, taskID string) (*agentclient.TaskResult, error) {
	t, err := fa.task(taskID)
	if err != nil {
		return nil, err
	}
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if !t.terminal() {
		return nil, &agentproto.StanzaError{Condition: "unexpected-request"}
	}
	return &agentclient.TaskResult{TaskID: t.id, State: t.state, Revision: int64(len(t.events)), Payload: t.result}, nil
}

func (fa *fakeAgents) Cancel(ctx context.Context, ep jid.JID, taskID string, expectedRevision int64, reason *string) (int64, error) {
	t, err := fa.task(taskID)
	if err != nil {
		return 0, err
	}
	fa.mu.Lock()
	if t.terminal() || expectedRevision != int64(len(t.events)) {
		fa.mu.Unlock()
		return 0, &agentproto.StanzaError{Condition: "conflict"}
	}
	fa.ops = append(fa.ops, "cancel "+t.tool)
	fa.mu.Unlock()
	t.status("cancelling")
	close(t.cancelled)
	return expectedRevision + 1, nil
}

func (fa *fakeAgents) ProvideInput(ctx context.Context, ep jid.JID, taskID, requestID string, expectedRevision int64, input json.RawMessage) (int64, error) {
	t, err := fa.task(taskID)
	if err != nil {
		return 0, err
	}
	fa.mu.Lock()
	if t.pending == nil || t.pending.RequestID != requestID || t.state != "input_required" {
		fa.mu.Unlock()
		return 0, &agentproto.StanzaError{Condition: "conflict"}
	}
	if _, _, err := ijson.Canonicalize(input, ijson.Limits{}); err != nil {
		fa.mu.Unlock()
		return 0, &agentproto.StanzaError{Condition: "not-acceptable"}
	}
	t.pending = nil
	fa.ops = append(fa.ops, "input "+string(input))
	fa.mu.Unlock()
	t.inputs <- input
	return expectedRevision + 1, nil
}

// Follow replays events after acc.Revision, like agentclient.Follow
// without loss: the front's reactions are what the unit tests check.
func (fa *fakeAgents) Follow(ctx context.Context, ep jid.JID, acc *agentclient.Accepted, opts agentclient.CallOptions) (*agentclient.Outcome, error) {
	t, err := fa.task(acc.TaskID)
	if err != nil {
		return nil, err
	}
	pos := acc.Revision
	for {
		fa.mu.Lock()
		evs := append([]agentclient.Event(nil), t.events...)
		ch := t.changed
		fa.mu.Unlock()
		for _, ev := range evs {
			if ev.Revision <= pos {
				continue
			}
			pos = ev.Revision
			switch ev.Type {
			case "progress":
				var p agentclient.Progress
				json.Unmarshal(ev.Payload, &p)
				if opts.OnProgress != nil {
					opts.OnProgress(p)
				}
			case "status":
				var s struct{ State string }
				json.Unmarshal(ev.Payload, &s)
				if opts.OnStatus != nil {
					opts.OnStatus(agentproto.State(s.State))
				}
			case "input_required":
				var ir agentclient.InputRequest
				json.Unmarshal(ev.Payload, &ir)
				ir.Revision = ev.Revision
				if opts.OnInput == nil {
					r := "no input"
					fa.Cancel(ctx, ep, t.id, ev.Revision, &r)
					return nil, agentclient.ErrNeedsInput
				}
				v, err := opts.OnInput(ctx, ir)
				if err != nil {
					return nil, err
				}
				if _, err := fa.ProvideInput(ctx, ep, t.id, ir.RequestID, ir.Revision, v); err != nil {
					return nil, err
				}
			case "completed", "failed", "cancelled":
				return &agentclient.Outcome{Accepted: acc, State: agentproto.State(ev.Type), Revision: ev.Revision, Payload: ev.Payload}, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// Subscribe is the A2A front's way of following a task; the MCP front
// follows with Follow.
func (fa *fakeAgents) Subscribe(jid.JID, string) (<-chan agentclient.Event, func()) {
	panic("fakeAgents: the MCP front does not Subscribe")
}

var _ Client = (*fakeAgents)(nil)
