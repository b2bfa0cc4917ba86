package component

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/xmltree"
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

type payloadKey struct{ space, local string }

type endpointRoute struct {
	access  Access
	handler IQHandler
}

// Router dispatches inbound stanzas: by recipient JID first (the gateway
// domain or an endpoint below it), then by payload namespace and name.
// Register every handler before the component starts; registering twice or
// a nil handler panics, since it is a programming error.
type Router struct {
	domain   jid.JID
	resolver EndpointResolver
	log      *slog.Logger

	gateway  map[payloadKey]IQHandler
	endpoint map[payloadKey]endpointRoute
	message  []MessageHandler
	presence []PresenceHandler
	limit    func(requester jid.JID, space, local string) bool
	invoke   func(ctx context.Context, requester, endpoint jid.JID) bool
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
		gateway:  map[payloadKey]IQHandler{},
		endpoint: map[payloadKey]endpointRoute{},
	}
}

// Domain is the component domain the router serves.
func (r *Router) Domain() jid.JID { return r.domain }

// HandleGatewayIQ routes IQ get/set with payload {space}local addressed to
// the gateway domain itself.
func (r *Router) HandleGatewayIQ(space, local string, h IQHandler) {
	k := payloadKey{space, local}
	if h == nil {
		panic("component: nil gateway handler for " + space + " " + local)
	}
	if _, dup := r.gateway[k]; dup {
		panic("component: gateway handler registered twice for " + space + " " + local)
	}
	r.gateway[k] = h
}

// HandleEndpointIQ routes IQ get/set with payload {space}local addressed to
// any endpoint localpart@domain.
func (r *Router) HandleEndpointIQ(space, local string, access Access, h IQHandler) {
	k := payloadKey{space, local}
	if h == nil {
		panic("component: nil endpoint handler for " + space + " " + local)
	}
	if _, dup := r.endpoint[k]; dup {
		panic("component: endpoint handler registered twice for " + space + " " + local)
	}
	r.endpoint[k] = endpointRoute{access: access, handler: h}
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
	payload, err := r.route(ctx, iq)
	if err != nil {
		return r.errorReply(iq, err)
	}
	return NewIQ("result", iq.ID, iq.To, iq.From, payload)
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
		h, ok := r.gateway[k]
		if !ok {
			return nil, agentproto.ErrServiceUnavailable()
		}
		return h.HandleIQ(ctx, iq)
	}
	exists, visible := false, false
	if r.resolver != nil {
		exists, visible = r.resolver.Resolve(iq.From.Bare(), to.Bare())
	}
	route, known := r.endpoint[k]
	if known && route.access == AccessInvocable && !visible {
		// The check runs before existence is looked at, so that a
		// nonexistent endpoint costs what an unauthorized one costs.
		may := r.invoke != nil && r.invoke(ctx, iq.From.Bare(), to.Bare())
		if !may || !exists {
			return nil, agentproto.ErrItemNotFound()
		}
		return route.handler.HandleIQ(ctx, iq)
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
	case route.access == AccessVisible && !visible:
		return nil, agentproto.ErrItemNotFound()
	}
	return route.handler.HandleIQ(ctx, iq)
}

func (r *Router) errorReply(iq IQ, err error) *xmltree.Element {
	var se *agentproto.StanzaError
	if !errors.As(err, &se) {
		r.log.Error("IQ handler failed", "payload", payloadName(iq.Payload), "from", iq.From.String(), "err", err)
		se = agentproto.ErrInternal()
	}
	reply := NewIQ("error", iq.ID, iq.To, iq.From, nil)
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
