package dirxmpp

import (
	"context"
	"log/slog"
	"sync"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory/presencedb"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// MaxSubscribersPerEndpoint bounds the remembered subscribers of one
// endpoint. Beyond it a subscription is still approved and answered, but
// the subscriber is not remembered and misses later availability changes
// until its server probes again.
const MaxSubscribersPerEndpoint = 10000

// Presence answers presence subscriptions and probes for virtual endpoints
// and pushes runtime availability to subscribers.
//
// Subscribers are kept in the store (presencedb), so a restart does not
// forget them (a subscriber who stays online is not probed again) and every
// cluster member tells them of a change it sees; a probe from a principal
// who may see the endpoint re-adds one. Availability and status are this
// process's. Presence reflects runtime availability only; it is never
// evidence of visibility, invocation permission or unblocked
// communication.
type Presence struct {
	domain   jid.JID
	resolver component.EndpointResolver
	sender   component.Sender
	log      *slog.Logger

	// caps is the XEP-0115 <c/> of an endpoint's available presence (nil
	// for none).
	caps func(endpoint string) *xmltree.Element

	subs presencedb.Driver // endpoint → subscriber bare JIDs

	mu   sync.Mutex
	down map[string]bool // endpoints reported unavailable
	// status is a short text shown while an endpoint is available but
	// degraded (<show>away</show>), by endpoint.
	status map[string]string
}

func newPresence(domain jid.JID, r component.EndpointResolver, s component.Sender, subs presencedb.Driver, log *slog.Logger) *Presence {
	if subs == nil {
		subs = presencedb.NewMemory()
	}
	if log == nil {
		log = slog.Default()
	}
	return &Presence{
		domain:   domain,
		resolver: r,
		sender:   s,
		log:      log,
		subs:     subs,
		down:     map[string]bool{},
		status:   map[string]string{},
	}
}

// handle is the router's presence handler. Presence to the gateway itself
// and to other domains is not ours. Nothing at all is sent for an endpoint
// the sender may not see, so presence is no existence oracle.
func (p *Presence) handle(ctx context.Context, pr component.Presence) {
	to := pr.To.Bare()
	if to.Localpart() == "" || to.Domainpart() != p.domain.Domainpart() {
		return
	}
	from := pr.From.Bare()
	switch pr.Type {
	case "subscribe", "probe", "unsubscribe":
	default:
		// Available, unavailable, subscribed, unsubscribed and errors need
		// no answer from a virtual endpoint.
		return
	}
	_, visible := p.resolver.Resolve(from, to)
	ep, sub := to.String(), from.String()
	if pr.Type == "unsubscribe" {
		// Forget whatever the visibility, so the set only shrinks.
		if p.forget(ctx, ep, sub) && visible {
			p.send(ctx, component.NewPresence("unavailable", to, from))
		}
		return
	}
	if !visible {
		return
	}
	switch pr.Type {
	case "subscribe":
		p.remember(ctx, ep, sub)
		p.send(ctx, component.NewPresence("subscribed", to, from))
		p.send(ctx, p.availability(to, from))
	case "probe":
		// A probe means the prober's server holds a subscription.
		p.remember(ctx, ep, sub)
		p.send(ctx, p.availability(to, pr.From))
	}
}

func (p *Presence) availability(from, to jid.JID) *xmltree.Element {
	p.mu.Lock()
	down := p.down[from.String()]
	p.mu.Unlock()
	if down {
		return component.NewPresence("unavailable", from, to)
	}
	return p.available(from, to)
}

// available is available presence from an endpoint: its caps, and
// <show>away</show> with the status text while the endpoint is degraded.
func (p *Presence) available(from, to jid.JID) *xmltree.Element {
	p.mu.Lock()
	status := p.status[from.Bare().String()]
	p.mu.Unlock()
	pr := component.NewPresence("", from, to)
	if status != "" {
		pr.Add(xmltree.New(component.NSComponent, "show").WithText("away"))
		pr.Add(xmltree.New(component.NSComponent, "status").WithText(status))
	}
	if p.caps != nil {
		if c := p.caps(from.Bare().String()); c != nil {
			pr.Add(c)
		}
	}
	return pr
}

// presenceOf is available (with caps and status) or unavailable presence.
func (p *Presence) presenceOf(typ string, from, to jid.JID) *xmltree.Element {
	if typ == "" {
		return p.available(from, to)
	}
	return component.NewPresence(typ, from, to)
}

// CatalogChanged tells the remembered subscribers of endpoint that its
// disco answer changed (a new active version, or none): available presence
// with the new caps to those who may see it, or unavailable when it has no
// active version any more, to those the policy still lets see it.
func (p *Presence) CatalogChanged(endpoint string, canSee func(principal, endpoint string) bool) {
	if p == nil || p.sender == nil {
		return
	}
	ep, subs, down := p.subscribers(endpoint)
	if down || ep.String() == "" {
		return // unavailable stays unavailable; caps come with the next up
	}
	ctx := context.Background()
	for _, s := range subs {
		to, err := jid.Parse(s)
		if err != nil {
			continue
		}
		if _, visible := p.resolver.Resolve(to, ep); visible {
			p.send(ctx, p.available(ep, to))
		} else if canSee != nil && canSee(s, ep.String()) {
			p.send(ctx, component.NewPresence("unavailable", ep, to))
		}
	}
}

// SetStatus shows status in an available endpoint's presence ("" clears
// it) and tells the subscribers who may see it when it changed.
func (p *Presence) SetStatus(endpoint, status string) {
	if p == nil {
		return
	}
	j, err := jid.Parse(endpoint)
	if err != nil {
		return
	}
	key := j.Bare().String()
	p.mu.Lock()
	same := p.status[key] == status
	if status == "" {
		delete(p.status, key)
	} else {
		p.status[key] = status
	}
	p.mu.Unlock()
	if same {
		return
	}
	ep, subs, down := p.subscribers(endpoint)
	if down {
		return
	}
	for _, s := range subs {
		to, err := jid.Parse(s)
		if err != nil {
			continue
		}
		if _, visible := p.resolver.Resolve(to, ep); visible {
			p.send(context.Background(), p.available(ep, to))
		}
	}
}

// subscribers returns an endpoint's bare JID, its remembered subscribers
// and whether it is reported down.
func (p *Presence) subscribers(endpoint string) (jid.JID, []string, bool) {
	ep, err := jid.Parse(endpoint)
	if err != nil {
		return jid.JID{}, nil, true
	}
	ep = ep.Bare()
	key := ep.String()
	subs := p.list(context.Background(), key)
	p.mu.Lock()
	defer p.mu.Unlock()
	return ep, subs, p.down[key]
}

// list reads an endpoint's subscribers from the store; a store that
// cannot be read tells no one (logged), as a lost stanza would.
func (p *Presence) list(ctx context.Context, ep string) []string {
	subs, err := p.subs.Subscribers(ctx, ep)
	if err != nil {
		p.log.Warn("presence subscribers not read", "endpoint", ep, "err", err)
	}
	return subs
}

func (p *Presence) remember(ctx context.Context, ep, sub string) {
	if _, err := p.subs.Subscribe(ctx, ep, sub, MaxSubscribersPerEndpoint); err != nil {
		p.log.Warn("presence subscriber not remembered", "endpoint", ep, "err", err)
	}
}

func (p *Presence) forget(ctx context.Context, ep, sub string) bool {
	ok, err := p.subs.Unsubscribe(ctx, ep, sub)
	if err != nil {
		p.log.Warn("presence subscriber not forgotten", "endpoint", ep, "err", err)
	}
	return ok
}

func (p *Presence) send(ctx context.Context, stanza *xmltree.Element) {
	if p.sender == nil {
		return
	}
	if err := p.sender.Send(ctx, stanza); err != nil {
		p.log.Warn("presence not sent", "err", err)
	}
}

// SetAvailable records an endpoint's runtime availability and, when it
// changes, sends available or unavailable presence from the endpoint to
// every remembered subscriber who may still see it. Endpoints are
// available until reported otherwise. Safe for concurrent use; it must not
// be called from inside a stream handler (it sends).
func (p *Presence) SetAvailable(endpoint string, up bool) {
	if p == nil {
		return
	}
	ep, err := jid.Parse(endpoint)
	if err != nil {
		return
	}
	ep = ep.Bare()
	key := ep.String()
	p.mu.Lock()
	wasDown := p.down[key]
	if up {
		delete(p.down, key)
	} else {
		p.down[key] = true
	}
	p.mu.Unlock()
	var subs []string
	if wasDown == up { // changed
		subs = p.list(context.Background(), key)
	}

	typ := "unavailable"
	if up {
		typ = ""
	}
	ctx := context.Background()
	for _, s := range subs {
		to, err := jid.Parse(s)
		if err != nil {
			continue
		}
		if _, visible := p.resolver.Resolve(to, ep); !visible {
			continue
		}
		p.send(ctx, p.presenceOf(typ, ep, to))
	}
}

// Rebroadcast sends every remembered subscriber who may still see the
// endpoint its current availability. The gateway calls it when the
// component stream (re)connects, since presence sent while the stream was
// down is lost.
func (p *Presence) Rebroadcast(ctx context.Context) {
	if p == nil || p.sender == nil {
		return
	}
	type pair struct {
		ep   string
		subs []string
		down bool
	}
	eps, err := p.subs.Endpoints(ctx)
	if err != nil {
		p.log.Warn("presence subscribers not read", "err", err)
	}
	all := make([]pair, 0, len(eps))
	for _, ep := range eps {
		pr := pair{ep: ep, subs: p.list(ctx, ep)}
		p.mu.Lock()
		pr.down = p.down[ep]
		p.mu.Unlock()
		all = append(all, pr)
	}
	for _, pr := range all {
		ep, err := jid.Parse(pr.ep)
		if err != nil {
			continue
		}
		typ := ""
		if pr.down {
			typ = "unavailable"
		}
		for _, s := range pr.subs {
			if ctx.Err() != nil {
				return
			}
			to, err := jid.Parse(s)
			if err != nil {
				continue
			}
			if _, visible := p.resolver.Resolve(to, ep); visible {
				p.send(ctx, p.presenceOf(typ, ep, to))
			}
		}
	}
}

// Subscribers returns how many subscribers are remembered for endpoint.
func (p *Presence) Subscribers(endpoint string) int {
	return len(p.list(context.Background(), endpoint))
}
