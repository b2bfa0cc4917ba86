package accbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
)

// liveRun is a run in flight: the server routes its frames here.
type liveRun struct {
	runID       string
	connectorID string

	// Frames that change the run's course go through in; progress-like
	// run events are coalesced into latest so a flood costs nothing.
	in       chan *frame
	progMu   sync.Mutex
	latest   *frame
	dropped  int
	progKick chan struct{}

	sessMu  sync.Mutex
	sess    *session
	sessChg chan struct{} // closed and replaced on every session change
}

func newLiveRun(runID, connectorID string, sess *session) *liveRun {
	return &liveRun{runID: runID, connectorID: connectorID, in: make(chan *frame, 16),
		progKick: make(chan struct{}, 1), sess: sess, sessChg: make(chan struct{})}
}

// progressLike are run events that only inform: the latest one wins.
func progressLike(f *frame) bool {
	if f.Type != TypeRunEvent {
		return false
	}
	switch f.Event {
	case EventCompletion, EventError:
		return false
	}
	return true
}

// deliver queues a frame without blocking the session's reader. A run
// whose course-changing queue is full (a connector misbehaving) loses
// the frame, and the connector hears 4001.
func (lr *liveRun) deliver(f *frame) bool {
	if progressLike(f) {
		lr.progMu.Lock()
		if lr.latest != nil {
			lr.dropped++
		}
		lr.latest = f
		lr.progMu.Unlock()
		select {
		case lr.progKick <- struct{}{}:
		default:
		}
		return true
	}
	select {
	case lr.in <- f:
		return true
	default:
		if s := lr.session(); s != nil {
			s.sendError(ErrInvalidRequest, "too many messages for this run", lr.runID)
		}
		return true
	}
}

func (lr *liveRun) takeProgress() *frame {
	lr.progMu.Lock()
	defer lr.progMu.Unlock()
	f := lr.latest
	lr.latest = nil
	return f
}

func (lr *liveRun) session() *session {
	lr.sessMu.Lock()
	defer lr.sessMu.Unlock()
	return lr.sess
}

func (lr *liveRun) setSession(s *session) {
	lr.sessMu.Lock()
	lr.sess = s
	close(lr.sessChg)
	lr.sessChg = make(chan struct{})
	lr.sessMu.Unlock()
}

func (lr *liveRun) watch() (*session, <-chan struct{}) {
	lr.sessMu.Lock()
	defer lr.sessMu.Unlock()
	return lr.sess, lr.sessChg
}

// send writes to the run's connector, if it is connected.
func (lr *liveRun) send(v any) error {
	s := lr.session()
	if s == nil || !s.alive() {
		return errors.New("the connector is not connected")
	}
	return s.send(v)
}

// sink is where a run's outcome goes: a task (tasks.Run) or a chat turn.
type sink interface {
	progress(p tasks.Progress)
	approve(ctx context.Context, a approval) (granted bool, reason string, err error)
	complete(payload json.RawMessage)
	fail(f tasks.Failure)
	cancelled(reason string)
	cancelRequested() <-chan struct{}
	caller() string
}

type approval struct {
	id, action, risk string
	expires          time.Time
}

// runRequest is what create_run carries.
type runRequest struct {
	Goal          string          `json:"goal"`
	ContextBundle json.RawMessage `json:"context_bundle,omitempty"`
	Constraints   *constraints    `json:"constraints,omitempty"`
}

type constraints struct {
	MaxTokens      *int64   `json:"max_tokens,omitempty"`
	TimeoutSeconds *int64   `json:"timeout_seconds,omitempty"`
	Tools          []string `json:"tools,omitempty"`
}

// errShuttingDown: the gateway stopped while the run was in flight.
var errShuttingDown = errors.New("gateway shutting down")

