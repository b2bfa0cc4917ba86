package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// InvokeRequest is one invocation, pinned to a manifest.
type InvokeRequest struct {
	RequestID    string // generated when empty; reused verbatim on retries
	Tool         string
	Version      string
	ManifestHash string
	Arguments    json.RawMessage
	Deadline     string // XEP-0082, optional
	// DelegationDepth, when above 0, is sent as agentgw's delegation
	// extension; only for targets that advertise ns.Delegation.
	DelegationDepth int
}

// Accepted is the target's durable acceptance.
type Accepted struct {
	TaskID, RequestID    string
	Revision             int64
	Created, RetainUntil string
}

// Invoke sends an invoke and retries it with the identical request-id when
// the IQ times out, as the spec requires: a timeout does not prove that
// nothing was admitted.
func (c *Client) Invoke(ctx context.Context, ep jid.JID, req *InvokeRequest) (*Accepted, error) {
	if req.RequestID == "" {
		req.RequestID = ids.New("req-")
	}
	el := xmltree.New(ns.Task, "invoke", "api-version", req.Version, "request-id", req.RequestID, "tool", req.Tool)
	el.Add(xmltree.New(ns.Task, "manifest-hash").Add(xmltree.New(ns.Hashes, "hash", "algo", ns.HashAlgo).WithText(req.ManifestHash)))
	el.Add(xmltree.New(ns.Task, "arguments", "media-type", ns.MediaJSON).WithText(xmltree.JSONText(req.Arguments)))
	if req.Deadline != "" {
		el.Add(xmltree.New(ns.Task, "deadline").WithText(req.Deadline))
	}
	if req.DelegationDepth > 0 {
		el.Add(xmltree.New(ns.Delegation, "delegation", "depth", strconv.Itoa(req.DelegationDepth)))
	}
	var lastErr error
	for attempt := 0; attempt <= c.Retries; attempt++ {
		p, err := c.iq(ctx, "set", ep, el)
		if err == nil {
			if !p.Is(ns.Task, "accepted") {
				return nil, errors.New("agentclient: invoke result has no accepted element")
			}
			rev, _ := strconv.ParseInt(p.AttrValue("revision"), 10, 64)
			return &Accepted{
				TaskID: p.AttrValue("task-id"), RequestID: p.AttrValue("request-id"), Revision: rev,
				Created: p.AttrValue("created"), RetainUntil: p.AttrValue("retain-until"),
			}, nil
		}
		var se *agentproto.StanzaError
		if errors.As(err, &se) || ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
		c.log.Warn("invoke not answered; retrying with the same request-id", "request_id", req.RequestID, "attempt", attempt+1, "err", err)
	}
	return nil, fmt.Errorf("invoke not answered after %d attempts (request-id %s; the task may exist, query it or retry the same request-id): %w", c.Retries+1, req.RequestID, lastErr)
}

// TaskState is a task-state result.
type TaskState struct {
	TaskID, Endpoint, APIVersion, ManifestHash string
	State                                      agentproto.State
	Revision                                   int64
	Created, Updated, RetainUntil, Deadline    string
	ResultAvailable                            bool
	PendingInput                               json.RawMessage
}

// Terminal reports whether the state is terminal.
func (s *TaskState) Terminal() bool { return s.State.Terminal() }

// State queries a task's complete state.
func (c *Client) State(ctx context.Context, ep jid.JID, taskID string) (*TaskState, error) {
	p, err := c.iq(ctx, "get", ep, xmltree.New(ns.Task, "task-state-request", "task-id", taskID))
	if err != nil {
		return nil, err
	}
	if !p.Is(ns.Task, "task-state") {
		return nil, errors.New("agentclient: task-state-request result has no task-state")
	}
	s := &TaskState{
		TaskID: p.AttrValue("task-id"), Endpoint: p.AttrValue("endpoint"), APIVersion: p.AttrValue("api-version"),
		State: agentproto.State(p.AttrValue("state")), Created: p.AttrValue("created"), Updated: p.AttrValue("updated"),
		RetainUntil: p.AttrValue("retain-until"), Deadline: p.AttrValue("deadline"),
		ResultAvailable: p.AttrValue("result-available") == "true" || p.AttrValue("result-available") == "1",
	}
	s.Revision, _ = strconv.ParseInt(p.AttrValue("revision"), 10, 64)
	if mh := p.Child(ns.Task, "manifest-hash"); mh != nil {
		if h := mh.Child(ns.Hashes, "hash"); h != nil {
			s.ManifestHash = h.Text
		}
	}
	if pi := p.Child(ns.Task, "pending-input"); pi != nil {
		s.PendingInput = json.RawMessage(pi.Text)
	}
	return s, nil
}

