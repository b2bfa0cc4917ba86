package tasks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sort"
	"strconv"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/telemetry"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

// Invocation is one <invoke/> as received, after the XMPP layer has
// authenticated the sender.
type Invocation struct {
	Caller       string // bare JID of the authenticated sender
	Route        string // full JID that sent the IQ
	Endpoint     string // bare JID the IQ was addressed to
	RequestID    string
	Tool         string
	APIVersion   string
	ManifestHash string // XEP-0300 base64 value
	Arguments    []byte // raw JSON text as received
	MediaType    string
	Deadline     string // raw XEP-0082 text, "" when absent
	// Extensions are security-relevant invoke extensions; they enter the
	// replay fingerprint. nil is fine.
	Extensions map[string]string
	// DelegationDepth is how many gateway hops the invocation is below a
	// direct call (0: a direct call). It can only make admission fail, so
	// an unverified claim is safe to honour; it also enters Extensions.
	DelegationDepth int
}

// Accepted is the durable admission returned as <accepted/>.
type Accepted struct {
	TaskID      string
	RequestID   string
	Revision    int64 // always 0
	Created     time.Time
	RetainUntil time.Time
	// Replay is true when the request was answered from the replay record
	// of an earlier identical request: no new task was admitted.
	Replay bool
}

// maxToolName bounds the tool attribute (the manifest limits names far
// below this; anything longer cannot name a tool).
const maxToolName = 1024

func newID(prefix string) string { return ids.New(prefix) }

// newTaskID is a task ID whose 128 random bits follow the creation time in
// fixed-width hex, so that IDs sort by creation and the primary-key index
// grows at its end instead of at random pages. The time is public anyway
// (the created attribute).
func newTaskID(now time.Time) string { return timedID("task-", now) }

// newEventID is time-prefixed for the same reason: the unique index on
// event IDs grows at its end.
func newEventID(now time.Time) string { return timedID("evt-", now) }

// timedID is 128 random bits after the creation time in fixed-width hex.
func timedID(prefix string, now time.Time) string {
	return ids.New(prefix + fmt.Sprintf("%016x", uint64(now.UnixNano())))
}

