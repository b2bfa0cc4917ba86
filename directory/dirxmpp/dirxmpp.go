// Package dirxmpp implements the XMPP wire of the agent directory
// (urn:xmpp:agent-directory:0 and urn:xmpp:agent-api:0): gateway, endpoint,
// tool-collection and tool service discovery with XEP-0059 paging, manifest
// and schema retrieval, XEP-0055 directory search, XEP-0054 endpoint vCards,
// the administrative provisioning IQs, and presence for virtual endpoints.
//
// Every handler answers from the in-memory directory.Reader and the
// federation.Policy; none does slow work. Anything nonexistent, hidden or
// unauthorized for a discovery or metadata operation is answered with the
// one byte-identical agentproto.ErrItemNotFound.
package dirxmpp

import (
	"log/slog"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/directory/presencedb"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Page sizes of directory listing, search and tool listing. The spec lets a
// gateway return fewer items than asked; PageCeiling bounds the directory
// result count as the business rules require.
const (
	DefaultPageSize = 50
	PageCeiling     = 200
)

// DefaultReplaySeconds is advertised when Deps.ReplaySeconds is not
// positive; it matches the config default of [tasks] replay_seconds.
const DefaultReplaySeconds = 86400

// Deps is what the directory wire needs.
type Deps struct {
	// Domain is the component domain; zero means the router's domain.
	Domain jid.JID
	// GatewayName is the gateway identity's name; "" leaves it out.
	GatewayName string
	Reader      directory.Reader
	// Admin serves the administrative provisioning IQs; nil leaves them
	// unregistered (service-unavailable) and unadvertised.
	Admin  directory.Admin
	Policy *federation.Policy
	// TaskFeatures returns the endpoint-wide task features the task layer
	// implements for an endpoint (urn:xmpp:agent-task:0 and its #progress,
	// #cancel, #input). nil means none: the endpoint then advertises no
	// task feature at all.
	TaskFeatures func(endpoint string) []string
	// ChatFeatures returns the Human Messaging features an endpoint
	// advertises right now (the messaging package's, only while its
	// backend can converse); nil means none.
	ChatFeatures func(endpoint string) []string
	// ReplaySeconds is the advertised request_replay_seconds.
	ReplaySeconds int
	// ColdStart tells whether invoking can wake the endpoint's runtime;
	// nil means never.
	ColdStart func(endpoint string) bool
	// GatewayFeatures are further features of the gateway's own disco#info
	// (the catalog PubSub node's).
	GatewayFeatures []string
	// Nodes serves the endpoint disco nodes and features another package
	// owns (the adhoc commands); nil means none.
	Nodes EndpointNodes
	// GatewayNodes serves disco at the gateway's nodes dirxmpp does not
	// own (the admin commands); nil means none.
	GatewayNodes GatewayNodes
	// Subscribers keeps the endpoints' presence subscribers (the store's,
	// so that they outlive a restart and every cluster member sees them);
	// nil keeps them in memory.
	Subscribers presencedb.Driver
	// Sender carries presence replies and pushes; nil disables presence.
	Sender component.Sender
	Log    *slog.Logger

	// SelfRegister offers the Self Registration profile; nil refuses it
	// (forbidden) and leaves #self-register unadvertised.
	SelfRegister *SelfRegistration
}

// EndpointNodes answers disco at endpoint nodes dirxmpp does not own.
// The router has checked visibility before either is asked; ok false means
// the node is not theirs (item-not-found).
type EndpointNodes interface {
	Features(endpoint string) []string
	NodeInfo(requester, endpoint, node string) (q *xmltree.Element, ok bool)
	NodeItems(requester, endpoint, node string) (q *xmltree.Element, ok bool)
}

// GatewayNodes answers disco at gateway nodes dirxmpp does not own, and
// adds gateway features, per requester; ok false means item-not-found.
type GatewayNodes interface {
	Features(requester string) []string
	NodeInfo(requester, node string) (q *xmltree.Element, ok bool)
	NodeItems(requester, gateway, node string) (q *xmltree.Element, ok bool)
}

type service struct {
	Deps
	domain jid.JID
}

// Register installs the directory's IQ and presence handlers on r and
// returns the presence tracker that bridges use to announce runtime
// availability. It panics on a nil router, reader or policy: those are
// wiring errors.
func Register(r *component.Router, d Deps) *Presence {
	if r == nil || d.Reader == nil || d.Policy == nil {
		panic("dirxmpp: Register needs a router, a reader and a policy")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.ReplaySeconds <= 0 {
		d.ReplaySeconds = DefaultReplaySeconds
	}
	s := &service{Deps: d, domain: d.Domain.Domain()}
	if s.domain.String() == "" {
		s.domain = r.Domain()
	}

	// Each payload is registered for the IQ types it takes; the router
	// answers any other type (bad-request). Rate limits are the router's.
	get, set := component.IQGet, component.IQSet
	r.HandleGatewayIQ(get, ns.DiscoInfo, "query", component.IQHandlerFunc(s.gatewayInfo))
	r.HandleGatewayIQ(get, ns.DiscoItems, "query", component.IQHandlerFunc(s.gatewayItems))
	r.HandleGatewayIQ(get, ns.Search, "query", component.IQHandlerFunc(searchFormIQ))
	r.HandleGatewayIQ(set, ns.Search, "query", component.IQHandlerFunc(s.search))
	if sr := d.SelfRegister; sr != nil {
		sr.gateway, sr.sender, sr.reader, sr.policy = s.domain, d.Sender, d.Reader, d.Policy
		if d.Sender != nil {
			r.HandlePresence(sr.handlePresence)
		}
	}
	if d.Admin != nil || d.SelfRegister != nil {
		a := &admin{s: s}
		for _, op := range adminOps {
			r.HandleGatewayIQ(set, ns.API, op, component.IQHandlerFunc(a.handle))
		}
		// registration-status only reads, so it is accepted as get or set.
		r.HandleGatewayIQ(get, ns.API, "registration-status", component.IQHandlerFunc(a.handle))
	}

	// Discovery and metadata are AccessVisible: the router already answers
	// item-not-found for nonexistent or hidden endpoints.
	r.HandleEndpointIQ(get, ns.DiscoInfo, "query", component.AccessVisible, component.IQHandlerFunc(s.endpointInfo))
	r.HandleEndpointIQ(get, ns.DiscoItems, "query", component.AccessVisible, component.IQHandlerFunc(s.endpointItems))
	r.HandleEndpointIQ(get, ns.API, "manifest-request", component.AccessVisible, component.IQHandlerFunc(s.manifest))
	r.HandleEndpointIQ(get, ns.API, "schema-request", component.AccessVisible, component.IQHandlerFunc(s.schema))
	r.HandleEndpointIQ(get, ns.VCard, "vCard", component.AccessVisible, component.IQHandlerFunc(s.vcard))
	r.HandleEndpointIQ(set, ns.VCard, "vCard", component.AccessVisible, component.IQHandlerFunc(vcardSet))

	p := newPresence(s.domain, NewResolver(d.Reader, d.Policy), d.Sender, d.Subscribers, d.Log)
	p.caps = s.caps
	if d.Sender != nil {
		r.HandlePresence(p.handle)
	}
	return p
}

// requester is the bare JID that authorization decisions use.
func requester(iq component.IQ) string { return iq.From.Bare().String() }

// endpointOf is the addressed endpoint's bare JID.
func endpointOf(iq component.IQ) string { return iq.To.Bare().String() }

// visible is the directory's visibility filter for one requester.
// With Self Registration, a self-registered endpoint is listed only while
// its account is online.
func (s *service) visible(req string) func(string) bool {
	vis := s.Policy.VisibleFunc(req)
	if s.SelfRegister == nil {
		return vis
	}
	return func(ep string) bool { return vis(ep) && s.SelfRegister.listed(ep) }
}

// hashElement is an XEP-0300 sha-256 <hash/>.
func hashElement(value string) *xmltree.Element {
	return xmltree.New(ns.Hashes, "hash", "algo", ns.HashAlgo).WithText(value)
}

// maxHashBytes bounds a received hash value; base64 of SHA-256 is 44.
const maxHashBytes = 128

// parseHash reads the single sha-256 XEP-0300 hash child of el.
func parseHash(el *xmltree.Element) (string, error) {
	hashes := el.ChildrenNamed(ns.Hashes, "hash")
	if len(hashes) != 1 {
		return "", agentproto.ErrBadRequest("Exactly one urn:xmpp:hashes:2 hash is required.")
	}
	h := hashes[0]
	if len(h.Children) > 0 {
		return "", agentproto.ErrBadRequest("The hash value is malformed.")
	}
	if h.AttrValue("algo") != ns.HashAlgo {
		return "", agentproto.ErrBadRequest("The hash algorithm must be sha-256.")
	}
	v := trimSpace(h.Text)
	if v == "" || len(v) > maxHashBytes {
		return "", agentproto.ErrBadRequest("The hash value is malformed.")
	}
	return v, nil
}

func trimSpace(s string) string {
	i, j := 0, len(s)
	for i < j && isSpace(s[i]) {
		i++
	}
	for j > i && isSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
