// Package adhoc presents every tool of an endpoint's active manifest as an
// XEP-0050 ad-hoc command with XEP-0004 forms, so that any stock XMPP
// client (Gajim, Converse.js, Movim, Cheogram, Psi, Profanity) can run
// tools, answer input requests and cancel them.
//
// A command is a thin view of one task: the first stage is a form made from
// the tool's inputSchema; submitting it admits a real task through the
// task engine (same authorization, deadlines, quotas, replay and events);
// later stages are rendered from the task's committed state. The request
// ID of the task is derived from the command session ID, so a re-submitted
// stage is the same request (never a second execution) and a session
// outlives a gateway restart exactly where its task does: no session state
// beyond the not-yet-submitted first stage is kept anywhere but the task
// store. docs/adhoc.md has the stanzas and the schema → form mapping.
package adhoc

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/xep/dataform"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Engine is what commands need from the task engine (*tasks.Engine).
type Engine interface {
	Admit(ctx context.Context, inv tasks.Invocation) (tasks.Accepted, error)
	ProvideInput(ctx context.Context, in tasks.InputSubmission) (string, int64, error)
	Cancel(ctx context.Context, c tasks.CancelRequest) (string, int64, error)
	State(ctx context.Context, caller, endpoint, taskID string) (*tasks.Snapshot, error)
	StateByRequest(ctx context.Context, caller, endpoint, requestID string) (*tasks.Snapshot, error)
	Result(ctx context.Context, caller, endpoint, taskID string) (*tasks.TerminalResult, error)
	Events(ctx context.Context, taskID string) ([]tasks.StoredEvent, error)
}

// Policy decides invocation (federation.Policy); visibility is the
// router's.
type Policy interface {
	CanInvoke(principal, endpoint string) bool
}

