// Package taskxmpp is the XMPP wire of urn:xmpp:agent-task:0: it parses
// invoke, provide-input, cancel, task-state-request and task-result-request
// per the protocol's XML Schema, hands them to the task engine, renders the
// replies, and sends lifecycle events as messages.
package taskxmpp

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/xep/xmltree"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

// Engine is what the wire needs from the task engine.
type Engine interface {
	Admit(ctx context.Context, inv tasks.Invocation) (tasks.Accepted, error)
	ProvideInput(ctx context.Context, in tasks.InputSubmission) (string, int64, error)
	Cancel(ctx context.Context, c tasks.CancelRequest) (string, int64, error)
	State(ctx context.Context, caller, endpoint, taskID string) (*tasks.Snapshot, error)
	Result(ctx context.Context, caller, endpoint, taskID string) (*tasks.TerminalResult, error)
}

// Handlers serves the task IQs of every endpoint.
type Handlers struct {
	Engine Engine
	// Lister, when set, serves the task-list extension (list.go).
	Lister Lister
	Log    *slog.Logger
}

// requester is the principal every task operation authorizes by: the
// requester's bare JID. Invoke, provide-input, cancel, the recovery
// queries and the task list all resolve it here, and only here.
func requester(iq component.IQ) string { return iq.From.Bare().String() }

// Register installs the task IQ handlers. They are AccessInvocable: the
// router lets through only requesters who may see the endpoint, may invoke
// it or hold tasks there, so the shape checks below reveal nothing to
// anyone else. Beyond that, task operations authorize by the caller's bare
// JID and invocation by the invocation policy, never by visibility. The
// router answers an IQ of the wrong type (after the access rule, so a
// requester who may not touch the endpoint still gets item-not-found) and
// applies the rate limits.
func (h *Handlers) Register(r *component.Router) {
	if h.Log == nil {
		h.Log = slog.Default()
	}
	get, set := component.IQGet, component.IQSet
	r.HandleEndpointIQ(set, ns.Task, "invoke", component.AccessInvocable, component.IQHandlerFunc(h.invoke))
	r.HandleEndpointIQ(set, ns.Task, "provide-input", component.AccessInvocable, component.IQHandlerFunc(h.provideInput))
	r.HandleEndpointIQ(set, ns.Task, "cancel", component.AccessInvocable, component.IQHandlerFunc(h.cancel))
	r.HandleEndpointIQ(get, ns.Task, "task-state-request", component.AccessInvocable, component.IQHandlerFunc(h.state))
	r.HandleEndpointIQ(get, ns.Task, "task-result-request", component.AccessInvocable, component.IQHandlerFunc(h.result))
	h.registerList(r)
}

func (h *Handlers) invoke(ctx context.Context, iq component.IQ) (*xmltree.Element, error) {
	inv, err := ParseInvoke(iq.Payload)
	if err != nil {
		return nil, err
	}
	inv.Caller = requester(iq)
	inv.Route = iq.ReplyTo().String()
	inv.Endpoint = iq.To.Bare().String()
	// A task that starts in its admission commit announces revision 1
	// only once this <accepted/> is queued ahead of it.
	actx := tasks.AfterReply(ctx, func(release func()) bool { return component.AfterReply(ctx, release) })
	acc, err := h.Engine.Admit(actx, inv)
	if err != nil {
		return nil, h.mapError(err, "invoke")
	}
	return AcceptedElement(acc), nil
}

func (h *Handlers) provideInput(ctx context.Context, iq component.IQ) (*xmltree.Element, error) {
	in, err := ParseProvideInput(iq.Payload)
	if err != nil {
		return nil, err
	}
	in.Caller = requester(iq)
	in.Endpoint = iq.To.Bare().String()
	taskID, rev, err := h.Engine.ProvideInput(ctx, in)
	if err != nil {
		return nil, h.mapError(err, "provide-input")
	}
	return xmltree.New(ns.Task, "input-accepted", "task-id", taskID, "revision", strconv.FormatInt(rev, 10)), nil
}

func (h *Handlers) cancel(ctx context.Context, iq component.IQ) (*xmltree.Element, error) {
	c, err := ParseCancel(iq.Payload)
	if err != nil {
		return nil, err
	}
	c.Caller = requester(iq)
	c.Endpoint = iq.To.Bare().String()
	taskID, rev, err := h.Engine.Cancel(ctx, c)
	if err != nil {
		return nil, h.mapError(err, "cancel")
	}
	return xmltree.New(ns.Task, "cancel-accepted", "task-id", taskID, "revision", strconv.FormatInt(rev, 10)), nil
}

func (h *Handlers) state(ctx context.Context, iq component.IQ) (*xmltree.Element, error) {
	taskID, err := parseTaskID(iq.Payload)
	if err != nil {
		return nil, err
	}
	snap, err := h.Engine.State(ctx, requester(iq), iq.To.Bare().String(), taskID)
	if err != nil {
		return nil, h.mapError(err, "task-state-request")
	}
	return StateElement(snap), nil
}

