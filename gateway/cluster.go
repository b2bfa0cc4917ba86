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
// trust changes reach every instance through the store's change generation,
// polled every 250 ms (Registry.Watch, GrantTable.Watch).

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
func (g *Gateway) leaseBackend(ep, lease string, features tasks.Features, newTerm func() (LeasedTerm, error)) error {
	lb := &leasedBackend{self: g.cl.instance, features: features}
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
	g.backends[ep] = lb
	return nil
}

// leasedBackend is a connection-holding backend in cluster mode: the
// current lease term's backend, or none on an instance without the lease.
type leasedBackend struct {
	self     string
	features tasks.Features
	mu       sync.Mutex
	cur      *LeasedTerm
	holder   string
}

var _ tasks.Backend = (*leasedBackend)(nil)

func (l *leasedBackend) set(t *LeasedTerm)  { l.mu.Lock(); l.cur = t; l.mu.Unlock() }
func (l *leasedBackend) setHolder(h string) { l.mu.Lock(); l.holder = h; l.mu.Unlock() }

func (l *leasedBackend) Features() tasks.Features { return l.features }

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
