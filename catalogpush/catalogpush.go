// Package catalogpush tells subscribed clients at once when an endpoint's
// active version changes or it is deactivated, instead of leaving them to
// poll: it pushes the endpoint's new XEP-0115 caps in presence (through
// dirxmpp's presence tracker) and publishes the change on a PubSub node
// (XEP-0060) at the gateway, urn:agentgw:catalog:0.
//
// The PubSub node is agentgw's own extension: the protocol leaves change
// notification to a future version. It is visibility-filtered: a
// subscriber only gets items for endpoints its bare JID may see, and
// retrieving the node's items lists only those. Subscriptions are kept in
// memory: after a gateway restart a client subscribes again (agentgw mcp
// does on every refresh). docs/adhoc.md documents the node.
package catalogpush

import (
	"context"
	"log/slog"
	"sort"
	"sync"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Policy decides visibility (federation.Policy).
type Policy interface {
	CanSee(principal, endpoint string) bool
}

// Presence is dirxmpp's presence tracker.
type Presence interface {
	CatalogChanged(endpoint string, canSee func(principal, endpoint string) bool)
}

// Deps is what the push needs.
type Deps struct {
	Domain   jid.JID
	Reader   directory.Reader
	Policy   Policy
	Sender   component.Sender
	Presence Presence // optional
	Log      *slog.Logger
	// MaxSubscriptions bounds the subscriptions held (default 10000);
	// MaxPerPrincipal bounds one bare JID's (its resources; default 16).
	MaxSubscriptions int
	MaxPerPrincipal  int
}

// Change is one endpoint's catalog change.
type Change struct {
	Endpoint string
	Active   bool
	Version  string // "" when deactivated
	Hash     string
}

type active struct{ version, hash string }

// Service is the catalog push.
type Service struct {
	d    Deps
	kick chan struct{}

	mu    sync.Mutex
	subs  map[string]string // subscriber full (or bare) JID → subid
	known map[string]active // endpoint → its active version as last seen

	// OnPublish, when set, sees every change after it was sent (tests,
	// metrics).
	OnPublish func(Change)
}

// New makes the service. Call Register, then Run.
func New(d Deps) *Service {
	if d.Reader == nil || d.Policy == nil || d.Sender == nil {
		panic("catalogpush: New needs a reader, a policy and a sender")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.MaxSubscriptions <= 0 {
		d.MaxSubscriptions = 10000
	}
	if d.MaxPerPrincipal <= 0 {
		d.MaxPerPrincipal = 16
	}
	s := &Service{d: d, kick: make(chan struct{}, 1), subs: map[string]string{}}
	s.known = s.snapshot()
	return s
}

// SetPresence sets the presence tracker after construction (dirxmpp
// builds it from deps that already name this service's features).
func (s *Service) SetPresence(p Presence) {
	s.mu.Lock()
	s.d.Presence = p
	s.mu.Unlock()
}

// Features are advertised at the gateway.
func (s *Service) Features() []string {
	return []string{ns.PubSub, ns.PubSub + "#subscribe", ns.PubSub + "#retrieve-items", ns.Catalog}
}

// Signal asks Run to look for changes; it never blocks (the directory's
// OnChange callback).
func (s *Service) Signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run publishes changes until ctx ends.
func (s *Service) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		s.Scan()
	}
}

// activeVersioner is the optional Reader method *directory.Registry has.
type activeVersioner interface {
	ActiveVersion(endpoint string) (version, hash string, ok bool)
}

// snapshot reads every endpoint's active version.
func (s *Service) snapshot() map[string]active {
	out := map[string]active{}
	all := func(string) bool { return true }
	q := directory.PageQuery{Max: 1000, Index: -1}
	// A Registry answers version and hash from its index; Active would
	// parse every manifest of a large directory on each scan.
	av, _ := s.d.Reader.(activeVersioner)
	for {
		p := s.d.Reader.List(all, q)
		for _, e := range p.Items {
			if av != nil {
				if v, h, ok := av.ActiveVersion(e.JID); ok {
					out[e.JID] = active{v, h}
				}
				continue
			}
			if m, ok := s.d.Reader.Active(e.JID); ok {
				out[e.JID] = active{m.Version, m.Hash}
			}
		}
		if len(p.Items) < q.Max || p.Last == "" {
			return out
		}
		q.After = p.Last
	}
}

// Scan compares the directory with what was last seen and publishes each
// difference. Safe to call from any goroutine; Run calls it on Signal.
func (s *Service) Scan() {
	now := s.snapshot()
	s.mu.Lock()
	prev := s.known
	s.known = now
	s.mu.Unlock()
	var changes []Change
	for ep, a := range now {
		if prev[ep] != a {
			changes = append(changes, Change{Endpoint: ep, Active: true, Version: a.version, Hash: a.hash})
		}
	}
	for ep := range prev {
		if _, ok := now[ep]; !ok {
			changes = append(changes, Change{Endpoint: ep})
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Endpoint < changes[j].Endpoint })
	for _, c := range changes {
		s.publish(c)
	}
}

func (s *Service) publish(c Change) {
	s.mu.Lock()
	pres := s.d.Presence
	s.mu.Unlock()
	if pres != nil {
		pres.CatalogChanged(c.Endpoint, s.d.Policy.CanSee)
	}
	s.mu.Lock()
	subs := make([]string, 0, len(s.subs))
	for j := range s.subs {
		subs = append(subs, j)
	}
	s.mu.Unlock()
	ctx := context.Background()
	for _, sub := range subs {
		to, err := jid.Parse(sub)
		if err != nil || !s.d.Policy.CanSee(to.Bare().String(), c.Endpoint) {
			continue
		}
		ev := xmltree.New(ns.PubSubEvent, "event").Add(
			xmltree.New(ns.PubSubEvent, "items", "node", ns.CatalogNode).Add(
				xmltree.New(ns.PubSubEvent, "item", "id", c.Endpoint).Add(payload(c))))
		msg := component.NewMessage(ids.New("catalog-"), s.d.Domain, to, ev)
		msg.SetAttr("type", "headline")
		if err := s.d.Sender.Send(ctx, msg); err != nil {
			s.d.Log.Warn("catalog change not sent", "err", err)
		}
	}
	if s.OnPublish != nil {
		s.OnPublish(c)
	}
}