// execute drives one run to its end. key is the durable mapping key (the
// task id, or a chat key); it returns without settling only when the
// gateway shuts down.
func (a *Agent) execute(ctx context.Context, key string, req runRequest, deadline time.Time, out sink) {
	s := a.s
	log := s.log.With("endpoint", a.o.Endpoint, "task", key)
	if req.Constraints != nil && len(req.Constraints.Tools) > 0 {
		allowed := map[string]bool{}
		for _, t := range a.Declared() {
			allowed[t] = true
		}
		for _, t := range req.Constraints.Tools {
			if !allowed[t] {
				out.fail(tasks.Failure{Code: agentproto.CodeACCToolNotDeclared, Message: "constraints.tools names a tool the agent does not declare"})
				return
			}
		}
	}
	// Wait (up to the accept timeout) for the connector and the agent.
	sess := a.waitConnected(ctx, s.o.AcceptTimeout)
	if ctx.Err() != nil {
		return
	}
	if sess == nil {
		out.fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "the agent's connector is not connected", Retryable: true})
		return
	}
	// One run per task, durably, before anything is sent: the insert is
	// the check (task_id is the key).
	runID := NewConnectorID()
	r, created, err := s.o.Store.CreateRun(ctx, accdb.Run{RunID: runID, TaskID: key, ConnectorID: sess.conn.ID, AgentID: a.agentID})
	if err != nil {
		out.fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "the gateway's store is unavailable", Retryable: true})
		return
	}
	if !created {
		log.Warn("acc: the task already has a run; not creating another", "run", r.RunID)
		if r.State != accdb.RunDone {
			s.o.Store.SetRunState(ctx, r.RunID, accdb.RunOrphaned)
		}
		out.fail(tasks.Failure{Code: agentproto.CodeInterrupted, Message: "the run of this task was interrupted; it is not started twice", Retryable: true})
		return
	}
	lr := newLiveRun(r.RunID, sess.conn.ID, sess)
	s.addRun(lr)
	defer s.removeRun(lr)
	d := &driver{a: a, lr: lr, out: out, req: req, deadline: deadline, log: log, key: key}
	err = d.loop(ctx)
	state := accdb.RunDone
	if errors.Is(err, errShuttingDown) {
		// Cancel now if we can; otherwise on the connector's return.
		if d.cancelRun() != nil {
			state = accdb.RunOrphaned
		}
	} else if d.orphan {
		state = accdb.RunOrphaned
	}
	// A late run_cancelled for it is taken silently; a cancel the
	// connector has not confirmed holds the agent for the next run.
	s.settled.noteEnded(lr.runID, lr.connectorID, agentKey(a.connector, a.agentID), d.cancelSent && !d.connectorDone && !d.orphan, d.cancelledAt)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.o.Store.SetRunState(sctx, lr.runID, state); err != nil {
		log.Warn("acc: cannot record the run's end", "run", lr.runID, "error", err)
	}
}

// waitConnected waits for a live session with the agent declared.
func (a *Agent) waitConnected(ctx context.Context, wait time.Duration) *session {
	t := time.NewTimer(wait)
	defer t.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if id := a.s.connectorID(a.connector); id != "" {
			if sess := a.s.session(id); sess != nil && sess.alive() && a.Declared() != nil {
				return sess
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			return nil
		case <-tick.C:
		}
	}
}

// driver is the state of one run's loop.
type driver struct {
	a        *Agent
	lr       *liveRun
	out      sink
	req      runRequest
	deadline time.Time
	log      interface {
		Info(string, ...any)
		Warn(string, ...any)
		Error(string, ...any)
	}
	key    string
	orphan bool // the connector may still run it: cancel_run on return

	accepted   bool
	retries    int
	cancelling bool
	approving  bool

	approvalID  string
	approvalExp time.Time
	// cancelSent: cancel_run went out; connectorDone: the connector ended
	// the run (run_cancelled, completion, error).
	cancelSent    bool
	cancelledAt   time.Time // the first cancel_run
	connectorDone bool
	// busyRelease wakes a run bounced 4005 when the cancelled run that
	// holds its agent is confirmed.
	busyRelease <-chan struct{}
}

// cancelRun sends cancel_run for the run.
func (d *driver) cancelRun() error {
	err := d.lr.send(map[string]any{"type": TypeCancelRun, "run_id": d.lr.runID})
	if err == nil && !d.cancelSent {
		d.cancelSent, d.cancelledAt = true, time.Now()
	}
	return err
}

// denyExpired tells the connector the pending approval expired.
func (d *driver) denyExpired() {
	d.lr.send(map[string]any{"type": TypeApprovalDenied, "approval_id": d.approvalID, "run_id": d.lr.runID,
		"denied_by": "", "reason": "expired"})
}

// approvalExpired reports whether a pending approval ended by expiring
// (err is what the input request returned, nil when unknown).
func (d *driver) approvalExpired(err error) bool {
	if errors.Is(err, tasks.ErrInputExpired) {
		return true
	}
	if errors.Is(err, tasks.ErrInputSuperseded) || d.cancelling {
		return false
	}
	return !d.approvalExp.IsZero() && !time.Now().Before(d.approvalExp)
}