// TaskResult is a retained terminal result.
type TaskResult struct {
	TaskID   string
	State    agentproto.State
	Revision int64
	Payload  json.RawMessage
}

// Result retrieves a terminal task's result.
func (c *Client) Result(ctx context.Context, ep jid.JID, taskID string) (*TaskResult, error) {
	p, err := c.iq(ctx, "get", ep, xmltree.New(ns.Task, "task-result-request", "task-id", taskID))
	if err != nil {
		return nil, err
	}
	if !p.Is(ns.Task, "task-result") {
		return nil, errors.New("agentclient: task-result-request result has no task-result")
	}
	r := &TaskResult{TaskID: p.AttrValue("task-id"), State: agentproto.State(p.AttrValue("state")), Payload: json.RawMessage(p.Text)}
	r.Revision, _ = strconv.ParseInt(p.AttrValue("revision"), 10, 64)
	return r, nil
}

// ProvideInput answers a pending input request; it returns the acceptance
// revision.
func (c *Client) ProvideInput(ctx context.Context, ep jid.JID, taskID, requestID string, expectedRevision int64, input json.RawMessage) (int64, error) {
	el := xmltree.New(ns.Task, "provide-input", "expected-revision", strconv.FormatInt(expectedRevision, 10), "request-id", requestID, "task-id", taskID)
	el.Add(xmltree.New(ns.Task, "input", "media-type", ns.MediaJSON).WithText(xmltree.JSONText(input)))
	p, err := c.iq(ctx, "set", ep, el)
	if err != nil {
		return 0, err
	}
	if !p.Is(ns.Task, "input-accepted") {
		return 0, errors.New("agentclient: provide-input result has no input-accepted")
	}
	return strconv.ParseInt(p.AttrValue("revision"), 10, 64)
}

// answer provides val for req. A conflict means the task moved since the
// revision the request came with (a progress event, say) or the request
// is no longer pending: while the same request is still pending the answer
// is sent again at the current revision (at most 5 times), so an answer is
// never dropped just because the revision moved.
func (c *Client) answer(ctx context.Context, ep jid.JID, taskID string, req InputRequest, val json.RawMessage) error {
	rev := req.Revision
	for attempt := 0; ; attempt++ {
		_, err := c.ProvideInput(ctx, ep, taskID, req.RequestID, rev, val)
		if err == nil {
			return nil
		}
		if Condition(err) != "conflict" {
			return fmt.Errorf("providing input: %w", err)
		}
		if attempt == 4 {
			c.log.Warn("input answer still conflicting after 5 attempts; following the task", "task", taskID)
			return nil
		}
		st, serr := c.State(ctx, ep, taskID)
		if serr != nil || st.State != agentproto.StateInputRequired || len(st.PendingInput) == 0 {
			return nil // answered, cancelled or settled meanwhile
		}
		var pending InputRequest
		if json.Unmarshal(st.PendingInput, &pending) != nil || pending.RequestID != req.RequestID {
			return nil // another question now; Follow answers it
		}
		rev = st.Revision
	}
}

// Cancel requests cancellation; it returns the acceptance revision. The
// cancellation is advisory: wait for the terminal state.
func (c *Client) Cancel(ctx context.Context, ep jid.JID, taskID string, expectedRevision int64, reason *string) (int64, error) {
	el := xmltree.New(ns.Task, "cancel", "expected-revision", strconv.FormatInt(expectedRevision, 10), "task-id", taskID)
	if reason != nil {
		el.Add(xmltree.New(ns.Task, "reason").WithText(*reason))
	}
	p, err := c.iq(ctx, "set", ep, el)
	if err != nil {
		return 0, err
	}
	if !p.Is(ns.Task, "cancel-accepted") {
		return 0, errors.New("agentclient: cancel result has no cancel-accepted")
	}
	return strconv.ParseInt(p.AttrValue("revision"), 10, 64)
}

// Event is one lifecycle event received from a target.
type Event struct {
	Endpoint string
	TaskID   string
	EventID  string
	Revision int64
	Type     agentproto.EventType
	Payload  json.RawMessage
}

// Terminal reports whether the event settles the task.
func (e Event) Terminal() bool { return e.Type.Terminal() }

// taskEvents buffers a task's events until someone subscribes, so an event
// that overtakes the invoke result is not lost.
type taskEvents struct {
	byRev map[int64]Event
	subs  []chan Event
}