// Admit validates an invocation against its pinned manifest and durably
// admits it. Order: shape (ErrBadRequest); authorization of the endpoint
// and the exact tool, including approvalRequired and requiredPermissions
// (ErrNotFound, so nothing about the endpoint, version, hash, tool, schema
// or arguments reaches an unauthorized caller); media type and I-JSON
// (ErrNotAcceptable, or ErrResourceConstraint for a limit); then replay
// recognition, which wins over every later check, so an identical retry
// gets its original acceptance even after the active version changed or
// the deadline passed, and a reused request ID with another fingerprint
// gets ErrConflict; then pinning (ErrConflict), the input schema
// (ErrNotAcceptable), the backend (ErrServiceUnavailable) and, at the
// commit, the deadline (ErrNotAcceptable when reached or beyond the tool's
// maximumTimeoutSeconds) and capacity: MaxActive, the caller's and its
// remote domain's active-task quotas and the caller's retained-bytes budget
// (ErrResourceConstraint). Admit
// returns only after the task and its replay record are committed
// (synchronous=FULL), in a group commit shared with concurrent callers.
//
// A version that does not exist, or a tool absent from it, is ErrNotFound
// (nothing to authorize against); an existing version that is not the
// active one, or a manifest hash that does not match, is ErrConflict.
func (e *Engine) Admit(ctx context.Context, inv Invocation) (Accepted, error) {
	if !e.started.Load() || e.closing.Load() {
		return Accepted{}, reject(ErrServiceUnavailable, "engine not running")
	}
	var dl *xmpptime.Instant
	switch {
	case inv.Caller == "" || inv.Endpoint == "" || inv.Route == "":
		return Accepted{}, reject(ErrBadRequest, "missing addresses")
	case !ids.Valid(inv.RequestID):
		return Accepted{}, reject(ErrBadRequest, "invalid request-id")
	case !ids.ValidVersion(inv.APIVersion):
		return Accepted{}, reject(ErrBadRequest, "invalid api-version")
	case inv.Tool == "" || len(inv.Tool) > maxToolName:
		return Accepted{}, reject(ErrBadRequest, "invalid tool name")
	case inv.ManifestHash == "":
		return Accepted{}, reject(ErrBadRequest, "missing manifest hash")
	}
	if inv.Deadline != "" {
		d, err := xmpptime.Parse(inv.Deadline)
		if err != nil {
			return Accepted{}, reject(ErrBadRequest, "invalid deadline")
		}
		dl = &d
	}

	// Authorization of endpoint and exact tool, before anything is revealed.
	_, asp := telemetry.Start(ctx, telemetry.Authorize)
	dir := e.cfg.Directory
	if e.cfg.Policy == nil || !e.cfg.Policy.CanInvoke(inv.Caller, inv.Endpoint) || !dir.Exists(inv.Endpoint) {
		asp.Fail("endpoint")
		asp.End()
		return Accepted{}, reject(ErrNotFound, "endpoint")
	}
	m, ok := dir.Manifest(inv.Endpoint, inv.APIVersion)
	if !ok {
		asp.Fail("version")
		asp.End()
		return Accepted{}, reject(ErrNotFound, "version")
	}
	tool, ok := m.Tool(inv.Tool)
	if !ok || !e.toolAuthorized(inv.Caller, inv.Endpoint, tool) {
		asp.Fail("tool")
		asp.End()
		return Accepted{}, reject(ErrNotFound, "tool")
	}
	asp.End()

	if inv.MediaType != ns.MediaJSON {
		return Accepted{}, reject(ErrNotAcceptable, "arguments media type")
	}
	canon, args, err := ijson.Canonicalize(inv.Arguments, e.argLimits)
	if err != nil {
		if ijson.IsLimit(err) {
			return Accepted{}, reject(ErrResourceConstraint, "arguments exceed a JSON limit")
		}
		return Accepted{}, reject(ErrNotAcceptable, "arguments are not I-JSON")
	}
	deadline := ""
	if dl != nil {
		deadline = dl.String()
	}
	fp := fingerprint(inv, canon, deadline)

	// From here on a rejection is final only for a request that is not a
	// replay: an identical retry gets its original acceptance even if the
	// active version, the backend or anything else changed since, and a
	// reused request ID with another fingerprint gets a conflict. The
	// replay record is looked up only on these paths; on the success path
	// the commit's unique key detects replays.
	refuse := func(cond error, reason string) (Accepted, error) {
		prev, err := e.db.TaskByRequest(ctx, inv.Caller, inv.Endpoint, inv.RequestID)
		if err != nil {
			return Accepted{}, err
		}
		if prev != nil {
			return replayOf(prev, fp)
		}
		return Accepted{}, reject(cond, reason)
	}
	if max := e.cfg.MaxDelegationDepth; max > 0 && inv.DelegationDepth > max {
		return refuse(ErrDelegationDepth, "delegation depth "+strconv.Itoa(inv.DelegationDepth)+" exceeds the bound "+strconv.Itoa(max))
	}
	active, ok := dir.Active(inv.Endpoint)
	if !ok || active.Version != m.Version {
		return refuse(ErrConflict, "api-version is not the active version")
	}
	if m.Hash != inv.ManifestHash {
		return refuse(ErrConflict, "manifest hash does not match")
	}
	s, err := e.schemas.Compile(tool.InputSchema)
	if err != nil {
		return refuse(ErrServiceUnavailable, "input schema unusable")
	}
	if err := s.Validate(args); err != nil {
		if validationTimedOut(err) {
			return refuse(ErrResourceConstraint, "argument validation exceeded its time limit")
		}
		return refuse(ErrNotAcceptable, "arguments do not match the input schema")
	}
	if backend, ok := e.cfg.Backends(inv.Endpoint); !ok || backend == nil {
		return refuse(ErrServiceUnavailable, "no backend for the endpoint")
	}
	maxTimeout := time.Duration(tool.Ext.MaximumTimeoutSeconds) * time.Second
	defTimeout := e.cfg.DefaultTimeout
	if tool.Ext.DefaultTimeoutSeconds > 0 {
		defTimeout = time.Duration(tool.Ext.DefaultTimeoutSeconds) * time.Second
	}
	if maxTimeout > 0 && defTimeout > maxTimeout {
		defTimeout = maxTimeout
	}
	if e.noPersist {
		now := e.clock.Now().UTC()
		return Accepted{TaskID: newID("task-"), RequestID: inv.RequestID, Created: now, RetainUntil: now.Add(e.cfg.Retention)}, nil
	}

	_, csp := telemetry.Start(ctx, telemetry.AdmitCommit)
	defer csp.End()
	// A task with a free backend slot starts in its admission commit (see
	// admission.op). Should that commit fail, the admission alone is tried
	// again: the start then follows as a durable dispatch that retries, as
	// it always did.
	start := !e.holdDispatch.Load()
	ad := &admission{e: e, ctx: ctx, inv: inv, m: m, canon: canon, fp: fp, dl: dl, maxTimeout: maxTimeout, defTimeout: defTimeout}
	err = e.do(func(b *batch) error { return ad.op(b, start) })
	if err != nil && ad.startTried && !errors.Is(err, ErrClosed) {
		e.log.Warn("tasks: admission with start failed; admitting alone", "err", err)
		e.ungate(ad.gated) // a no-op unless the failed op's batch committed
		ad.reset()
		err = e.do(func(b *batch) error { return ad.op(b, false) })
	}
	if err != nil {
		e.ungate(ad.gated)
		ad.reset()
		return Accepted{}, err
	}
	if ad.gated != "" {
		// The task is running and its events are held until the caller
		// has its <accepted/>: released once the reply is queued when the
		// wire can tell (taskxmpp), else now.
		id := ad.gated
		release := func() { e.ungate(id) }
		if after, ok := ctx.Value(afterReplyKey{}).(func(func()) bool); !ok || !after(release) {
			release()
		}
	}
	if ad.result != nil {
		return Accepted{}, ad.result
	}
	return ad.acc, nil
}