func (h *Handlers) result(ctx context.Context, iq component.IQ) (*xmltree.Element, error) {
	taskID, err := parseTaskID(iq.Payload)
	if err != nil {
		return nil, err
	}
	res, err := h.Engine.Result(ctx, requester(iq), iq.To.Bare().String(), taskID)
	if err != nil {
		return nil, h.mapError(err, "task-result-request")
	}
	return xmltree.New(ns.Task, "task-result",
		"task-id", taskID,
		"state", string(res.State),
		"revision", strconv.FormatInt(res.Revision, 10),
		"media-type", ns.MediaJSON).WithText(xmltree.JSONText(res.Payload)), nil
}

// mapError turns engine errors into the spec's stanza errors. The text is
// fixed per condition: nothing the caller sent is reflected.
func (h *Handlers) mapError(err error, op string) error {
	var se *agentproto.StanzaError
	switch {
	case errors.As(err, &se):
		return se
	case errors.Is(err, tasks.ErrNotFound):
		return agentproto.ErrItemNotFound()
	case errors.Is(err, tasks.ErrBadRequest):
		return agentproto.ErrBadRequest("malformed request")
	case errors.Is(err, tasks.ErrConflict):
		return agentproto.ErrConflict(conflictText(op))
	case errors.Is(err, tasks.ErrNotAcceptable):
		return agentproto.ErrNotAcceptable(notAcceptableText(err))
	case errors.Is(err, tasks.ErrResourceConstraint):
		return agentproto.ErrResourceConstraint("capacity or size limit reached")
	case errors.Is(err, tasks.ErrDelegationDepth):
		// Not resource-constraint: clients retry that, and the same
		// request can never pass. The reason holds only numbers.
		return agentproto.ErrPolicyViolation("The invocation's delegation depth exceeds this gateway's bound (" +
			strings.TrimPrefix(err.Error(), tasks.ErrDelegationDepth.Error()+": ") + "): a chain of calls back through the gateway is too deep.")
	case errors.Is(err, tasks.ErrUnexpectedRequest):
		return agentproto.ErrUnexpectedRequest("the task is not terminal yet")
	case errors.Is(err, tasks.ErrServiceUnavailable):
		return agentproto.ErrServiceUnavailable()
	}
	h.Log.Error("task operation failed", "op", op, "err", err)
	return agentproto.ErrInternal()
}

func conflictText(op string) string {
	switch op {
	case "invoke":
		return "the request conflicts with the pinned manifest or an earlier request with the same request-id"
	case "provide-input":
		return "the input request is stale, expired, already answered or superseded"
	case "cancel":
		return "the task is already settled or the cancellation conflicts with an earlier one"
	}
	return "conflict"
}

// notAcceptableText returns the engine's safe reason when it offers one.
func notAcceptableText(err error) string {
	var r interface{ SafeReason() string }
	if errors.As(err, &r) {
		return r.SafeReason()
	}
	return "the request was not acceptable"
}

func parseTaskID(p *xmltree.Element) (string, error) {
	id := p.AttrValue("task-id")
	if !ids.Valid(id) {
		return "", agentproto.ErrBadRequest("task-id is missing or not a valid identifier")
	}
	return id, nil
}

// AcceptedElement renders <accepted/>.
func AcceptedElement(a tasks.Accepted) *xmltree.Element {
	return xmltree.New(ns.Task, "accepted",
		"created", xmpptime.Format(a.Created),
		"request-id", a.RequestID,
		"retain-until", xmpptime.Format(a.RetainUntil),
		"revision", strconv.FormatInt(a.Revision, 10),
		"task-id", a.TaskID)
}

// StateElement renders <task-state/>.
func StateElement(s *tasks.Snapshot) *xmltree.Element {
	el := xmltree.New(ns.Task, "task-state",
		"api-version", s.APIVersion,
		"created", xmpptime.Format(s.Created),
		"endpoint", s.Endpoint,
		"result-available", strconv.FormatBool(s.ResultAvailable),
		"retain-until", xmpptime.Format(s.RetainUntil),
		"revision", strconv.FormatInt(s.Revision, 10),
		"state", string(s.State),
		"task-id", s.TaskID,
		"updated", xmpptime.Format(s.Updated))
	if s.Deadline != "" {
		el.SetAttr("deadline", s.Deadline)
	}
	el.Add(xmltree.New(ns.Task, "manifest-hash").Add(HashElement(s.ManifestHash)))
	if len(s.PendingInput) > 0 {
		el.Add(xmltree.New(ns.Task, "pending-input", "media-type", ns.MediaJSON).WithText(xmltree.JSONText(s.PendingInput)))
	}
	return el
}

// HashElement renders an XEP-0300 sha-256 hash.
func HashElement(b64 string) *xmltree.Element {
	return xmltree.New(ns.Hashes, "hash", "algo", ns.HashAlgo).WithText(b64)
}

// EndpointJID parses a bare JID string known to be valid.
func endpointJID(s string) jid.JID {
	j, _ := jid.Parse(s)
	return j
}