const (
	maxTrackedTasks  = 4096
	maxEventsPerTask = 4096
)

// handleMessage recognizes lifecycle messages: exactly one <event/> in the
// task namespace as a direct child of a normal message.
func (c *Client) handleMessage(m *xmltree.Element) {
	if c.catalogEvent(m) {
		return
	}
	typ := m.AttrValue("type")
	if typ != "" && typ != "normal" {
		return
	}
	var evs []*xmltree.Element
	for _, ch := range m.Children {
		if ch.Is(ns.Task, "event") {
			evs = append(evs, ch)
		}
	}
	if len(evs) == 0 {
		return
	}
	from, err := jid.Parse(m.AttrValue("from"))
	if len(evs) != 1 || err != nil {
		c.log.Warn("ignoring an invalid lifecycle message")
		return
	}
	e := evs[0]
	ev := Event{Endpoint: from.Bare().String(), TaskID: e.AttrValue("task-id"), EventID: e.AttrValue("event-id"), Type: agentproto.EventType(e.AttrValue("type")), Payload: json.RawMessage(e.Text)}
	rev, err := strconv.ParseInt(e.AttrValue("revision"), 10, 64)
	if err != nil || !ids.Valid(ev.TaskID) || !ids.Valid(ev.EventID) || !json.Valid(ev.Payload) || !ev.Type.Known() {
		c.log.Warn("ignoring an invalid lifecycle message", "from", ev.Endpoint)
		return
	}
	ev.Revision = rev
	c.deliver(ev)
}

func (c *Client) deliver(ev Event) {
	k := taskKey{ev.Endpoint, ev.TaskID}
	c.mu.Lock()
	te := c.track(k)
	if old, dup := te.byRev[ev.Revision]; dup {
		c.mu.Unlock()
		if old.EventID != ev.EventID || string(old.Payload) != string(ev.Payload) {
			c.log.Warn("ignoring a conflicting event for an already received revision", "task", ev.TaskID, "revision", ev.Revision)
		}
		return
	}
	if len(te.byRev) < maxEventsPerTask {
		te.byRev[ev.Revision] = ev
	}
	subs := append([]chan Event(nil), te.subs...)
	c.mu.Unlock()
	for _, s := range subs {
		select {
		case s <- ev:
		default:
			// A slow subscriber recovers through task-state.
		}
	}
}

// track returns the buffer for k, creating it. Callers hold c.mu.
func (c *Client) track(k taskKey) *taskEvents {
	te := c.tasks[k]
	if te == nil {
		te = &taskEvents{byRev: map[int64]Event{}}
		c.tasks[k] = te
		c.recent = append(c.recent, k)
		for len(c.recent) > maxTrackedTasks {
			old := c.recent[0]
			c.recent = c.recent[1:]
			if t := c.tasks[old]; t != nil && len(t.subs) == 0 {
				delete(c.tasks, old)
			}
		}
	}
	return te
}

// Subscribe returns the task's events, starting with those already
// received (in revision order), and a function that stops the
// subscription.
func (c *Client) Subscribe(ep jid.JID, taskID string) (<-chan Event, func()) {
	k := taskKey{ep.Bare().String(), taskID}
	ch := make(chan Event, 64)
	c.mu.Lock()
	te := c.track(k)
	var buffered []Event
	for _, ev := range te.byRev {
		buffered = append(buffered, ev)
	}
	te.subs = append(te.subs, ch)
	c.mu.Unlock()
	sortEvents(buffered)
	for _, ev := range buffered {
		select {
		case ch <- ev:
		default:
		}
	}
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, s := range te.subs {
			if s == ch {
				// Clear the vacated slot so the channel and its buffer
				// can be collected.
				last := len(te.subs) - 1
				copy(te.subs[i:], te.subs[i+1:])
				te.subs[last] = nil
				te.subs = te.subs[:last]
				break
			}
		}
	}
}

func sortEvents(evs []Event) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].Revision < evs[j-1].Revision; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}

// Progress is a decoded progress event.
type Progress = agentproto.ProgressPayload

// InputRequest is a decoded input_required object; Revision is set from
// the event or task-state that carried it.
type InputRequest = agentproto.InputRequiredPayload

// Outcome is a settled task as the caller sees it.
type Outcome struct {
	Accepted *Accepted
	State    agentproto.State // completed, failed or cancelled
	Revision int64
	Payload  json.RawMessage // the terminal event payload
}

