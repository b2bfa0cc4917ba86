package dirxmpp

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/directory/selfregdb"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// SelfAdmin is the directory surface Self Registration needs: the admin
// operations plus registration for the sender's own JID.
type SelfAdmin interface {
	directory.Admin
	RegisterOwn(ctx context.Context, owner string, raw []byte) (*directory.Manifest, error)
}

// MaxOnlineResources bounds the resources remembered as online for one
// self-registered account.
const MaxOnlineResources = 16

// SelfRegistration is the Self Registration profile at the gateway: a C2S
// account of an allowed local domain registers and activates manifests for
// its own bare JID (proof of control: the server authenticated the sender),
// and the directory lists such an endpoint only while the account is
// online, which the gateway learns by subscribing to the account's
// presence. Federation never authorizes it: a remote domain is refused
// whatever its grants.
//
// Build it with NewSelfRegistration and pass it in Deps.SelfRegister.
type SelfRegistration struct {
	domains map[string]bool
	admin   SelfAdmin
	store   selfregdb.Driver
	now     func() time.Time
	log     *slog.Logger

	// Set by Register.
	gateway jid.JID
	sender  component.Sender
	reader  directory.Reader
	policy  *federation.Policy

	mu     sync.Mutex
	online map[string]map[string]struct{} // bare JID → available resources
}

