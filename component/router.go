package component

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Access says who may reach an endpoint IQ handler.
type Access int

const (
	// AccessVisible handlers serve discovery and metadata: the router
	// answers item-not-found unless the endpoint exists and is visible to
	// the requester.
	AccessVisible Access = iota
	// AccessExisting handlers authorize by themselves: the router only
	// requires that the endpoint exists.
	AccessExisting
	// AccessInvocable handlers serve invocation and task operations, which
	// must not depend on visibility alone: the router answers
	// item-not-found unless the endpoint exists and the requester may see
	// it or passes the invocation check (SetInvocationCheck). So nothing a
	// requester with neither permission sends, whatever its shape or IQ
	// type, tells an existing endpoint from a nonexistent one; the handler
	// may then give precise errors. Without a check, visibility is
	// required (fail closed).
	AccessInvocable
)

// EndpointResolver tells the router whether an endpoint exists and whether
// the requester may see it. Both answers are computed on every call so that
// hidden and nonexistent endpoints cost the same work.
type EndpointResolver interface {
	Resolve(requester, endpoint jid.JID) (exists, visible bool)
}

// IQ types a handler is registered for.
const (
	IQGet = "get"
	IQSet = "set"
)

type payloadKey struct{ space, local string }

// route holds the handlers of one payload, one per IQ type. The access
// rule (endpoint routes only) belongs to the payload, not the type: it is
// applied before the type is looked at, so that a wrong type tells nothing
// an unauthorized requester could not learn otherwise.
type route struct {
	access   Access
	get, set IQHandler
}

func (rt *route) handler(typ string) IQHandler {
	switch typ {
	case IQGet:
		return rt.get
	case IQSet:
		return rt.set
	}
	return nil
}

// wrongType is the one answer to an IQ whose payload is routed but not for
// its type: bad-request (RFC 6120 8.3.3.1: the stanza cannot be processed
// as sent), naming the type the payload takes.
func (rt *route) wrongType() *agentproto.StanzaError {
	if rt.get != nil {
		return agentproto.ErrBadRequest("This request must be an IQ get.")
	}
	return agentproto.ErrBadRequest("This request must be an IQ set.")
}

// add registers h for typ; what is wrong with the registration panics.
func (rt *route) add(typ string, h IQHandler, what string) {
	if h == nil {
		panic("component: nil " + what)
	}
	var slot *IQHandler
	switch typ {
	case IQGet:
		slot = &rt.get
	case IQSet:
		slot = &rt.set
	default:
		panic("component: IQ type " + typ + " is neither get nor set for " + what)
	}
	if *slot != nil {
		panic("component: " + what + " registered twice for IQ " + typ)
	}
	*slot = h
}

// Router dispatches inbound stanzas: by recipient JID first (the gateway
// domain or an endpoint below it), then by payload namespace and name, then
// by IQ type. A routed payload sent with a type it is not registered for
// gets one answer, bad-request; endpoint access rules run before that.
// Register every handler before the component starts; registering twice, a
// nil handler or a type other than get or set panics, since it is a
// programming error.
type Router struct {
	domain   jid.JID
	resolver EndpointResolver
	log      *slog.Logger

	gateway  map[payloadKey]*route
	endpoint map[payloadKey]*route
	message  []MessageHandler
	presence []PresenceHandler
	limit    func(requester jid.JID, space, local string) bool
	invoke   func(ctx context.Context, requester, endpoint jid.JID) bool
	trusted  func(front jid.JID) bool
	// assertable: which principals a trusted front may name.
	assertable func(principal jid.JID) bool
}

// SetLimiter installs a rate limit that every IQ get or set passes first,
// before anything is looked up, so that a refusal is the same
// resource-constraint whether the addressee exists, is hidden or not.
func (r *Router) SetLimiter(allow func(requester jid.JID, space, local string) bool) {
	r.limit = allow
}

// SetInvocationCheck installs the check AccessInvocable routes apply to a
// requester who may not see the endpoint: may it invoke the endpoint, or
// does it hold tasks there. The router runs it for nonexistent endpoints
// as well, so it must do the same work whether the endpoint exists or not.
func (r *Router) SetInvocationCheck(may func(ctx context.Context, requester, endpoint jid.JID) bool) {
	r.invoke = may
}

// NewRouter returns a router for the component domain.
func NewRouter(domain jid.JID, resolver EndpointResolver, log *slog.Logger) *Router {
	if log == nil {
		log = slog.Default()
	}
	return &Router{
		domain:   domain.Domain(),
		resolver: resolver,
		log:      log,
		gateway:  map[payloadKey]*route{},
		endpoint: map[payloadKey]*route{},
	}
}

// Domain is the component domain the router serves.
func (r *Router) Domain() jid.JID { return r.domain }

// HandleGatewayIQ routes IQs of type iqType (IQGet or IQSet) with payload
// {space}local addressed to the gateway domain itself.
func (r *Router) HandleGatewayIQ(iqType, space, local string, h IQHandler) {
	k := payloadKey{space, local}
	rt := r.gateway[k]
	if rt == nil {
		rt = &route{}
	}
	rt.add(iqType, h, "gateway handler for "+space+" "+local)
	r.gateway[k] = rt
}