// CallOptions tune Call.
type CallOptions struct {
	RequestID string
	Deadline  string
	// OnProgress sees every progress event.
	OnProgress func(Progress)
	// OnStatus sees every state change (running, input_required, ...).
	OnStatus func(state agentproto.State)
	// OnInput answers input requests; nil cancels the task when input is
	// needed.
	OnInput func(ctx context.Context, req InputRequest) (json.RawMessage, error)
	// OnAccepted is told the task as soon as it is admitted.
	OnAccepted func(*Accepted)
	// RecoverAfter is how long to wait without events before querying
	// task-state. Default 5s.
	RecoverAfter time.Duration
}

// ErrNeedsInput is returned when the task asked for input and the caller
// cannot answer; the task has been cancelled.
var ErrNeedsInput = errors.New("agentclient: the tool needs input and no input handler is available")

// Follow waits for a task to settle, answering input and reporting
// progress. Lost events are recovered through task-state, so it never
// hangs on a missing message.
func (c *Client) Follow(ctx context.Context, ep jid.JID, acc *Accepted, opts CallOptions) (*Outcome, error) {
	events, stop := c.Subscribe(ep, acc.TaskID)
	defer stop()
	recoverAfter := opts.RecoverAfter
	if recoverAfter <= 0 {
		recoverAfter = 5 * time.Second
	}
	lastRev := acc.Revision
	answered := map[string]bool{}
	lastPercent := -1.0
	timer := time.NewTimer(recoverAfter)
	defer timer.Stop()
	handleInput := func(req InputRequest) error {
		if answered[req.RequestID] {
			return nil
		}
		answered[req.RequestID] = true
		if opts.OnInput == nil {
			reason := "the caller cannot provide input"
			c.Cancel(ctx, ep, acc.TaskID, req.Revision, &reason)
			return ErrNeedsInput
		}
		val, err := opts.OnInput(ctx, req)
		if err != nil {
			return err
		}
		return c.answer(ctx, ep, acc.TaskID, req, val)
	}
	settle := func() (*Outcome, error) {
		res, err := c.Result(ctx, ep, acc.TaskID)
		if err != nil {
			return nil, fmt.Errorf("retrieving the result: %w", err)
		}
		return &Outcome{Accepted: acc, State: res.State, Revision: res.Revision, Payload: res.Payload}, nil
	}
	recoverState := func() (*Outcome, bool, error) {
		st, err := c.State(ctx, ep, acc.TaskID)
		if err != nil {
			return nil, false, fmt.Errorf("recovering task state: %w", err)
		}
		if st.Revision > lastRev {
			lastRev = st.Revision
		}
		if st.Terminal() {
			out, err := settle()
			return out, true, err
		}
		if st.State == agentproto.StateInputRequired && len(st.PendingInput) > 0 {
			var req InputRequest
			if json.Unmarshal(st.PendingInput, &req) == nil {
				req.Revision = st.Revision
				if err := handleInput(req); err != nil {
					return nil, false, err
				}
			}
		}
		return nil, false, nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			out, done, err := recoverState()
			if err != nil || done {
				return out, err
			}
			timer.Reset(recoverAfter)
		case ev := <-events:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(recoverAfter)
			if ev.Revision <= lastRev && !ev.Terminal() {
				continue
			}
			gap := ev.Revision > lastRev+1
			if ev.Revision > lastRev {
				lastRev = ev.Revision
			}
			switch ev.Type {
			case agentproto.EventProgress:
				var p Progress
				if json.Unmarshal(ev.Payload, &p) == nil && opts.OnProgress != nil {
					if p.Percent != nil && *p.Percent < lastPercent {
						p.Percent = nil
					} else if p.Percent != nil {
						lastPercent = *p.Percent
					}
					opts.OnProgress(p)
				}
			case agentproto.EventStatus:
				var s agentproto.StatusPayload
				if json.Unmarshal(ev.Payload, &s) == nil && opts.OnStatus != nil {
					opts.OnStatus(s.State)
				}
			case agentproto.EventInputRequired:
				if opts.OnStatus != nil {
					opts.OnStatus(agentproto.StateInputRequired)
				}
				var req InputRequest
				if json.Unmarshal(ev.Payload, &req) == nil {
					req.Revision = ev.Revision
					if err := handleInput(req); err != nil {
						return nil, err
					}
				}
			case agentproto.EventCompleted, agentproto.EventFailed, agentproto.EventCancelled:
				return &Outcome{Accepted: acc, State: agentproto.State(ev.Type), Revision: ev.Revision, Payload: ev.Payload}, nil
			}
			if gap {
				// A lost revision may have been an input request.
				out, done, err := recoverState()
				if err != nil || done {
					return out, err
				}
			}
		}
	}
}
