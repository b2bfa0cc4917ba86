// Package gateway assembles agentgw from its configuration: the store, the
// directory, federation policy, the task engine, the backends, the XMPP
// wire handlers and the component session, and runs them together.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/adhoc"
	"github.com/agentgw/agentgw/adhoc/admincmd"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/catalogpush"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/directory/dirxmpp"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/metrics"
	"github.com/agentgw/agentgw/messaging"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskxmpp"
)

// Options adjust a gateway for tests and benchmarks; nil means defaults.
type Options struct {
	// Clock replaces the wall clock.
	Clock clock.Clock
	// ExtraBackends adds backends by endpoint JID (tests use scripted
	// executors); their manifests are registered separately.
	ExtraBackends map[string]tasks.Backend
	// Redactor scrubs secrets from backend output (MCP server stderr,
	// connector errors) before it is logged.
	Redactor *backendkit.Redactor
	// Bridges replaces the bridge table (Bridges); tests add a bridge to
	// a copy. The config must have been loaded with the same table.
	Bridges backendkit.Bridges
}

// Gateway is one assembled, runnable gateway.
type Gateway struct {
	cfg  *config.Config
	log  *slog.Logger
	opts Options

	// DB is the SQLite store; nil with driver postgres. Store covers both.
	DB       *sqlite.DB
	Store    *Store
	Registry *directory.Registry
	Policy   *federation.Policy
	Grants   *federation.GrantTable
	Limiter  *federation.Limiter
	SelfReg  *dirxmpp.SelfRegistration // nil unless [xmpp] self_register_domains
	Engine   *tasks.Engine
	// TaskEvents reports each committed task event's task ID to a watcher
	// (the console's live pages).
	TaskEvents TaskWatch
	Router     *component.Router
	Component  *component.Component
	Presence   *dirxmpp.Presence
	Adhoc      *adhoc.Service
	// AdminCommands are the admin operations as ad-hoc commands.
	AdminCommands *admincmd.Service
	Catalog       *catalogpush.Service
	Metrics       *metrics.Metrics
	Messaging     *messaging.Service

	backends map[string]tasks.Backend
	starters []func(ctx context.Context) error
	domain   jid.JID
	cl       *clusterParts // cluster mode (driver postgres); nil otherwise
	bridges  backendkit.Bridges
}

