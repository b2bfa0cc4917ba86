package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/cluster"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/internal/metrics"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/tasks"
)

// Cluster mode (docs/cluster.md): with driver postgres this instance is one
// of several sharing the database. The task engine owns tasks by lease
// (tasks.ClusterConfig); a connector agent's one connection runs on the
// instance holding its lease, and its tasks are routed there. Directory and
// trust changes reach every instance through the store's change generation:
// announced by NOTIFY on commit (onChangeNotice), and polled every 250 ms
// as the fallback (Registry.Watch, GrantTable.Watch).

// ErrLeaseLost is Run's error when this instance's lease expired while it
// ran (cut off from the database for longer than [cluster] lease_seconds):
// survivors may own its tasks, so it stopped. The unit restarts it.
var ErrLeaseLost = errors.New("gateway: this instance's cluster lease expired; stopped so that no task runs twice (it rejoins on restart)")

type clusterParts struct {
	instance string
	bus      *pg.Cluster
	ttl      time.Duration
	lost     atomic.Bool
	mu       sync.Mutex
	cancel   context.CancelFunc
	holders  sync.Map // endpoint -> holder instance of its connection lease
	leased   []*cluster.Singleton
	chat     *leaseChat // the chat relay of leased conversing backends
	held     []*heldGroup
}

// setupCluster opens the bus when the store is PostgreSQL.
func (g *Gateway) setupCluster(ctx context.Context) error {
	if g.Store == nil || g.Store.Postgres == nil {
		return nil
	}
	bus, err := g.Store.OpenCluster(ctx, g.log)
	if err != nil {
		return err
	}
	g.cl = &clusterParts{instance: g.cfg.Cluster.Instance, bus: bus, ttl: g.cfg.LeaseTTL()}
	g.log.Info("cluster mode", "instance", g.cl.instance, "lease", g.cl.ttl)
	return nil
}

// componentRelay adds cluster mode to the component's config: IQ answers
// read by another member reach this one over the bus (component/relay.go),
// and the stream header carries Openfire's allowMultiple unless [cluster]
// allow_multiple is false.
func (g *Gateway) componentRelay(cc component.Config) component.Config {
	if g.cl == nil {
		return cc
	}
	cc.Instance, cc.Relay, cc.RelayMaxBytes = g.cl.instance, g.cl.bus, cluster.MaxPayload
	cc.AllowMultiple = g.cfg.ClusterAllowMultiple()
	return cc
}

// Instance is this gateway's cluster instance name, "" outside cluster
// mode.
func (g *Gateway) Instance() string {
	if g.cl == nil {
		return ""
	}
	return g.cl.instance
}

func (g *Gateway) newMetrics() *metrics.Metrics {
	if g.cl == nil {
		return metrics.New()
	}
	return metrics.NewInstance(g.cl.instance)
}

// clusterConfig is the engine's cluster configuration (nil: single).
func (g *Gateway) clusterConfig() *tasks.ClusterConfig {
	c := g.cl
	if c == nil {
		return nil
	}
	return &tasks.ClusterConfig{
		Instance: c.instance, Bus: c.bus, LeaseTTL: c.ttl,
		OnLeaseLost: func() {
			c.lost.Store(true)
			c.mu.Lock()
			cancel := c.cancel
			c.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		},
		OwnerOf: func(endpoint string) string {
			if h, ok := c.holders.Load(endpoint); ok {
				return h.(string)
			}
			return ""
		},
	}
}

// runCluster registers Run's cancel (for a lost lease) and starts the
// lease competitions of the connection-holding backends.
func (g *Gateway) runCluster(ctx context.Context, cancel context.CancelFunc, goRun func(string, func(context.Context) error)) {
	c := g.cl
	if c == nil {
		return
	}
	c.mu.Lock()
	c.cancel = cancel
	c.mu.Unlock()
	for _, s := range c.leased {
		s := s
		goRun("connection lease "+s.Name, func(ctx context.Context) error { s.Serve(ctx); return nil })
	}
	goRun("change notices", func(ctx context.Context) error {
		stop := onChangeNotice(c.bus, g.Registry.Kick, g.Grants.Kick)
		<-ctx.Done()
		stop()
		return nil
	})
}

// onChangeNotice runs every kick when another member (or an operator
// command) commits a directory, grant or ban change (pg.GenerationChannel),
// so the reload follows at once; the 250 ms polls stay the fallback for a
// lost notice.
func onChangeNotice(bus cluster.Bus, kicks ...func()) (stop func()) {
	return bus.Subscribe(pg.GenerationChannel, func([]byte) {
		for _, k := range kicks {
			k()
		}
	})
}

// clusterErr is Run's error after a lost lease.
func (g *Gateway) clusterErr() error {
	if g.cl != nil && g.cl.lost.Load() {
		return ErrLeaseLost
	}
	return nil
}

func (g *Gateway) closeCluster() {
	if g.cl != nil {
		if g.cl.chat != nil {
			g.cl.chat.unsub()
		}
		g.cl.bus.Close()
	}
}

// LeasedTerm is one lease term of a connection-holding backend: the
// backend that executes tasks, Run holding its connection until ctx ends,
// and Ready (optional) telling when it serves.
type LeasedTerm struct {
	Backend tasks.Backend
	Run     func(ctx context.Context) error
	Ready   func() bool
}