func (d *driver) createRun() error {
	m := map[string]any{"type": TypeCreateRun, "run_id": d.lr.runID, "agent_id": d.a.agentID, "goal": d.req.Goal}
	if len(d.req.ContextBundle) > 0 {
		m["context_bundle"] = d.req.ContextBundle
	}
	if d.req.Constraints != nil {
		m["constraints"] = d.req.Constraints
	}
	return d.lr.send(m)
}

type approvalResult struct {
	id      string
	granted bool
	reason  string
	err     error
}

func (d *driver) loop(ctx context.Context) error {
	s := d.a.s
	if err := d.createRun(); err != nil {
		d.out.fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "the connector connection closed before the run was sent", Retryable: true})
		return nil
	}
	acceptT := time.NewTimer(s.o.AcceptTimeout)
	defer acceptT.Stop()
	var cancelT, graceT, busyT <-chan time.Time
	var deadlineC <-chan time.Time
	if !d.deadline.IsZero() {
		t := time.NewTimer(time.Until(d.deadline))
		defer t.Stop()
		deadlineC = t.C
	}
	approvals := make(chan approvalResult, 1)
	var approvalCancel context.CancelFunc
	defer func() {
		if approvalCancel != nil {
			approvalCancel()
		}
	}()
	cancelReq := d.out.cancelRequested()
	for {
		sess, sessChg := d.lr.watch()
		select {
		case <-ctx.Done():
			if s.closing() {
				return errShuttingDown
			}
			// The task settled elsewhere (its deadline, an expired input,
			// shutdown of the engine): the connector stops too. An
			// approval that expired is denied first (docs/acc-bridge.md).
			if d.approving {
				var err error
				select {
				case r := <-approvals:
					err = r.err
				case <-time.After(time.Second):
				}
				d.approving = false
				if d.approvalExpired(err) {
					d.denyExpired()
				}
			}
			if d.cancelRun() != nil {
				d.orphan = true
			}
			return nil
		case <-sessChg:
			if sess2 := d.lr.session(); sess2 == nil {
				d.log.Warn("acc: connector connection lost during a run; waiting for it to return", "grace", s.o.Grace)
				graceT = time.After(s.o.Grace)
			} else {
				graceT = nil
				d.log.Info("acc: connector returned; the run continues", "run", d.lr.runID)
			}
			_ = sess
		case <-graceT:
			d.orphan = true
			d.out.fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "the connector did not return within the grace period", Retryable: true})
			return nil
		case <-acceptT.C:
			if !d.accepted {
				if d.cancelRun() != nil {
					d.orphan = true
				}
				d.out.fail(tasks.Failure{Code: agentproto.CodeACCAcceptTimeout, Message: "the connector did not accept the run in time", Retryable: true})
				return nil
			}
		case <-d.busyRelease:
			// The cancelled run that held the agent is confirmed: re-send now.
			d.busyRelease = nil
			busyT = nil
			if err := d.createRun(); err != nil {
				d.orphan = true
				d.out.fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "the connector is not connected", Retryable: true})
				return nil
			}
			acceptT.Reset(s.o.AcceptTimeout)
		case <-busyT:
			busyT = nil
			d.busyRelease = nil
			if err := d.createRun(); err != nil {
				d.orphan = true
				d.out.fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "the connector is not connected", Retryable: true})
				return nil
			}
			acceptT.Reset(s.o.AcceptTimeout)
		case <-deadlineC:
			if d.cancelRun() != nil {
				d.orphan = true
			}
			d.out.fail(tasks.Failure{Code: agentproto.CodeDeadlineExpired, Message: "the deadline passed before the run completed"})
			return nil
		case <-cancelReq:
			cancelReq = nil
			d.cancelling = true
			if d.cancelRun() != nil {
				d.orphan = true
				d.out.cancelled("cancelled by the caller; the connector is not connected and is told when it returns")
				return nil
			}
			cancelT = time.After(s.o.CancelTimeout)
		case <-cancelT:
			d.log.Warn("acc: the connector did not confirm cancel_run in time; settling cancelled", "run", d.lr.runID, "timeout", s.o.CancelTimeout)
			d.out.cancelled("cancelled by the caller; the connector did not confirm within " + s.o.CancelTimeout.String())
			return nil
		case <-d.lr.progKick:
			if f := d.lr.takeProgress(); f != nil {
				d.event(f)
			}
		case r := <-approvals:
			d.approving = false
			approvalCancel()
			approvalCancel = nil
			if r.err != nil {
				if errors.Is(r.err, tasks.ErrInputSuperseded) || d.cancelling {
					// The caller cancelled: cancel_run (sent on the
					// cancellation) ends the approval with the run.
					continue
				}
				// Expired (the engine settles the task input-expired): the
				// connector hears approval_denied "expired", then cancel_run.
				// Settled otherwise: cancel_run.
				if d.approvalExpired(r.err) {
					d.denyExpired()
				}
				if d.cancelRun() != nil {
					d.orphan = true
				}
				return nil
			}
			if r.granted {
				d.lr.send(map[string]any{"type": TypeApprovalGranted, "approval_id": r.id, "run_id": d.lr.runID,
					"approved_by": d.out.caller()})
			} else {
				d.lr.send(map[string]any{"type": TypeApprovalDenied, "approval_id": r.id, "run_id": d.lr.runID,
					"denied_by": d.out.caller(), "reason": r.reason})
			}
		case f := <-d.lr.in:
			// Informational events that arrived first are reported first.
			if p := d.lr.takeProgress(); p != nil {
				d.event(p)
			}
			if done := d.frame(ctx, f, approvals, &approvalCancel, acceptT, &busyT); done {
				return nil
			}
		}
	}
}