// HandleEndpointIQ routes IQs of type iqType (IQGet or IQSet) with payload
// {space}local addressed to any endpoint localpart@domain. Both types of
// one payload must have the same access.
func (r *Router) HandleEndpointIQ(iqType, space, local string, access Access, h IQHandler) {
	k := payloadKey{space, local}
	rt := r.endpoint[k]
	if rt == nil {
		rt = &route{access: access}
	} else if rt.access != access {
		panic("component: endpoint handlers for " + space + " " + local + " differ in access")
	}
	rt.add(iqType, h, "endpoint handler for "+space+" "+local)
	r.endpoint[k] = rt
}

// HandleMessage adds a handler that sees every inbound message.
func (r *Router) HandleMessage(h MessageHandler) {
	if h == nil {
		panic("component: nil message handler")
	}
	r.message = append(r.message, h)
}

// HandlePresence adds a handler that sees every inbound presence.
func (r *Router) HandlePresence(h PresenceHandler) {
	if h == nil {
		panic("component: nil presence handler")
	}
	r.presence = append(r.presence, h)
}

// DispatchIQ answers one IQ get or set and returns the reply stanza. Every
// get or set gets exactly one reply. IQ results and errors are not
// dispatched here (the component correlates them with its own requests).
func (r *Router) DispatchIQ(ctx context.Context, iq IQ) *xmltree.Element {
	// The one place the requester is resolved: a trusted front's
	// principal replaces the sender for everything below.
	iq, err := r.principal(iq)
	if err != nil {
		if r.limit != nil && iq.Payload != nil && !r.limit(iq.From.Bare(), iq.Payload.Name.Space, iq.Payload.Name.Local) {
			err = agentproto.ErrResourceConstraint("rate limit reached; retry later")
		}
		return r.errorReply(iq, err)
	}
	payload, err := r.route(ctx, iq)
	if err != nil {
		return r.errorReply(iq, err)
	}
	return NewIQ("result", iq.ID, iq.To, iq.ReplyTo(), payload)
}

func (r *Router) route(ctx context.Context, iq IQ) (*xmltree.Element, error) {
	if iq.Payload == nil {
		return nil, agentproto.ErrBadRequest("")
	}
	k := payloadKey{iq.Payload.Name.Space, iq.Payload.Name.Local}
	if r.limit != nil && !r.limit(iq.From.Bare(), k.space, k.local) {
		return nil, agentproto.ErrResourceConstraint("rate limit reached; retry later")
	}
	to := iq.To
	if to.Domainpart() != r.domain.Domainpart() {
		return nil, agentproto.ErrServiceUnavailable()
	}
	if to.Localpart() == "" {
		rt, ok := r.gateway[k]
		if !ok {
			return nil, agentproto.ErrServiceUnavailable()
		}
		return rt.dispatch(ctx, iq)
	}
	exists, visible := false, false
	if r.resolver != nil {
		exists, visible = r.resolver.Resolve(iq.From.Bare(), to.Bare())
	}
	rt, known := r.endpoint[k]
	if known && rt.access == AccessInvocable && !visible {
		// The check runs before existence is looked at, so that a
		// nonexistent endpoint costs what an unauthorized one costs.
		may := r.invoke != nil && r.invoke(ctx, iq.From.Bare(), to.Bare())
		if !may || !exists {
			return nil, agentproto.ErrItemNotFound()
		}
		return rt.dispatch(ctx, iq)
	}
	switch {
	case !exists:
		return nil, agentproto.ErrItemNotFound()
	case !known && !visible:
		// A hidden endpoint must look exactly like a nonexistent one,
		// whatever the payload.
		return nil, agentproto.ErrItemNotFound()
	case !known:
		return nil, agentproto.ErrServiceUnavailable()
	case rt.access == AccessVisible && !visible:
		return nil, agentproto.ErrItemNotFound()
	}
	return rt.dispatch(ctx, iq)
}

// dispatch runs the handler for the IQ's type, or answers the wrong type.
func (rt *route) dispatch(ctx context.Context, iq IQ) (*xmltree.Element, error) {
	h := rt.handler(iq.Type)
	if h == nil {
		return nil, rt.wrongType()
	}
	return h.HandleIQ(ctx, iq)
}

func (r *Router) errorReply(iq IQ, err error) *xmltree.Element {
	var se *agentproto.StanzaError
	if !errors.As(err, &se) {
		r.log.Error("IQ handler failed", "payload", payloadName(iq.Payload), "from", iq.From.String(), "err", err)
		se = agentproto.ErrInternal()
	}
	reply := NewIQ("error", iq.ID, iq.To, iq.ReplyTo(), nil)
	return reply.Add(se.Element(NSComponent))
}

// DispatchMessage hands a message to every message handler.
func (r *Router) DispatchMessage(ctx context.Context, m Message) {
	for _, h := range r.message {
		h(ctx, m)
	}
}

// DispatchPresence hands a presence to every presence handler.
func (r *Router) DispatchPresence(ctx context.Context, p Presence) {
	for _, h := range r.presence {
		h(ctx, p)
	}
}

func payloadName(e *xmltree.Element) string {
	if e == nil {
		return "(none)"
	}
	return fmt.Sprintf("{%s}%s", e.Name.Space, e.Name.Local)
}