// New builds a gateway. It opens the store and checks everything it can
// before connecting anywhere, so configuration mistakes surface at once.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, opts *Options) (*Gateway, error) {
	if log == nil {
		log = slog.Default()
	}
	g := &Gateway{cfg: cfg, log: log, backends: map[string]tasks.Backend{}}
	if opts != nil {
		g.opts = *opts
	}
	if g.opts.Clock == nil {
		g.opts.Clock = clock.Real{}
	}
	g.bridges = g.opts.Bridges
	if g.bridges == nil {
		g.bridges = Bridges
	}
	if err := g.bridges.Check(); err != nil {
		panic(err) // a programming error in the table, not a config mistake
	}
	secret, err := cfg.ComponentSecret()
	if err != nil {
		return nil, fmt.Errorf("component secret: %w", err)
	}
	g.domain, err = jid.Parse(cfg.XMPP.ComponentDomain)
	if err != nil {
		return nil, fmt.Errorf("component_domain: %w", err)
	}

	g.Store, err = OpenStores(ctx, cfg)
	if err != nil {
		return nil, err
	}
	g.DB = g.Store.SQLite
	ok := false
	defer func() {
		if !ok {
			g.Store.Close()
		}
	}()
	// A gateway on a read-only store would serve discovery and refuse
	// every admission; it does not start.
	if err := g.Store.CheckWritable(ctx); err != nil {
		return nil, err
	}
	if err := g.setupCluster(ctx); err != nil {
		return nil, err
	}
	g.Registry, err = directory.NewRegistry(ctx, g.Store.Directory, log)
	if err != nil {
		return nil, err
	}
	g.Registry.SetDomain(g.domain.String())
	if len(cfg.XMPP.SelfRegisterDomains) > 0 {
		g.SelfReg = dirxmpp.NewSelfRegistration(cfg.XMPP.SelfRegisterDomains, g.Registry, g.Store.SelfReg, g.opts.Clock.Now, log)
	}
	g.Grants, err = federation.NewGrantTable(ctx, g.Store.Grants)
	if err != nil {
		return nil, err
	}
	admins, err := config.ParsePrincipals(cfg.XMPP.Admins)
	if err != nil {
		return nil, fmt.Errorf("[xmpp] admins: %w", err)
	}
	localDomains, err := config.ParsePrincipals(cfg.XMPP.LocalDomains)
	if err != nil {
		return nil, fmt.Errorf("[xmpp] local_domains: %w", err)
	}
	rules, err := endpointRules(cfg)
	if err != nil {
		return nil, err
	}
	g.Policy = federation.New(localDomains, admins, rules)
	g.Policy.SetGrants(g.Grants)
	g.Limiter = federation.NewLimiter(rates(cfg.Federation.Rates), rates(cfg.Federation.Local), cfg.Federation.DomainMultiplier, g.Policy.IsLocal)

	g.Router = component.NewRouter(g.domain, dirxmpp.NewResolver(g.Registry, g.Policy), log)
	g.Component = component.New(g.componentRelay(component.Config{
		Domain:       g.domain,
		Addr:         cfg.XMPP.Server,
		Secret:       secret,
		Logger:       log,
		PingInterval: cfg.PingInterval(),
		IQTimeout:    cfg.IQTimeout(),
		Lang:         cfg.XMPP.Lang,
	}), g.Router)

	for ep, b := range g.opts.ExtraBackends {
		g.backends[ep] = b
	}
	if err := g.buildBackends(ctx); err != nil {
		return nil, err
	}
	g.wrapHeldChat()
	g.buildMessaging()

	approvals, err := newApprovals(cfg)
	if err != nil {
		return nil, err
	}
	g.Metrics = g.newMetrics()
	starts := &startTimes{}
	progress := adhoc.NewProgressCache(0)
	notifier := &taskxmpp.Notifier{Sender: g.Component, Log: log, OnSendError: g.Metrics.EventSendFailed}
	g.Engine, err = tasks.New(tasks.Config{
		Driver:         g.Store.Tasks,
		Directory:      g.Registry,
		Policy:         g.Policy,
		Backends:       g.backend,
		Notifier:       teeNotifier{teeNotifier{observedNotifier{next: notifier, m: g.Metrics, starts: starts}, progress}, &g.TaskEvents},
		Clock:          g.opts.Clock,
		Log:            log,
		ReplayWindow:   time.Duration(cfg.Tasks.ReplaySeconds) * time.Second,
		Retention:      time.Duration(cfg.Tasks.RetentionSeconds) * time.Second,
		DefaultTimeout: time.Duration(cfg.Tasks.DefaultTimeoutSeconds) * time.Second,
		InputTimeout:   time.Duration(cfg.Tasks.InputTimeoutSeconds) * time.Second,
		MaxActive:      cfg.Tasks.MaxActive,
		// Coalesces progress per task (spec: progress MUST be rate-limited).
		ProgressPerSecond: cfg.Tasks.ProgressPerSecond,
		// Quotas, so one principal or domain cannot exhaust max_active.
		MaxActivePerPrincipal: cfg.Tasks.MaxActivePerPrincipal,
		MaxActivePerDomain:    cfg.Tasks.MaxActivePerDomain,
		MaxRetainedBytes:      cfg.Tasks.RetainedBytesPerPrincipal,
		IsLocal:               g.Policy.IsLocal,
		MaxRunningPerBackend:  cfg.Tasks.MaxRunningPerBackend,
		RunningLimit:          runningLimits(cfg, g.bridges),
		Approvals:             approvals,
		MaxDelegationDepth:    cfg.Tasks.MaxDelegationDepth,
		Cluster:               g.clusterConfig(),
	})
	if err != nil {
		return nil, err
	}
	g.Registry.SetReferenceChecker(g.Engine)

	g.Adhoc = adhoc.New(adhoc.Deps{Reader: g.Registry, Policy: g.Policy, Log: log, Progress: progress,
		Engine:   observedAdhoc{Engine: g.Engine, obs: observedEngine{Engine: g.Engine, m: g.Metrics, starts: starts}},
		Runnable: func(ep string) bool { _, ok := g.backend(ep); return ok }})
	g.Adhoc.Register(g.Router)
	g.Catalog = catalogpush.New(catalogpush.Deps{Domain: g.domain, Reader: g.Registry, Policy: g.Policy, Sender: g.Component, Log: log})
	g.Catalog.Register(g.Router)
	deps := dirxmpp.Deps{
		Domain:        g.domain,
		GatewayName:   cfg.XMPP.GatewayName,
		Reader:        g.Registry,
		Admin:         g.Registry,
		SelfRegister:  g.SelfReg,
		Policy:        g.Policy,
		TaskFeatures:  g.taskFeatures,
		ChatFeatures:  g.Messaging.Features,
		ReplaySeconds: cfg.Tasks.ReplaySeconds,
		Sender:        g.Component,
		Subscribers:   g.Store.Presence,
		Log:           log,
	}
	deps.Nodes, deps.GatewayFeatures = g.Adhoc, g.Catalog.Features()
	// Administration from any XMPP client: the admin IQs' operations as
	// ad-hoc commands at the gateway's JID, for [xmpp] admins only.
	g.AdminCommands = admincmd.New(admincmd.Deps{IsAdmin: g.Policy.IsAdmin, Admin: g.Registry, Grants: g.Store.Grants,
		SelfReg: g.Store.SelfReg, Tasks: g.Store.Tasks, Cancel: g.Engine.CancelAsOperator, IsLocal: g.Policy.IsLocal, Log: log})
	g.AdminCommands.Register(g.Router)
	deps.GatewayNodes = g.AdminCommands
	g.Presence = dirxmpp.Register(g.Router, deps)
	g.Catalog.SetPresence(g.Presence)
	g.Registry.OnChange(g.Catalog.Signal)
	(&taskxmpp.Handlers{Engine: observedEngine{Engine: g.Engine, m: g.Metrics, starts: starts}, Lister: g.Engine, Log: log}).Register(g.Router)
	g.Metrics.SetTaskStateSource(g.taskCounts)
	g.Metrics.SetStoreCheck(g.Store.Ping)
	g.Router.SetLimiter(func(requester jid.JID, space, local string) bool {
		return g.Limiter.Allow(requester.String(), opClass(space, local))
	})
	g.Router.SetInvocationCheck(func(ctx context.Context, requester, endpoint jid.JID) bool {
		caller, ep := requester.String(), endpoint.String()
		// Both run whatever the first answers: the ownership read must not
		// be skipped for some unauthorized requesters and not others.
		may := g.Policy.CanInvoke(caller, ep)
		holds := g.Engine.HoldsTask(ctx, caller, ep)
		return may || holds
	})
	// An admin acts only as themselves: a front's token cannot carry
	// admin rights.
	g.Router.SetTrustedFronts(trustedFronts(cfg.Policy.TrustedFronts), func(p jid.JID) bool { return !g.Policy.IsAdmin(p.String()) })
	g.Router.HandleMessage(notifier.HandleMessage)

	if err := g.registerStaticManifests(ctx); err != nil {
		return nil, err
	}
	ok = true
	return g, nil
}

