// Package endpointhost runs one agent endpoint as an ordinary XMPP C2S
// client, anywhere (`agentgw host`): a laptop, a GPU box behind NAT, a
// customer's network. The endpoint is the account's own bare JID. It
// answers its own discovery, manifest, schema and task IQs with the
// gateway's handlers (directory/dirxmpp, tasks/taskxmpp) over the same
// durable task engine on a local SQLite file, and self-registers its
// manifest at a gateway (the spec's Self Registration profile) so that the
// gateway's directory lists it.
//
// Nothing here forks the gateway's code: a component.Router serves the
// session exactly as it serves the XEP-0114 stream, through clientSender
// (session.go), the one seam between the handlers and a C2S session.
package endpointhost

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/directory/dirxmpp"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskxmpp"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// DefaultResource is the resource the host binds. Callers address the
// endpoint's full JID account@domain/agent: an XMPP server answers IQs to a
// bare account JID itself (RFC 6121 8.5.3) and never hands them to a
// client.
const DefaultResource = "agent"

// Backend is the endpoint's tool runtime: the task engine's backend, plus
// Start, which runs it until ctx ends (an MCP bridge, for example).
type Backend interface {
	tasks.Backend
	Start(ctx context.Context) error
}

// Options configure a Host.
type Options struct {
	// JID is the account, a bare JID; it is the endpoint.
	JID      string
	Resource string // default DefaultResource
	Password string // never logged
	Server   string // host:port; default the JID's domain:5222
	TLS      *tls.Config
	// Gateway is the gateway's domain JID, where the manifest is
	// self-registered; "" runs the endpoint unlisted.
	Gateway string
	// StorePath is the local SQLite file (directory and tasks).
	StorePath string
	// NewBackend builds the backend with the host's publisher and
	// availability, once the host's own directory is open.
	NewBackend func(pub backendkit.Publisher, av backendkit.Availability) (Backend, error)
	// LocalDomains are the domains whose principals may see and invoke the
	// endpoint; default the account's own domain. Nobody else may.
	LocalDomains []string
	// VisibleTo and InvocableBy restrict the local principals further
	// (bare JIDs or domains), like an [[agents]] entry's lists.
	VisibleTo, InvocableBy []string
	// Tasks tunes the engine (Driver, Directory, Policy, Backends,
	// Notifier, Log are the host's).
	Tasks tasks.Config
	// ReconnectMin and ReconnectMax bound the reconnect backoff; default
	// 1s and 30s.
	ReconnectMin, ReconnectMax time.Duration
	Log                        *slog.Logger
}

// Host is one endpoint run as a C2S client.
type Host struct {
	o       Options
	log     *slog.Logger
	account jid.JID // bare
	gateway jid.JID

	db       *sqlite.DB
	Registry *directory.Registry
	Policy   *federation.Policy
	Engine   *tasks.Engine
	router   *component.Router
	sender   *clientSender
	backend  Backend
	presence *dirxmpp.Presence

	upMu sync.Mutex
	up   bool // the backend's availability

	sync chan struct{} // kicks the gateway registration loop

	connected chan struct{} // closed after the first login
	connOnce  sync.Once
}