// admission is one Admit's commit: the checks at the commit boundary, the
// insert, and, when a backend slot is free, the move to running in the same
// transaction.
type admission struct {
	e          *Engine
	ctx        context.Context
	inv        Invocation
	m          *directory.Manifest
	canon, fp  []byte
	dl         *xmpptime.Instant
	maxTimeout time.Duration
	defTimeout time.Duration

	// Outcomes, set by op.
	acc        Accepted
	result     error
	startTried bool   // op reached the start (its failure falls back)
	gated      string // task started in the commit, its events held
	bound      string // task bound for telemetry
}

func (a *admission) reset() {
	a.acc, a.result, a.startTried, a.gated = Accepted{}, nil, false, ""
	if a.bound != "" {
		telemetry.Forget(a.bound) // a task of an attempt that did not commit
		a.bound = ""
	}
}

func (a *admission) op(b *batch, start bool) error {
	e, inv, m, fp, dl := a.e, a.inv, a.m, a.fp, a.dl
	a.reset()
	// A rejection below is final only when the request is not a replay;
	// the lookup is skipped on the common path, where the insert's unique
	// key detects a replay instead.
	refuse := func(cond error, reason string) error {
		prev, err := b.tx.TaskByRequest(inv.Caller, inv.Endpoint, inv.RequestID)
		if err != nil {
			return err
		}
		if prev != nil {
			a.acc, a.result = replayOf(prev, fp)
		} else {
			a.result = reject(cond, reason)
		}
		return nil
	}
	now := b.now()
	// The deadline is compared exactly, at the commit boundary.
	var eff xmpptime.Instant
	if dl != nil {
		if dl.ReachedBy(now) {
			return refuse(ErrNotAcceptable, "deadline has passed")
		}
		if a.maxTimeout > 0 && !dl.ReachedBy(now.Add(a.maxTimeout)) {
			return refuse(ErrNotAcceptable, "deadline beyond the tool's maximum timeout")
		}
		eff = *dl
	} else {
		eff = xmpptime.FromTime(now.Add(a.defTimeout))
	}
	reason, err := b.capacityRefusal(inv.Caller)
	if err != nil {
		return err
	}
	if reason != "" {
		return refuse(ErrResourceConstraint, reason)
	}
	retain := now.Add(e.cfg.Retention)
	purge := now.Add(e.cfg.ReplayWindow)
	if retain.After(purge) {
		purge = retain
	}
	t := &taskdb.Task{
		ID: newTaskID(now), Caller: inv.Caller, Route: inv.Route, Endpoint: inv.Endpoint,
		RequestID: inv.RequestID, Tool: inv.Tool, APIVersion: m.Version, ManifestHash: m.Hash,
		Arguments: a.canon, Fingerprint: fp, Deadline: eff.String(), DeadlineAt: timerInstant(eff),
		State: agentproto.StateAccepted, Created: now, Updated: now, RetainUntil: retain, PurgeAfter: purge,
		DelegationDepth: inv.DelegationDepth, Owner: e.ownerFor(inv.Endpoint),
	}
	inserted, err := b.tx.InsertTask(t)
	if err != nil {
		return err
	}
	if !inserted {
		// A concurrent identical request committed first (possibly
		// earlier in this batch): answer as its replay.
		prev, err := b.tx.TaskByRequest(inv.Caller, inv.Endpoint, inv.RequestID)
		if err != nil || prev == nil {
			return err
		}
		a.acc, a.result = replayOf(prev, fp)
		return nil
	}
	a.acc = Accepted{TaskID: t.ID, RequestID: t.RequestID, Created: now, RetainUntil: retain}
	if !e.owns(t) {
		// Routed to the instance that holds the endpoint's connection:
		// it counts, arms and dispatches the task.
		return b.queueSignal(signal{Kind: sigDispatch, Task: t.ID, Owner: t.Owner})
	}
	b.delta++
	b.admitted(t)
	id, dls, at := t.ID, t.Deadline, t.DeadlineAt
	if telemetry.Enabled() {
		// Before the dispatch: the task's later stages are children of
		// this call. Forgotten again by Admit if nothing commits.
		telemetry.Bind(a.ctx, id)
		a.bound = id
	}
	b.onCommit(func() { e.armDeadline(id, dls, at) })
	if !start {
		b.onCommit(func() {
			if !e.holdDispatch.Load() {
				e.submitDurable(func(b *batch) error { return b.dispatch(id) })
			}
		})
		return nil
	}
	// Admission and the move to running in one transaction (revision 0,
	// then revision 1 with its status event, exactly as two commits would
	// write them): the task is durable before <accepted/> is sent, and a
	// crash after this commit finds it running and settles it interrupted.
	// Without a free slot it stays accepted and waits, as before.
	a.startTried = true
	out, err := b.dispatchLoaded(t)
	if err != nil {
		return err
	}
	switch out {
	case dispatchHeld:
		ep := t.Endpoint
		b.onCommit(func() { e.hold(id, ep) })
	case dispatchStarted:
		if e.cfg.Notifier != nil {
			// Runs before the batch's events are queued (runBatch).
			b.onCommit(func() { e.gate(id) })
			a.gated = id
		}
	}
	return nil
}