// NewSelfRegistration offers Self Registration to accounts of domains (each
// must also be a local domain of the policy, or it is refused at request
// time). store keeps the records and bans; now is the clock (nil: wall).
func NewSelfRegistration(domains []string, admin SelfAdmin, store selfregdb.Driver, now func() time.Time, log *slog.Logger) *SelfRegistration {
	if admin == nil || store == nil {
		panic("dirxmpp: NewSelfRegistration needs the directory and its store")
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	sr := &SelfRegistration{domains: map[string]bool{}, admin: admin, store: store, now: now, log: log,
		online: map[string]map[string]struct{}{}}
	for _, d := range domains {
		sr.domains[strings.ToLower(d)] = true
	}
	return sr
}

// offered reports whether principal (a bare JID) may self-register: an
// account (it has a localpart) of a domain that is both allowed and local.
// Remote domains never qualify, whatever they were granted.
func (sr *SelfRegistration) offered(principal string) bool {
	if !strings.Contains(principal, "@") {
		return false
	}
	return sr.domains[strings.ToLower(federation.DomainOf(principal))] && sr.policy.IsLocal(principal)
}

// selfOps are the operations an account may run on its own JID.
var selfOps = map[string]bool{"register": true, "activate": true, "deactivate": true, "registration-status": true}

// handle serves a directory IQ from a non-administrator. Everything but a
// request about the sender's own JID is forbidden, and so is everything
// from an account that may not self-register or whose JID is banned.
func (sr *SelfRegistration) handle(ctx context.Context, a *admin, iq component.IQ) (*xmltree.Element, error) {
	req := requester(iq)
	p := iq.Payload
	op := p.Name.Local
	if !sr.offered(req) || !selfOps[op] {
		return nil, agentproto.ErrForbidden("Administrative provisioning requires an administrator.")
	}
	if op != "register" {
		ep, err := endpointAttr(p)
		if err != nil {
			return nil, err
		}
		if ep != req {
			return nil, agentproto.ErrForbidden("An account may only manage its own endpoint.")
		}
	}
	if op == "register" || op == "activate" {
		banned, err := sr.store.Banned(ctx, req)
		if err != nil {
			sr.log.Error("self-registration: reading bans failed", "err", err)
			return nil, agentproto.ErrInternal()
		}
		if banned {
			return nil, agentproto.ErrForbidden("This endpoint is banned from self-registration.")
		}
	}
	if op != "register" {
		return a.serve(ctx, p, sr.admin)
	}
	res, err := a.register(ctx, p, func(ctx context.Context, raw []byte) (*directory.Manifest, error) {
		return sr.admin.RegisterOwn(ctx, req, raw)
	})
	if err != nil {
		return nil, err
	}
	if err := sr.store.Record(ctx, req, sr.now()); err != nil {
		// The version is committed; the record only feeds listings.
		sr.log.Warn("self-registration: recording the endpoint failed", "endpoint", req, "err", err)
	}
	// Follow the account's presence from now on: the directory lists it
	// only while it is online.
	sr.follow(ctx, iq.From.Bare())
	return res, nil
}

// follow subscribes the gateway to an account's presence (queued, never
// awaited). A subscribe alone also serves as the probe: for a contact
// already subscribed the server answers with the account's current
// presence (RFC 6121 3.1.3). A probe sent beside a first subscribe is
// answered "unsubscribed", which Prosody records as a refusal of the
// pending request, so the account's approval then changes nothing.
func (sr *SelfRegistration) follow(ctx context.Context, account jid.JID) {
	if sr.sender == nil {
		return
	}
	if err := sr.sender.Send(ctx, component.NewPresence("subscribe", sr.gateway, account)); err != nil {
		sr.log.Warn("self-registration: presence subscription not sent", "err", err)
	}
}

// Resubscribe forgets what it knew about who is online and follows every
// self-registered endpoint with an active version again. The gateway calls
// it whenever the component stream (re)connects: presence that arrived
// while the stream was down is lost.
func (sr *SelfRegistration) Resubscribe(ctx context.Context) {
	sr.mu.Lock()
	clear(sr.online)
	sr.mu.Unlock()
	recs, err := sr.store.Records(ctx)
	if err != nil {
		sr.log.Warn("self-registration: listing endpoints failed", "err", err)
		return
	}
	for _, r := range recs {
		if ctx.Err() != nil {
			return
		}
		if _, ok := sr.reader.Active(r.Endpoint); !ok {
			continue
		}
		if j, err := jid.Parse(r.Endpoint); err == nil {
			sr.follow(ctx, j)
		}
	}
}

// handlePresence tracks the availability of self-registered accounts from
// the presence their server sends the gateway domain.
func (sr *SelfRegistration) handlePresence(_ context.Context, pr component.Presence) {
	if pr.To.Localpart() != "" || pr.To.Domainpart() != sr.gateway.Domainpart() {
		return
	}
	bare := pr.From.Bare().String()
	if !sr.offered(bare) || !sr.reader.Exists(bare) {
		return
	}
	sr.log.Debug("self-registration: account presence", "from", pr.From.String(), "type", pr.Type)
	res := pr.From.Resourcepart()
	sr.mu.Lock()
	defer sr.mu.Unlock()
	switch pr.Type {
	case "":
		if res == "" {
			return
		}
		set := sr.online[bare]
		if set == nil {
			set = map[string]struct{}{}
			sr.online[bare] = set
		}
		if len(set) < MaxOnlineResources {
			set[res] = struct{}{}
		}
	case "unavailable":
		if res == "" {
			// The server's answer to a probe when no resource is online.
			delete(sr.online, bare)
			return
		}
		if set := sr.online[bare]; set != nil {
			delete(set, res)
			if len(set) == 0 {
				delete(sr.online, bare)
			}
		}
	case "error":
		delete(sr.online, bare)
	}
}

// Online reports whether a self-registered endpoint's account has an
// available resource, as far as the gateway's presence subscription tells.
func (sr *SelfRegistration) Online(endpoint string) bool {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return len(sr.online[endpoint]) > 0
}

// listed is the directory filter: endpoints below the gateway's own domain
// are virtual and always listed (their presence is the gateway's); every
// other endpoint was self-registered and is listed only while online.
func (sr *SelfRegistration) listed(endpoint string) bool {
	if federation.DomainOf(endpoint) == sr.gateway.Domainpart() {
		return true
	}
	return sr.Online(endpoint)
}

// isNotOwner tells the directory's ownership refusal, which admin.mapErr
// answers with the spec's forbidden.
func isNotOwner(err error) bool { return errors.Is(err, directory.ErrNotOwner) }

// selfRegisterFeature advertises the profile to the principals it is
// offered to.
func (sr *SelfRegistration) feature(q *xmltree.Element, req string) {
	if sr != nil && sr.offered(req) {
		features(q, ns.APISelfRegister)
	}
}