// New opens the local store and assembles the endpoint. It connects
// nowhere; Run does.
func New(ctx context.Context, o Options) (*Host, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Resource == "" {
		o.Resource = DefaultResource
	}
	acct, err := jid.Parse(o.JID)
	if err != nil || acct.Localpart() == "" || acct.Resourcepart() != "" {
		return nil, fmt.Errorf("host: --jid %q is not a bare account JID (name@domain)", o.JID)
	}
	h := &Host{o: o, log: o.Log, account: acct, sender: &clientSender{}, sync: make(chan struct{}, 1), connected: make(chan struct{})}
	if o.Gateway != "" {
		if h.gateway, err = jid.Parse(o.Gateway); err != nil || h.gateway.Localpart() != "" || h.gateway.Resourcepart() != "" {
			return nil, fmt.Errorf("host: --gateway %q is not a domain JID", o.Gateway)
		}
	}
	if o.NewBackend == nil {
		return nil, errors.New("host: no backend")
	}
	if o.StorePath == "" {
		return nil, errors.New("host: no store path")
	}
	h.db, err = sqlite.Open(ctx, o.StorePath)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			h.db.Close()
		}
	}()
	if err := h.db.CheckWritable(ctx); err != nil {
		return nil, err
	}
	h.Registry, err = directory.NewRegistry(ctx, sqlite.NewDirectory(h.db), o.Log)
	if err != nil {
		return nil, err
	}
	// The one endpoint this store holds lives on the account's domain.
	h.Registry.SetDomain(acct.Domainpart())

	local := o.LocalDomains
	if len(local) == 0 {
		local = []string{acct.Domainpart()}
	}
	rules := map[string]federation.EndpointRule{}
	if len(o.VisibleTo) > 0 || len(o.InvocableBy) > 0 {
		rules[acct.String()] = federation.EndpointRule{VisibleTo: o.VisibleTo, InvocableBy: o.InvocableBy}
	}
	h.Policy = federation.New(local, nil, rules)

	h.backend, err = o.NewBackend(publisher{h}, availability{h})
	if err != nil {
		return nil, err
	}

	// The router's "domain" is the account's: every IQ the server hands
	// this session is addressed to account@domain/resource, which the
	// router treats as the endpoint account@domain.
	h.router = component.NewRouter(acct.Domain(), h.resolver(), o.Log)
	notifier := &taskxmpp.Notifier{Sender: h.sender, Log: o.Log}
	tc := o.Tasks
	tc.Driver, tc.Directory, tc.Policy, tc.Notifier, tc.Log = sqlite.NewTasks(h.db), h.Registry, h.Policy, notifier, o.Log
	tc.Backends = func(ep string) (tasks.Backend, bool) { return h.backend, ep == acct.String() }
	if tc.IsLocal == nil {
		tc.IsLocal = h.Policy.IsLocal
	}
	h.Engine, err = tasks.New(tc)
	if err != nil {
		return nil, err
	}
	h.Registry.SetReferenceChecker(h.Engine)
	h.presence = dirxmpp.Register(h.router, dirxmpp.Deps{
		Domain:        acct.Domain(),
		Reader:        h.Registry,
		Policy:        h.Policy,
		TaskFeatures:  h.taskFeatures,
		ReplaySeconds: int(tc.ReplayWindow / time.Second),
		Sender:        h.sender,
		Log:           o.Log,
	})
	(&taskxmpp.Handlers{Engine: h.Engine, Log: o.Log}).Register(h.router)
	pong := component.IQHandlerFunc(func(context.Context, component.IQ) (*xmltree.Element, error) { return nil, nil })
	h.router.HandleEndpointIQ(component.IQGet, ns.Ping, "ping", component.AccessVisible, pong)
	h.router.SetInvocationCheck(func(ctx context.Context, requester, endpoint jid.JID) bool {
		caller, ep := requester.String(), endpoint.String()
		may := h.Policy.CanInvoke(caller, ep)
		holds := h.Engine.HoldsTask(ctx, caller, ep)
		return may || holds
	})
	// The gateway's default budgets (federation.DefaultRates and
	// DefaultLocalRates): every IQ get or set passes them first.
	limiter := federation.NewLimiter(nil, nil, 0, h.Policy.IsLocal)
	h.router.SetLimiter(func(requester jid.JID, space, local string) bool {
		return limiter.Allow(requester.String(), federation.OpOf(space, local))
	})
	h.router.HandleMessage(notifier.HandleMessage)
	h.router.HandlePresence(h.gatewayPresence)
	ok = true
	return h, nil
}

// resolver knows exactly one endpoint, the account; the router's checks
// are the gateway's.
func (h *Host) resolver() component.EndpointResolver {
	inner := dirxmpp.NewResolver(h.Registry, h.Policy)
	return resolverFunc(func(requester, endpoint jid.JID) (bool, bool) {
		exists, visible := inner.Resolve(requester, endpoint)
		if !endpoint.Bare().Equal(h.account) {
			return false, false
		}
		return exists, visible
	})
}

type resolverFunc func(requester, endpoint jid.JID) (bool, bool)

func (f resolverFunc) Resolve(r, e jid.JID) (bool, bool) { return f(r, e) }

func (h *Host) taskFeatures(endpoint string) []string {
	if endpoint != h.account.String() {
		return nil
	}
	f := h.backend.Features()
	out := []string{ns.Task, ns.Delegation}
	if f.Progress {
		out = append(out, ns.TaskProgress)
	}
	if f.Cancel {
		out = append(out, ns.TaskCancel)
	}
	if f.Input {
		out = append(out, ns.TaskInput)
	}
	return out
}

// Endpoint is the endpoint's bare JID.
func (h *Host) Endpoint() string { return h.account.String() }

// Connected is closed after the first successful login.
func (h *Host) Connected() <-chan struct{} { return h.connected }

// Close releases the store. Call it after Run returns.
func (h *Host) Close() error { return h.db.Close() }

// backendStartWait bounds how long Run waits for the backend before it
// recovers tasks and logs in.
const backendStartWait = 20 * time.Second

// Run starts the backend and the task engine (which settles the tasks a
// crash interrupted) and keeps a C2S session up until ctx ends,
// reconnecting with backoff.
func (h *Host) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := h.backend.Start(ctx); err != nil && ctx.Err() == nil {
			h.log.Error("host: backend stopped", "err", err)
		}
	}()
	go func() { defer wg.Done(); h.Registry.Watch(ctx, time.Second) }()
	go func() { defer wg.Done(); h.registrationLoop(ctx) }()
	defer wg.Wait()
	h.waitBackend(ctx)
	if err := h.Engine.Start(ctx); err != nil {
		return fmt.Errorf("task engine: %w", err)
	}
	defer h.Engine.Close()
	sup := backendkit.Supervisor{Min: h.o.ReconnectMin, Max: h.o.ReconnectMax, StableAfter: 10 * time.Second}
	if sup.Max == 0 {
		sup.Max = 30 * time.Second
	}
	sup.Run(ctx, h.session, func(err error, wait time.Duration) {
		h.log.Warn("host: no session to the XMPP server; reconnecting", "err", err, "retry_in", wait)
	})
	return nil
}