// Deps is what the command surface needs.
type Deps struct {
	Reader directory.Reader
	Policy Policy
	Engine Engine
	Log    *slog.Logger
	// Runnable tells whether an endpoint has a backend that runs tasks;
	// endpoints without one advertise and list no commands. nil means all.
	Runnable func(endpoint string) bool
	// Progress, fed with every committed event, makes refreshes cheap;
	// nil reads the task's events on each refresh.
	Progress *ProgressCache
	// MaxPending bounds the first-stage sessions held in memory (default
	// 10000); PendingTTL is how long one waits for its submission
	// (default 1h).
	MaxPending int
	PendingTTL time.Duration
	// SettleWait is how long a submitted stage waits for its task to
	// settle or ask for input before it answers with the executing stage,
	// so that a quick tool answers completed with its result at once
	// (default DefaultSettleWait; negative: no wait). MaxWaiting bounds the
	// submissions waiting at once (default 4, a quarter of the component's
	// IQ workers); the others answer at once.
	SettleWait time.Duration
	MaxWaiting int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Service serves the commands of every endpoint.
type Service struct {
	d       Deps
	waiting chan struct{} // one slot per submission waiting for its task

	mu      sync.Mutex
	pending map[string]*pending // session ID → first stage not yet submitted
}

// pending is a first stage shown but not yet submitted: the pinned version
// the form was made from. It is the only session state kept outside the
// task store; losing it (a restart) only means starting the command again.
type pending struct {
	caller, endpoint, node string
	version, hash          string
	expires                time.Time
}

// maxPendingPerCaller bounds one principal's open first stages.
const maxPendingPerCaller = 64

// DefaultSettleWait is how long a submitted stage waits for its task by
// default (docs/adhoc.md).
const DefaultSettleWait = 2 * time.Second

// refreshStage is the StageVar of an executing stage: submitting it (with
// any action but cancel) is a refresh.
const refreshStage = "refresh"

// New makes the service; Register installs its IQ handler.
func New(d Deps) *Service {
	if d.Reader == nil || d.Policy == nil || d.Engine == nil {
		panic("adhoc: New needs a reader, a policy and an engine")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.MaxPending <= 0 {
		d.MaxPending = 10000
	}
	if d.PendingTTL <= 0 {
		d.PendingTTL = time.Hour
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.SettleWait == 0 {
		d.SettleWait = DefaultSettleWait
	}
	if d.MaxWaiting <= 0 {
		d.MaxWaiting = 4
	}
	return &Service{d: d, pending: map[string]*pending{}, waiting: make(chan struct{}, d.MaxWaiting)}
}

// Register installs the command IQ. It is AccessInvocable like invoke: the
// router answers item-not-found, whatever was sent, to a requester who may
// neither see nor invoke the endpoint nor holds a task there. The handler
// itself answers item-not-found, whatever was sent, where the endpoint is
// not open to the requester (open): a requester who holds a task at a
// hidden or deactivated endpoint gets there, and must still not tell it
// from a nonexistent one. The get handler exists only so that a wrong IQ
// type is judged after the same check.
func (s *Service) Register(r *component.Router) {
	r.HandleEndpointIQ(component.IQSet, ns.Commands, "command", component.AccessInvocable, component.IQHandlerFunc(s.command))
	r.HandleEndpointIQ(component.IQGet, ns.Commands, "command", component.AccessInvocable, component.IQHandlerFunc(s.commandGet))
}

// commandGet answers a command sent as an IQ get.
func (s *Service) commandGet(ctx context.Context, iq component.IQ) (*xmltree.Element, error) {
	if !s.open(iq.From.Bare().String(), iq.To.Bare().String()) {
		return nil, agentproto.ErrItemNotFound()
	}
	return nil, agentproto.ErrBadRequest("This request must be an IQ set.")
}

// open tells whether the endpoint's commands are open to the caller: it
// has an active version with a backend, and the caller may invoke it. The
// three checks run whatever the first answers.
func (s *Service) open(caller, ep string) bool {
	_, active := s.d.Reader.Active(ep)
	may := s.d.Policy.CanInvoke(caller, ep)
	run := s.runnable(ep)
	return active && may && run
}

// heldSession is the caller's own submitted session sid on node at ep, or
// nil. It lets a requester who ran a command at an endpoint that is no
// longer open to it (hidden, deactivated, revoked) still refresh, answer
// and cancel that task, as task IQs do: it already knows the endpoint.
func (s *Service) heldSession(ctx context.Context, caller, ep, node, sid string) *tasks.Snapshot {
	if !validSessionID(sid) {
		return nil
	}
	snap, err := s.d.Engine.StateByRequest(ctx, caller, ep, requestID(sid))
	if err != nil || snap == nil || snap.Tool != node {
		return nil
	}
	return snap
}

// Features are the endpoint features the command surface adds: the
// commands feature, where tools can run.
func (s *Service) Features(endpoint string) []string {
	if !s.runnable(endpoint) {
		return nil
	}
	return []string{ns.Commands}
}

func (s *Service) runnable(endpoint string) bool {
	return s.d.Runnable == nil || s.d.Runnable(endpoint)
}

// requestID is the task request ID of a session's first stage.
func requestID(sid string) string { return sid + ".start" }

// Session IDs are "cmd-" + 128 random bits: valid identifiers whose
// derived request IDs are too.
func newSessionID() string { return ids.New("cmd-") }

func validSessionID(sid string) bool {
	return strings.HasPrefix(sid, "cmd-") && ids.Valid(requestID(sid))
}

// Errors. A stale, unknown and another principal's session are one error.
func cmdError(cond *agentproto.StanzaError, app string) *agentproto.StanzaError {
	if app != "" {
		cond.App = xmltree.New(ns.Commands, app)
	}
	return cond
}

func errBadSession() error {
	return cmdError(agentproto.ErrBadRequest("Unknown or expired command session: start the command again."), "bad-sessionid")
}

func errBadAction(text string) error {
	return cmdError(agentproto.ErrBadRequest(text), "bad-action")
}

func errBadPayload(text string) error {
	return cmdError(agentproto.ErrBadRequest(text), "bad-payload")
}

var actions = map[string]bool{"execute": true, "next": true, "prev": true, "complete": true, "cancel": true}

// command handles every <command/> IQ set.
func (s *Service) command(ctx context.Context, iq component.IQ) (*xmltree.Element, error) {
	c := iq.Payload
	node := c.AttrValue("node")
	sid := c.AttrValue("sessionid")
	action := c.AttrValue("action")
	caller, ep := iq.From.Bare().String(), iq.To.Bare().String()
	// Before anything about the request is judged: an endpoint that is not
	// open to the caller answers item-not-found, byte for byte what a
	// nonexistent one answers, unless this is the caller's own session.
	if !s.open(caller, ep) && s.heldSession(ctx, caller, ep, node, sid) == nil {
		return nil, agentproto.ErrItemNotFound()
	}
	if action == "" {
		action = "execute"
	}
	if !actions[action] {
		return nil, cmdError(agentproto.ErrBadRequest("The action is not one of execute, next, prev, complete or cancel."), "malformed-action")
	}
	if node == "" || len(node) > 1024 {
		return nil, agentproto.ErrItemNotFound()
	}
	form, err := submitted(c)
	if err != nil {
		return nil, err
	}
	route := iq.ReplyTo().String()
	if sid == "" {
		if action != "execute" && action != "complete" {
			return nil, errBadAction("A command starts with the execute action.")
		}
		return s.start(ctx, caller, route, ep, node, form)
	}
	if !validSessionID(sid) {
		return nil, errBadSession()
	}
	if p := s.takePending(sid, caller, ep, node); p != nil {
		switch {
		case action == "cancel":
			s.dropPending(sid)
			return stage(node, sid, "canceled").Add(note("info", "The command was cancelled before it started.")), nil
		case form == nil:
			return s.firstStage(ctx, node, sid, p)
		default:
			return s.submitStart(ctx, caller, route, node, sid, p, form)
		}
	}
	snap, err := s.d.Engine.StateByRequest(ctx, caller, ep, requestID(sid))
	if err != nil || snap.Tool != node {
		if err != nil && !errors.Is(err, tasks.ErrNotFound) && !errors.Is(err, tasks.ErrBadRequest) {
			return nil, s.mapError(err)
		}
		return nil, errBadSession()
	}
	switch {
	case action == "prev":
		return nil, errBadAction("A command stage that has run cannot go back.")
	case action == "cancel":
		return s.cancel(ctx, caller, ep, node, sid, snap)
	case form != nil:
		return s.submitLater(ctx, caller, route, ep, node, sid, snap, form)
	}
	return s.render(ctx, caller, ep, node, sid, snap)
}

// submitted returns the command's submitted form, nil when it carries none
// (a refresh), or a bad-payload error.
func submitted(c *xmltree.Element) (*dataform.Form, error) {
	xs := c.ChildrenNamed(ns.Data, "x")
	if len(xs) == 0 {
		return nil, nil
	}
	if len(xs) > 1 {
		return nil, errBadPayload("A command stage carries at most one data form.")
	}
	f, err := dataform.Parse(xs[0])
	if errors.Is(err, dataform.ErrLimit) {
		return nil, errBadPayload("The form exceeds the limits: at most 256 fields, 64 values per field, 64 KiB per value and 1 MiB in all.")
	}
	if err != nil {
		return nil, errBadPayload("The form is not a well-formed data form (duplicate or missing field names?).")
	}
	switch f.Type {
	case dataform.TypeSubmit:
		return f, nil
	case dataform.TypeCancel:
		return nil, nil
	}
	return nil, errBadPayload("The form must be of type submit.")
}

// tool resolves a command node at the active version: the tool of that
// name, which the caller may invoke. Anything else is item-not-found, as
// for a nonexistent tool.
func (s *Service) tool(caller, ep, node string) (*directory.Manifest, *directory.Tool, error) {
	m, ok := s.d.Reader.Active(ep)
	if !ok || !s.d.Policy.CanInvoke(caller, ep) || !s.runnable(ep) {
		return nil, nil, agentproto.ErrItemNotFound()
	}
	t, ok := m.Tool(node)
	if !ok {
		return nil, nil, agentproto.ErrItemNotFound()
	}
	return m, t, nil
}

func (s *Service) start(ctx context.Context, caller, route, ep, node string, form *dataform.Form) (*xmltree.Element, error) {
	m, _, err := s.tool(caller, ep, node)
	if err != nil {
		return nil, err
	}
	sid := newSessionID()
	p := &pending{caller: caller, endpoint: ep, node: node, version: m.Version, hash: m.Hash, expires: s.d.Now().Add(s.d.PendingTTL)}
	if form != nil {
		// A client that sends its arguments with the first execute skips
		// the form stage.
		return s.submitStart(ctx, caller, route, node, sid, p, form)
	}
	if err := s.putPending(sid, p); err != nil {
		return nil, err
	}
	return s.firstStage(ctx, node, sid, p)
}

// firstStage renders the input form of the pinned tool.
func (s *Service) firstStage(_ context.Context, node, sid string, p *pending) (*xmltree.Element, error) {
	m, ok := s.d.Reader.Manifest(p.endpoint, p.version)
	if !ok {
		return nil, errBadSession()
	}
	t, ok := m.Tool(node)
	if !ok {
		return nil, errBadSession()
	}
	fs := buildForm(t.InputSchema)
	f := dataform.Form{Type: dataform.TypeForm, Title: title(t)}
	if t.Description != "" {
		f.Instructions = strings.Split(t.Description, "\n")
	}
	f.Fields = append([]dataform.Field{{Var: StageVar, Type: dataform.FieldHidden, Values: []string{"start"}}}, fs.fields...)
	return stage(node, sid, "executing").Add(actionsEl("complete", "complete"), f.Element()), nil
}

func title(t *directory.Tool) string {
	if t.Title != "" {
		return t.Title
	}
	return t.Name
}

// submitStart admits the first stage's task. The request ID comes from the
// session, so the same stage submitted again replays the admission.
func (s *Service) submitStart(ctx context.Context, caller, route, node, sid string, p *pending, form *dataform.Form) (*xmltree.Element, error) {
	if st := form.Value(StageVar); st != "" && st != "start" {
		return nil, errBadPayload("The form belongs to another stage of this command.")
	}
	m, ok := s.d.Reader.Manifest(p.endpoint, p.version)
	if !ok {
		return nil, errBadSession()
	}
	t, ok := m.Tool(node)
	if !ok {
		return nil, errBadSession()
	}
	args, err := buildForm(t.InputSchema).arguments(form.Values())
	if err != nil {
		return nil, formStageError(err)
	}
	acc, err := s.d.Engine.Admit(ctx, tasks.Invocation{
		Caller: caller, Route: route, Endpoint: p.endpoint, RequestID: requestID(sid),
		Tool: node, APIVersion: p.version, ManifestHash: p.hash,
		Arguments: args, MediaType: ns.MediaJSON,
	})
	if err != nil {
		if errors.Is(err, tasks.ErrConflict) {
			return nil, agentproto.ErrConflict("This stage was already submitted with other values, or the tool's version is no longer active: start the command again.")
		}
		return nil, s.mapError(err)
	}
	s.dropPending(sid)
	snap, err := s.d.Engine.State(ctx, caller, p.endpoint, acc.TaskID)
	if err != nil {
		return nil, s.mapError(err)
	}
	return s.render(ctx, caller, p.endpoint, node, sid, s.awaitSettled(ctx, caller, p.endpoint, snap))
}

func formStageError(err error) error {
	var fe *formError
	if errors.As(err, &fe) {
		return errBadPayload(fe.msg)
	}
	return errBadPayload("The form could not be read.")
}

// submitLater handles a form sent once the task exists: the first stage
// again (a replay, or a conflict when the values differ) or the answer to
// the pending input request.
func (s *Service) submitLater(ctx context.Context, caller, route, ep, node, sid string, snap *tasks.Snapshot, form *dataform.Form) (*xmltree.Element, error) {
	if isRefresh(form, snap) {
		return s.render(ctx, caller, ep, node, sid, snap)
	}
	st := form.Value(StageVar)
	if st == "start" || (st == "" && snap.State != agentproto.StateInputRequired) {
		p := &pending{caller: caller, endpoint: ep, node: node, version: snap.APIVersion, hash: snap.ManifestHash}
		return s.submitStart(ctx, caller, route, node, sid, p, form)
	}
	reqID, rev, ok := parseInputStage(st)
	if st == "" {
		// A client that drops hidden fields answers the pending request.
		in, ok2 := pendingInput(snap)
		if !ok2 {
			return nil, errBadPayload("The task is not waiting for input.")
		}
		reqID, rev, ok = in.RequestID, snap.Revision, true
	}
	if !ok {
		return nil, errBadPayload("The form belongs to no stage of this command.")
	}
	// The request's schema: pending now, or (a re-submitted stage that was
	// answered) from its input_required event, so that the same values
	// make the same answer and the engine replays it.
	schemaJSON, ok := s.inputSchema(ctx, snap, reqID)
	if !ok {
		return nil, agentproto.ErrConflict("This input stage was already answered with other values, has expired or was superseded.")
	}
	args, err := buildForm(schemaJSON).arguments(form.Values())
	if err != nil {
		return nil, formStageError(err)
	}
	_, _, err = s.d.Engine.ProvideInput(ctx, tasks.InputSubmission{
		Caller: caller, Endpoint: ep, TaskID: snap.TaskID, RequestID: reqID,
		ExpectedRevision: rev, MediaType: ns.MediaJSON, Input: args,
	})
	if err != nil {
		if errors.Is(err, tasks.ErrConflict) {
			return nil, agentproto.ErrConflict("This input stage was already answered with other values, has expired or was superseded.")
		}
		if errors.Is(err, tasks.ErrNotFound) {
			return nil, errBadSession()
		}
		return nil, s.mapError(err)
	}
	fresh, err := s.d.Engine.State(ctx, caller, ep, snap.TaskID)
	if err != nil {
		return nil, s.mapError(err)
	}
	return s.render(ctx, caller, ep, node, sid, s.awaitSettled(ctx, caller, ep, fresh))
}

// isRefresh tells whether a form sent once the task exists only asks for
// the current stage: it names the executing stage, or it carries no
// values (Converse.js sends next and complete with an empty submit form)
// and does not name the input request now pending, which an empty answer
// may really be meant for.
func isRefresh(form *dataform.Form, snap *tasks.Snapshot) bool {
	st := form.Value(StageVar)
	if st == refreshStage {
		return true
	}
	for _, f := range form.Fields {
		if f.Var != StageVar && f.Var != dataform.FormTypeVar && len(f.Values) > 0 {
			return false
		}
	}
	if in, ok := pendingInput(snap); ok {
		if reqID, _, ok := parseInputStage(st); ok && reqID == in.RequestID {
			return false
		}
	}
	return true
}

// settled tells whether a task needs nothing more from a waiting stage.
func settled(snap *tasks.Snapshot) bool {
	return snap.State.Terminal() || snap.State == agentproto.StateInputRequired
}

// awaitSettled waits up to SettleWait for a just-submitted task to settle
// or ask for input, woken by its committed events (and a slow poll, for
// commits of another process), and returns its latest state. When
// MaxWaiting submissions already wait it returns at once.
func (s *Service) awaitSettled(ctx context.Context, caller, ep string, snap *tasks.Snapshot) *tasks.Snapshot {
	if settled(snap) || s.d.SettleWait < 0 {
		return snap
	}
	select {
	case s.waiting <- struct{}{}:
		defer func() { <-s.waiting }()
	default:
		return snap
	}
	var woke <-chan struct{}
	if s.d.Progress != nil {
		ch, stop := s.d.Progress.watch(snap.TaskID)
		defer stop()
		woke = ch
	}
	timer := time.NewTimer(s.d.SettleWait)
	defer timer.Stop()
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	for {
		// Read first: an event committed before the watch began is seen.
		fresh, err := s.d.Engine.State(ctx, caller, ep, snap.TaskID)
		if err != nil {
			return snap
		}
		snap = fresh
		if settled(snap) {
			return snap
		}
		select {
		case <-ctx.Done():
			return snap
		case <-timer.C:
			return snap
		case <-woke:
		case <-poll.C:
		}
	}
}

func (s *Service) cancel(ctx context.Context, caller, ep, node, sid string, snap *tasks.Snapshot) (*xmltree.Element, error) {
	// A running task's revision moves with every progress event, so a
	// cancel at the revision read a moment ago can meet a conflict that is
	// no settlement and no other cancel: read again and retry, so that
	// "canceled" is never answered for a cancel that did nothing.
	requested := false // this command's cancel was accepted
	for attempt := 0; attempt < 5 && !snap.State.Terminal() && snap.State != agentproto.StateCancelling; attempt++ {
		_, _, err := s.d.Engine.Cancel(ctx, tasks.CancelRequest{
			Caller: caller, Endpoint: ep, TaskID: snap.TaskID, ExpectedRevision: snap.Revision,
			HasReason: true, Reason: "cancelled through an ad-hoc command",
		})
		requested = requested || err == nil
		switch {
		case err == nil, errors.Is(err, tasks.ErrConflict):
			// A conflict is a race with settlement, another cancel or a
			// progress event: the state read below tells which.
		case errors.Is(err, tasks.ErrServiceUnavailable):
			return nil, agentproto.NewError(agentproto.CondFeatureNotImplemented, "This tool's backend does not support cancellation.")
		default:
			return nil, s.mapError(err)
		}
		fresh, ferr := s.d.Engine.State(ctx, caller, ep, snap.TaskID)
		if ferr != nil {
			break
		}
		snap = fresh
		if err == nil {
			break
		}
	}
	if !snap.State.Terminal() && snap.State != agentproto.StateCancelling {
		return nil, agentproto.ErrResourceConstraint("The task changed while it was being cancelled; send cancel again.")
	}
	// A backend that stops at once settles the task before the state is
	// read again: that is this cancel's doing, not an earlier end.
	msg := "Cancellation requested; the task is " + stateText(snap.State) + "."
	if snap.State.Terminal() && !requested {
		msg = "The task had already finished: it is " + stateText(snap.State) + "."
	}
	return stage(node, sid, "canceled").Add(note("info", msg)), nil
}

func stateText(st agentproto.State) string { return strings.ReplaceAll(string(st), "_", " ") }

// mapError turns engine errors into stanza errors with fixed texts.
func (s *Service) mapError(err error) error {
	var se *agentproto.StanzaError
	switch {
	case errors.As(err, &se):
		return se
	case errors.Is(err, tasks.ErrNotFound):
		return agentproto.ErrItemNotFound()
	case errors.Is(err, tasks.ErrNotAcceptable):
		return errBadPayload("The values do not fit the tool's input schema: " + safeReason(err))
	case errors.Is(err, tasks.ErrResourceConstraint):
		return agentproto.ErrResourceConstraint("A capacity, quota or size limit was reached; retry later.")
	case errors.Is(err, tasks.ErrDelegationDepth):
		return agentproto.ErrPolicyViolation("The chain of calls back through the gateway is too deep.")
	case errors.Is(err, tasks.ErrServiceUnavailable):
		return agentproto.ErrServiceUnavailable()
	case errors.Is(err, tasks.ErrBadRequest):
		return agentproto.ErrBadRequest("The request is malformed.")
	case errors.Is(err, tasks.ErrConflict):
		return agentproto.ErrConflict("The request conflicts with the task's state.")
	}
	s.d.Log.Error("ad-hoc command failed", "err", err)
	return agentproto.ErrInternal()
}

func safeReason(err error) string {
	var r interface{ SafeReason() string }
	if errors.As(err, &r) {
		return r.SafeReason()
	}
	return "rejected."
}

// stage starts a <command/> reply.
func stage(node, sid, status string) *xmltree.Element {
	return xmltree.New(ns.Commands, "command", "node", node, "sessionid", sid, "status", status)
}

func note(typ, text string) *xmltree.Element {
	return xmltree.New(ns.Commands, "note", "type", typ).WithText(xmltree.Sanitize(text))
}

// actionsEl lists the allowed actions, execute naming the default.
func actionsEl(def string, allowed ...string) *xmltree.Element {
	a := xmltree.New(ns.Commands, "actions", "execute", def)
	for _, x := range allowed {
		a.Add(xmltree.New(ns.Commands, x))
	}
	return a
}

// ---- first-stage sessions -------------------------------------------------

func (s *Service) putPending(sid string, p *pending) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.d.Now()
	mine := 0
	var oldest string
	for id, q := range s.pending {
		if now.After(q.expires) {
			delete(s.pending, id)
			continue
		}
		if q.caller == p.caller {
			mine++
			if oldest == "" || q.expires.Before(s.pending[oldest].expires) {
				oldest = id
			}
		}
	}
	if mine >= maxPendingPerCaller && oldest != "" {
		delete(s.pending, oldest) // the caller's oldest untouched form goes first
	}
	if len(s.pending) >= s.d.MaxPending {
		return agentproto.ErrResourceConstraint("Too many command sessions are open; retry later.")
	}
	s.pending[sid] = p
	return nil
}

// takePending returns the first stage of sid when it belongs to this
// caller, endpoint and node.
func (s *Service) takePending(sid, caller, ep, node string) *pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[sid]
	if p == nil || p.caller != caller || p.endpoint != ep || p.node != node {
		return nil
	}
	if s.d.Now().After(p.expires) {
		delete(s.pending, sid)
		return nil
	}
	return p
}

func (s *Service) dropPending(sid string) {
	s.mu.Lock()
	delete(s.pending, sid)
	s.mu.Unlock()
}

// Pending is the number of first stages held in memory.
func (s *Service) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}