// afterReplyKey carries AfterReply's scheduler.
type afterReplyKey struct{}

// AfterReply returns a context under which Admit holds the lifecycle events
// of a task it admits and starts in one commit until the caller's
// <accepted/> is on its way, so that no event overtakes it: after is given
// the release and runs it once the reply is queued (reporting false, and
// not running it, when it cannot; the events then go at once).
func AfterReply(ctx context.Context, after func(release func()) bool) context.Context {
	return context.WithValue(ctx, afterReplyKey{}, after)
}

// timerInstant is the first whole nanosecond at which i is reached.
func timerInstant(i xmpptime.Instant) time.Time {
	t := i.Time()
	if !i.ReachedBy(t) {
		t = t.Add(time.Nanosecond)
	}
	return t
}

func replayOf(prev *taskdb.Task, fp []byte) (Accepted, error) {
	if !bytes.Equal(prev.Fingerprint, fp) {
		return Accepted{}, reject(ErrConflict, "request-id reused with a different fingerprint")
	}
	return Accepted{TaskID: prev.ID, RequestID: prev.RequestID, Created: prev.Created, RetainUntil: prev.RetainUntil, Replay: true}, nil
}

// toolAuthorized applies trusted local policy to tools that declare an
// approval or permission requirement, failing closed without a policy.
func (e *Engine) toolAuthorized(caller, endpoint string, tool *directory.Tool) bool {
	if !tool.Ext.ApprovalRequired && len(tool.Ext.RequiredPermissions) == 0 {
		return true
	}
	ap := e.cfg.Approvals
	if ap == nil {
		return false
	}
	if tool.Ext.ApprovalRequired && !ap.Approved(caller, endpoint, tool.Name) {
		return false
	}
	for _, p := range tool.Ext.RequiredPermissions {
		if !ap.HasPermission(caller, p) {
			return false
		}
	}
	return true
}

// fingerprint is the SHA-256 over the length-prefixed replay identity:
// caller bare JID, target bare JID, namespace, request ID, tool, API
// version, manifest hash, canonical arguments, deadline as its exact
// canonical instant (or absent), and the security-relevant extensions in
// key order.
func fingerprint(inv Invocation, canonArgs []byte, deadline string) []byte {
	h := sha256.New()
	field(h, "agentgw invoke fingerprint v1")
	field(h, inv.Caller)
	field(h, inv.Endpoint)
	field(h, ns.Task)
	field(h, inv.RequestID)
	field(h, inv.Tool)
	field(h, inv.APIVersion)
	field(h, inv.ManifestHash)
	field(h, string(canonArgs))
	if deadline == "" {
		field(h, "no-deadline")
	} else {
		field(h, "deadline")
		field(h, deadline)
	}
	keys := make([]string, 0, len(inv.Extensions))
	for k := range inv.Extensions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	field(h, strconv.Itoa(len(keys)))
	for _, k := range keys {
		field(h, k)
		field(h, inv.Extensions[k])
	}
	return h.Sum(nil)
}

func field(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}