func (h *Host) waitBackend(ctx context.Context) {
	rb, ok := h.backend.(backendkit.Readiness)
	if !ok {
		return
	}
	deadline := time.Now().Add(backendStartWait)
	for !rb.Ready() && ctx.Err() == nil {
		if time.Now().After(deadline) {
			h.log.Warn("host: backend not ready; starting anyway (its tasks fail as retryable until it is)", "waited", backendStartWait)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// session runs one login to its end.
func (h *Host) session(ctx context.Context) (time.Duration, error) {
	full, err := h.account.WithResource(h.o.Resource)
	if err != nil {
		return 0, fmt.Errorf("host: resource %q: %w", h.o.Resource, err)
	}
	p := &pump{router: h.router, sender: h.sender, account: h.account, log: h.log}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := xmppclient.Dial(dctx, xmppclient.Options{
		JID: full.String(), Password: h.o.Password, Server: h.o.Server, TLS: h.o.TLS,
		OnIQ:       func(el *xmltree.Element) *xmltree.Element { return p.iq(ctx, el) },
		OnMessage:  func(el *xmltree.Element) { p.message(ctx, el) },
		OnPresence: func(el *xmltree.Element) { p.presence(ctx, el) },
	})
	cancel()
	if err != nil {
		return 0, err
	}
	p.self = c.JID()
	if !p.self.Equal(full) {
		h.log.Warn("host: the server bound another resource than asked; callers must use it", "bound", p.self.String())
	}
	started := time.Now()
	h.sender.cur.Store(c)
	defer h.sender.cur.CompareAndSwap(c, nil)
	defer c.Close()
	// The roster first: the server then delivers subscription requests
	// (the gateway's among them) to this session.
	roster := xmltree.New(xmppclient.NS, "iq", "type", "get").Add(xmltree.New("jabber:iq:roster", "query"))
	if _, err := c.SendIQ(ctx, roster); err != nil {
		return time.Since(started), fmt.Errorf("host: roster: %w", err)
	}
	if err := c.Send(ctx, h.presenceStanza()); err != nil {
		return time.Since(started), fmt.Errorf("host: initial presence: %w", err)
	}
	h.log.Info("host: connected", "jid", p.self.String())
	h.connOnce.Do(func() { close(h.connected) })
	h.kick()
	select {
	case <-c.Done():
		h.log.Warn("host: session ended", "err", c.Err())
	case <-ctx.Done():
	}
	return time.Since(started), nil
}

// presenceStanza is the broadcast presence: available, or away with a
// status while the backend is down.
func (h *Host) presenceStanza() *xmltree.Element {
	h.upMu.Lock()
	up := h.up
	h.upMu.Unlock()
	p := xmltree.New(xmppclient.NS, "presence")
	if !up {
		p.Add(xmltree.New(xmppclient.NS, "show").WithText("xa"),
			xmltree.New(xmppclient.NS, "status").WithText("backend unavailable"))
	}
	return p
}

// gatewayPresence approves the gateway's subscription to the account's
// presence: the gateway lists a self-registered endpoint only while it is
// online. Subscriptions from callers are dirxmpp's (by visibility).
func (h *Host) gatewayPresence(ctx context.Context, pr component.Presence) {
	if h.gateway.Domainpart() == "" || !pr.From.Bare().Equal(h.gateway) {
		return
	}
	h.log.Debug("host: presence from the gateway", "type", pr.Type)
	if pr.Type == "subscribe" {
		_ = h.sender.Send(ctx, component.NewPresence("subscribed", h.account, h.gateway))
	}
}

// publisher registers the backend's manifest in the host's own directory
// and queues its self-registration at the gateway.
type publisher struct{ h *Host }

func (p publisher) Publish(ctx context.Context, manifest []byte) (string, string, error) {
	m, err := p.h.Registry.Register(ctx, manifest)
	if err != nil {
		return "", "", err
	}
	if err := p.h.Registry.Activate(ctx, m.Endpoint, m.Version, m.Hash); err != nil {
		return "", "", err
	}
	p.h.log.Info("host: manifest active", "endpoint", m.Endpoint, "version", m.Version, "hash", m.Hash)
	p.h.kick()
	return m.Version, m.Hash, nil
}

type availability struct{ h *Host }

func (a availability) SetAvailable(endpoint string, up bool) {
	a.h.upMu.Lock()
	changed := a.h.up != up
	a.h.up = up
	a.h.upMu.Unlock()
	if changed {
		_ = a.h.sender.Send(context.Background(), a.h.presenceStanza())
	}
}

func (h *Host) kick() {
	select {
	case h.sync <- struct{}{}:
	default:
	}
}