// leaseBackend registers endpoint ep as a backend that holds one
// connection and so runs on one instance at a time: every instance competes
// for lease; the holder builds a fresh term with newTerm and runs it, the
// others route the endpoint's admissions to the holder. Any bridge of that
// kind (xAgent connector, agent-control-center, OpenAgentNetwork) plugs in
// with its own newTerm; outside cluster mode it is not used.
func (g *Gateway) leaseBackend(ep, lease string, template tasks.Backend, newTerm func() (LeasedTerm, error)) error {
	lb := &leasedBackend{self: g.cl.instance, features: template.Features()}
	var backend tasks.Backend = lb
	if originatesChat(ep, template) {
		// Chat goes from and to the holder (leasechat.go).
		lc := newLeasedChat(g, ep, lb, template, lb.termBackend, lb.holderNow, false)
		lb.attach = lc.attach
		backend = lc
	}
	s := &cluster.Singleton{
		Leases: g.cl.bus, Name: lease, Holder: g.cl.instance, TTL: g.cl.ttl,
		Log: g.log.With("endpoint", ep),
		Run: func(ctx context.Context) error {
			term, err := newTerm()
			if err != nil {
				return err
			}
			lb.set(&term)
			defer lb.set(nil)
			return term.Run(ctx)
		},
		OnHolder: func(h string) {
			lb.setHolder(h)
			if h == "" {
				g.cl.holders.Delete(ep)
			} else {
				g.cl.holders.Store(ep, h)
			}
		},
	}
	g.cl.leased = append(g.cl.leased, s)
	g.backends[ep] = backend
	return nil
}

// holdShared runs a resource several endpoints share (the ACC listener)
// on the instance holding lease; the endpoints' admissions are routed to
// that instance, whose registered backends execute them.
func (g *Gateway) holdShared(lease string, endpoints func() []string, run func(context.Context) error) {
	hg := &heldGroup{endpoints: endpoints}
	s := &cluster.Singleton{
		Leases: g.cl.bus, Name: lease, Holder: g.cl.instance, TTL: g.cl.ttl,
		Log: g.log,
		Run: func(ctx context.Context) error {
			hg.held.Store(true)
			defer hg.held.Store(false)
			return run(ctx)
		},
		OnHolder: func(h string) {
			hg.holder.Store(h)
			for _, ep := range endpoints() {
				if h == "" {
					g.cl.holders.Delete(ep)
				} else {
					g.cl.holders.Store(ep, h)
				}
			}
		},
	}
	g.cl.leased = append(g.cl.leased, s)
	g.cl.held = append(g.cl.held, hg)
}

// heldGroup is a held shared resource's state on this member.
type heldGroup struct {
	endpoints func() []string
	held      atomic.Bool
	holder    atomic.Value // string
}

func (h *heldGroup) holderNow() string {
	s, _ := h.holder.Load().(string)
	return s
}

// wrapHeldChat puts the chat relay in front of the endpoints of held
// resources whose backends chat (an ACC agent), once every backend is
// built: their chat runs on the holder, like their tasks.
func (g *Gateway) wrapHeldChat() {
	if g.cl == nil {
		return
	}
	for _, hg := range g.cl.held {
		for _, ep := range hg.endpoints() {
			b, ok := g.backends[ep]
			if !ok || !originatesChat(ep, b) {
				continue
			}
			local := func() any {
				if hg.held.Load() {
					return b
				}
				return nil
			}
			g.backends[ep] = newLeasedChat(g, ep, b, b, local, hg.holderNow, true)
		}
	}
}

// leasedBackend is a connection-holding backend in cluster mode: the
// current lease term's backend, or none on an instance without the lease.
type leasedBackend struct {
	self     string
	features tasks.Features
	mu       sync.Mutex
	cur      *LeasedTerm
	holder   string
	attach   func(backend any) // gives a new term the messaging Chat
}

var _ tasks.Backend = (*leasedBackend)(nil)

func (l *leasedBackend) set(t *LeasedTerm) {
	if t != nil && l.attach != nil {
		l.attach(t.Backend)
	}
	l.mu.Lock()
	l.cur = t
	l.mu.Unlock()
}
func (l *leasedBackend) setHolder(h string) { l.mu.Lock(); l.holder = h; l.mu.Unlock() }

func (l *leasedBackend) Features() tasks.Features { return l.features }

// termBackend is the current term's backend, nil without the lease.
func (l *leasedBackend) termBackend() any {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		return nil
	}
	return l.cur.Backend
}

func (l *leasedBackend) holderNow() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holder
}

// Ready: the holder once its term serves; another instance has nothing to
// wait for once it knows the holder.
func (l *leasedBackend) Ready() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holder != l.self {
		return l.holder != ""
	}
	return l.cur != nil && (l.cur.Ready == nil || l.cur.Ready())
}

// Execute runs on the current term's backend. A task that reaches an
// instance without the connection (the lease moved after admission) fails
// retryable: the caller invokes again and is routed to the new holder.
func (l *leasedBackend) Execute(ctx context.Context, call tasks.Call, run tasks.Run) {
	l.mu.Lock()
	t := l.cur
	l.mu.Unlock()
	if t == nil {
		run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Retryable: true,
			Message: "The agent's connection is held by another gateway instance right now; retry."})
		return
	}
	t.Backend.Execute(ctx, call, run)
}