// frame handles one course-changing frame; true when the run ended.
func (d *driver) frame(ctx context.Context, f *frame, approvals chan approvalResult, approvalCancel *context.CancelFunc, acceptT *time.Timer, busyT *<-chan time.Time) bool {
	s := d.a.s
	switch f.Type {
	case TypeRunAccepted:
		if !d.accepted {
			d.accepted = true
			acceptT.Stop()
			// Not written to the store: open is open, accepted or not, and
			// the write would cost every run an fsync before its progress.
			stage := "accepted"
			if f.Status != "" {
				stage = clip(f.Status, 32)
			}
			d.out.progress(tasks.Progress{Stage: stage, Message: "The connector accepted the run."})
		}
	case TypeRunCancelled:
		d.connectorDone = true
		if d.cancelling {
			d.out.cancelled("cancelled by the caller; the connector confirmed")
		} else {
			d.out.cancelled("the connector cancelled the run")
		}
		return true
	case TypeRunEvent:
		if f.Event == EventCompletion {
			d.connectorDone = true
			d.out.complete(f.Payload)
			return true
		}
		if f.Event == EventError {
			code, msg := errorOf(f.Payload)
			return d.connectorError(code, msg, busyT, acceptT)
		}
	case TypeError:
		return d.connectorError(f.Code, f.Message, busyT, acceptT)
	case TypeApprovalRequest:
		if d.approving {
			d.lr.send(errFrame{Type: TypeError, Code: ErrInvalidRequest, Message: "an approval is already pending for this run", RunID: d.lr.runID})
			return false
		}
		id := f.ApprovalID
		if id == "" || len(id) > maxIDLen {
			id = NewConnectorID()
		}
		risk := f.RiskLevel
		switch risk {
		case "low", "medium", "high", "critical":
		default:
			risk = "unknown"
		}
		if (risk == "high" || risk == "critical" || risk == "unknown") && len(s.o.HighRiskApprovers) > 0 && !contains(s.o.HighRiskApprovers, d.out.caller()) {
			d.log.Warn("acc: a high-risk approval needs an operator-listed approver; denied", "run", d.lr.runID, "risk", risk)
			d.lr.send(map[string]any{"type": TypeApprovalDenied, "approval_id": id, "run_id": d.lr.runID,
				"denied_by": "", "reason": "a " + risk + " risk action needs an approver the operator lists"})
			d.out.progress(tasks.Progress{Stage: "warning", Message: "A " + risk + " risk action was denied: only an operator-listed approver may approve it."})
			return false
		}
		exp := time.Now().Add(s.o.ApprovalTimeout)
		if !d.deadline.IsZero() && d.deadline.Before(exp) {
			exp = d.deadline
		}
		actx, cancel := context.WithCancel(ctx)
		*approvalCancel = cancel
		d.approving = true
		d.approvalID, d.approvalExp = id, exp
		ap := approval{id: id, action: scrub(s.o.Redactor, f.Action), risk: risk, expires: exp}
		go func() {
			granted, reason, err := d.out.approve(actx, ap)
			approvals <- approvalResult{id: id, granted: granted, reason: reason, err: err}
		}()
	case TypeHandoff:
		target := ""
		s.mu.Lock()
		if ag := s.agents[agentKey(d.a.connector, f.ToAgentID)]; ag != nil {
			target = ag.o.Endpoint
		}
		s.mu.Unlock()
		if target == "" {
			d.lr.send(errFrame{Type: TypeError, Code: ErrAgentNotFound, Message: "the handoff target is not an agent this gateway publishes", RunID: d.lr.runID})
			return false
		}
		d.out.progress(tasks.Progress{Stage: "handoff", Message: "The agent hands off to " + target + "; invoke its run tool to continue."})
	}
	return false
}