// payload is the item payload:
// <change xmlns='urn:agentgw:catalog:0' endpoint=” active='true' version=” hash=”/>.
func payload(c Change) *xmltree.Element {
	el := xmltree.New(ns.Catalog, "change", "endpoint", c.Endpoint)
	if !c.Active {
		return el.SetAttr("active", "false")
	}
	el.SetAttr("active", "true").SetAttr("version", c.Version)
	return el.Add(xmltree.New(ns.Hashes, "hash", "algo", ns.HashAlgo).WithText(c.Hash))
}

// ---- the PubSub IQs ---------------------------------------------------------

// Register installs the PubSub IQs at the gateway domain.
func (s *Service) Register(r *component.Router) {
	r.HandleGatewayIQ(component.IQSet, ns.PubSub, "pubsub", component.IQHandlerFunc(s.set))
	r.HandleGatewayIQ(component.IQGet, ns.PubSub, "pubsub", component.IQHandlerFunc(s.get))
}

func pubsubError(cond *agentproto.StanzaError, app string) error {
	if app != "" {
		cond.App = xmltree.New(ns.PubSubError, app)
	}
	return cond
}

// only returns the single child of the pubsub element.
func only(p *xmltree.Element) (*xmltree.Element, error) {
	if len(p.Children) != 1 {
		return nil, agentproto.ErrBadRequest("A pubsub request carries exactly one action.")
	}
	return p.Children[0], nil
}

func (s *Service) set(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
	c, err := only(iq.Payload)
	if err != nil {
		return nil, err
	}
	if c.Name.Space != ns.PubSub {
		return nil, agentproto.ErrBadRequest("Unknown pubsub action.")
	}
	if c.AttrValue("node") != ns.CatalogNode {
		return nil, agentproto.ErrItemNotFound()
	}
	switch c.Name.Local {
	case "subscribe", "unsubscribe":
	case "publish", "retract", "create", "delete", "purge":
		return nil, pubsubError(agentproto.ErrForbidden("Only the gateway publishes on this node."), "")
	default:
		return nil, pubsubError(agentproto.NewError(agentproto.CondFeatureNotImplemented, "Not supported on this node."), "unsupported")
	}
	sub, err := jid.Parse(c.AttrValue("jid"))
	if err != nil || !sub.Bare().Equal(iq.From.Bare()) {
		return nil, pubsubError(agentproto.ErrBadRequest("The jid must be the requester's own (bare or full) JID."), "invalid-jid")
	}
	key := sub.String()
	if c.Name.Local == "unsubscribe" {
		s.mu.Lock()
		_, ok := s.subs[key]
		delete(s.subs, key)
		s.mu.Unlock()
		if !ok {
			return nil, pubsubError(agentproto.NewError(agentproto.CondUnexpectedRequest, "Not subscribed."), "not-subscribed")
		}
		return nil, nil
	}
	subid, err := s.subscribe(key, sub.Bare().String())
	if err != nil {
		return nil, err
	}
	return xmltree.New(ns.PubSub, "pubsub").Add(xmltree.New(ns.PubSub, "subscription",
		"node", ns.CatalogNode, "jid", key, "subid", subid, "subscription", "subscribed")), nil
}

// subscribe is idempotent: subscribing again keeps the subid.
func (s *Service) subscribe(key, bare string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.subs[key]; ok {
		return id, nil
	}
	mine := 0
	for j := range s.subs {
		if b, err := jid.Parse(j); err == nil && b.Bare().String() == bare {
			mine++
		}
	}
	if mine >= s.d.MaxPerPrincipal || len(s.subs) >= s.d.MaxSubscriptions {
		return "", agentproto.ErrResourceConstraint("Too many catalog subscriptions.")
	}
	id := ids.New("sub-")
	s.subs[key] = id
	return id, nil
}

// get answers items retrieval: one item per active endpoint the requester
// may see, its current version.
func (s *Service) get(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
	c, err := only(iq.Payload)
	if err != nil {
		return nil, err
	}
	if !c.Is(ns.PubSub, "items") {
		return nil, pubsubError(agentproto.NewError(agentproto.CondFeatureNotImplemented, "Not supported on this node."), "unsupported")
	}
	if c.AttrValue("node") != ns.CatalogNode {
		return nil, agentproto.ErrItemNotFound()
	}
	req := iq.From.Bare().String()
	items := xmltree.New(ns.PubSub, "items", "node", ns.CatalogNode)
	s.mu.Lock()
	eps := make([]string, 0, len(s.known))
	for ep := range s.known {
		eps = append(eps, ep)
	}
	known := s.known
	s.mu.Unlock()
	sort.Strings(eps)
	const maxItems = 1000
	n := 0
	for _, ep := range eps {
		if n >= maxItems {
			break
		}
		if !s.d.Policy.CanSee(req, ep) {
			continue
		}
		a := known[ep]
		items.Add(xmltree.New(ns.PubSub, "item", "id", ep).Add(payload(Change{Endpoint: ep, Active: true, Version: a.version, Hash: a.hash})))
		n++
	}
	return xmltree.New(ns.PubSub, "pubsub").Add(items), nil
}

// Subscriptions is the number of subscriptions held.
func (s *Service) Subscriptions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}