func (g *Gateway) backend(endpoint string) (tasks.Backend, bool) {
	b, ok := g.backends[endpoint]
	return b, ok
}

// taskFeatures advertises the task features an endpoint's backend really
// supports; an endpoint without a backend advertises none.
func (g *Gateway) taskFeatures(endpoint string) []string {
	b, ok := g.backends[endpoint]
	if !ok {
		return nil
	}
	f := b.Features()
	// Every endpoint's invoke accepts the delegation-depth extension.
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

// registerStaticManifests registers and activates every [[agents]] entry
// with a manifest file. Registering the same content again is a no-op.
func (g *Gateway) registerStaticManifests(ctx context.Context) error {
	for _, a := range g.cfg.Agents {
		if a.Manifest == "" {
			continue
		}
		raw, err := os.ReadFile(g.cfg.Path(a.Manifest))
		if err != nil {
			return fmt.Errorf("agent %s: %w", a.JID, err)
		}
		m, err := g.Registry.Register(ctx, raw)
		if err != nil {
			return fmt.Errorf("agent %s: manifest %s: %w", a.JID, a.Manifest, err)
		}
		want, _ := jid.Parse(a.JID)
		if m.Endpoint != want.Bare().String() {
			return fmt.Errorf("agent %s: manifest %s declares agent.jid %s", a.JID, a.Manifest, m.Endpoint)
		}
		if err := g.Registry.Activate(ctx, m.Endpoint, m.Version, m.Hash); err != nil {
			return fmt.Errorf("agent %s: activating version %s: %w", a.JID, m.Version, err)
		}
		g.log.Info("static agent active", "endpoint", m.Endpoint, "version", m.Version, "hash", m.Hash)
	}
	return nil
}

// Run starts every part and blocks until ctx ends or the component hits a
// fatal error (wrong secret, another session for the domain).
func (g *Gateway) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	goRun := func(name string, f func(ctx context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				g.log.Error("gateway part stopped", "part", name, "err", err)
			}
		}()
	}
	goRun("directory watch", func(ctx context.Context) error { g.Registry.Watch(ctx, 250*time.Millisecond); return nil })
	goRun("catalog push", func(ctx context.Context) error { g.Catalog.Run(ctx); return nil })
	goRun("trust watch", func(ctx context.Context) error {
		g.Grants.Watch(ctx, 250*time.Millisecond, func(err error) { g.log.Warn("reloading trust grants failed", "err", err) })
		return nil
	})
	goRun("metrics state", g.watchComponent)
	if stop := g.startTelemetry(ctx); stop != nil {
		defer stop()
	}
	goRun("messaging", g.Messaging.Run)
	if addr := g.cfg.Metrics.Listen; addr != "" {
		goRun("metrics server", func(ctx context.Context) error { return g.Metrics.Serve(ctx, addr) })
		g.log.Info("metrics listening", "addr", addr)
	}
	for _, s := range g.starters {
		goRun("backend", s)
	}
	g.runCluster(ctx, cancel, goRun)
	// Tasks still accepted at the last stop are dispatched by Engine.Start;
	// give the backends a bounded time to come up first, so those tasks
	// reach a live backend instead of failing as unavailable.
	g.waitBackends(ctx, backendStartWait)
	if err := g.Engine.Start(ctx); err != nil {
		cancel()
		wg.Wait()
		return fmt.Errorf("task engine: %w", err)
	}
	g.Component.OnConnect(func(ctx context.Context) { g.Presence.Rebroadcast(ctx) })
	g.Component.OnConnect(g.checkBlocking)
	if g.SelfReg != nil {
		g.Component.OnConnect(g.SelfReg.Resubscribe)
	}
	err := g.Component.Run(ctx)
	cancel()
	wg.Wait()
	g.Engine.Close()
	if err := g.clusterErr(); err != nil {
		return err
	}
	var fatal *component.FatalError
	if errors.As(err, &fatal) {
		return err
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Close releases the store. Call it after Run returns.
func (g *Gateway) Close() error { g.closeCluster(); return g.Store.Close() }

// endpointRules builds the visible_to / invocable_by restrictions. An entry
// that is not a principal is an error, never dropped: an emptied list would
// mean "all local principals" (config.Validate refuses such files first).
func endpointRules(cfg *config.Config) (map[string]federation.EndpointRule, error) {
	rules := map[string]federation.EndpointRule{}
	for _, a := range cfg.Agents {
		if len(a.VisibleTo) == 0 && len(a.InvocableBy) == 0 {
			continue
		}
		j, err := jid.Parse(a.JID)
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", a.JID, err)
		}
		vis, err := config.ParsePrincipals(a.VisibleTo)
		if err != nil {
			return nil, fmt.Errorf("agent %s: visible_to %w", a.JID, err)
		}
		inv, err := config.ParsePrincipals(a.InvocableBy)
		if err != nil {
			return nil, fmt.Errorf("agent %s: invocable_by %w", a.JID, err)
		}
		rules[j.Bare().String()] = federation.EndpointRule{VisibleTo: vis, InvocableBy: inv}
	}
	return rules, nil
}