// connectorError applies the seed's retry policy to an error for the run.
func (d *driver) connectorError(code int, msg string, busyT *<-chan time.Time, acceptT *time.Timer) bool {
	s := d.a.s
	switch code {
	case ErrConnector, ErrAdapter:
		if d.retries < 3 {
			d.retries++
			d.log.Info("acc: connector error; retrying the run at once", "run", d.lr.runID, "code", code, "attempt", d.retries)
			d.accepted = false
			if d.createRun() == nil {
				acceptT.Reset(s.o.AcceptTimeout)
				return false
			}
		}
	case ErrAgentBusy:
		d.accepted = false
		acceptT.Stop()
		wait := s.o.BusyRetry
		msg := "The agent is busy; the run is re-queued in " + wait.String() + "."
		// Busy with a run the gateway cancelled and the connector has not
		// confirmed: re-send as soon as it confirms, and at the latest when
		// acc-notes' 30 s release bound has passed since that cancel.
		if h := s.settled.hold(agentKey(d.a.connector, d.a.agentID)); h != nil {
			if until := time.Until(h.since.Add(releaseBound)); until < wait {
				wait = max(until, 0)
			}
			d.busyRelease = h.released
			msg = "The agent is still busy with a cancelled run; the run is re-sent when the connector confirms that cancel, at the latest in " +
				wait.Round(time.Second).String() + "."
		}
		d.out.progress(tasks.Progress{Stage: "queued", Message: msg})
		*busyT = time.After(wait)
		return false
	case ErrQuotaExceeded:
		d.log.Error("acc: OPERATOR: the connector reports its quota exceeded; the run is stopped", "run", d.lr.runID, "connector", d.a.connector)
	}
	d.connectorDone = true
	d.out.fail(tasks.Failure{Code: agentproto.ACCCode(code), Message: failureText(code, scrub(s.o.Redactor, msg)),
		Retryable: code == ErrConnector || code == ErrAdapter || code == ErrAgentNotFound})
	return true
}

func failureText(code int, msg string) string {
	t := "the connector reported error " + strconv.Itoa(code)
	if msg = clip(msg, 200); msg != "" {
		t += ": " + strconv.Quote(msg)
	}
	return t
}

func errorOf(p json.RawMessage) (int, string) {
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	json.Unmarshal(p, &e)
	if e.Code == 0 {
		e.Code = ErrConnector
	}
	return e.Code, e.Message
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// event maps an informational run event to progress. Tool output and
// commands stay out unless the operator opts in.
func (d *driver) event(f *frame) {
	var p struct {
		Tool     string   `json:"tool"`
		Command  string   `json:"command"`
		Output   string   `json:"output"`
		Message  string   `json:"message"`
		Text     string   `json:"text"`
		Percent  *float64 `json:"percent"`
		Progress *float64 `json:"progress"`
	}
	red := d.a.s.o.Redactor
	// Scrub before anything is cut: a clipped key block would slip past.
	if clean, err := scrubJSON(red, f.Payload); err == nil {
		json.Unmarshal(clean, &p)
	}
	msg := p.Message
	if msg == "" {
		msg = p.Text
	}
	out := tasks.Progress{Stage: clip(f.Event, 32)}
	switch f.Event {
	case EventThinking:
		out.Message = "The agent is thinking."
	case EventToolCall:
		out.Message = "Calling tool " + strconv.Quote(clip(p.Tool, 64))
		if d.a.s.o.ForwardToolOutput && p.Command != "" {
			out.Message += ": " + clip(p.Command, 400)
		}
	case EventToolResult:
		out.Message = "Tool " + strconv.Quote(clip(p.Tool, 64)) + " returned"
		if d.a.s.o.ForwardToolOutput && p.Output != "" {
			out.Message += ": " + clip(p.Output, 400)
		}
	case EventProgress:
		out.Message = clip(msg, 500)
		pct := p.Percent
		if pct == nil && p.Progress != nil {
			v := *p.Progress
			if v <= 1 {
				v *= 100
			}
			pct = &v
		}
		if pct != nil && *pct >= 0 && *pct <= 100 {
			out.Percent = pct
		}
	case EventWarning:
		out.Message = clip(msg, 500)
	default:
		out.Stage = "event"
		out.Message = fmt.Sprintf("The agent reported an event of another kind.")
	}
	out.Message = scrub(red, out.Message)
	d.out.progress(out)
}