func rates(f config.Rates) map[federation.Op]federation.Rate {
	return map[federation.Op]federation.Rate{
		federation.OpDiscovery: {PerSecond: f.DiscoveryPerSecond, Burst: f.DiscoveryBurst},
		federation.OpSchema:    {PerSecond: f.SchemaPerSecond, Burst: f.SchemaBurst},
		federation.OpInvoke:    {PerSecond: f.InvokePerSecond, Burst: f.InvokeBurst},
		federation.OpInput:     {PerSecond: f.InputPerSecond, Burst: f.InputBurst},
	}
}

// opClass maps an IQ payload to its rate-limit budget.
func opClass(space, local string) federation.Op { return federation.OpOf(space, local) }

// backendStartWait bounds how long Run waits for backends before it starts
// the task engine and connects to the XMPP server.
const backendStartWait = 20 * time.Second

// waitBackends waits until every backend that can tell reports ready, or
// the timeout passes; it logs those that did not come up.
func (g *Gateway) waitBackends(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		var waiting []string
		for ep, b := range g.backends {
			if rb, ok := b.(backendkit.Readiness); ok && !rb.Ready() {
				waiting = append(waiting, ep)
			}
		}
		if len(waiting) == 0 {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			g.log.Warn("backends not ready; starting anyway (their tasks fail as retryable until they are)", "endpoints", waiting, "waited", timeout)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runningLimits is the per-agent override of max_running_per_backend.
// A bridge's fixed MaxRunning (ACC: one active run per agent) wins.
func runningLimits(cfg *config.Config, table backendkit.Bridges) func(endpoint string) int {
	limits := map[string]int{}
	for _, a := range cfg.Agents {
		if j, err := jid.Parse(a.JID); err == nil && a.MaxRunning > 0 {
			limits[j.Bare().String()] = a.MaxRunning
		}
		if b, ok := table.Lookup(a.Backend); ok && a.Section != nil && b.MaxRunning > 0 {
			if j, err := jid.Parse(a.JID); err == nil {
				limits[j.Bare().String()] = b.MaxRunning
			}
		}
	}
	return func(endpoint string) int { return limits[endpoint] }
}
