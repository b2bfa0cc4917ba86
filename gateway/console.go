package gateway

import (
	"context"
	"strings"
	"sync/atomic"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/cluster"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// ConsoleResource is the resource of the route of tasks the operator web
// console runs (console.Deps.RouteResource): the console follows them
// in the store, so their events are not sent over XMPP to the operator's
// account.
const ConsoleResource = "agentgw-console"

func consoleRoute(route string) bool {
	_, res, ok := strings.Cut(route, "/")
	return ok && res == ConsoleResource
}

// TaskWatch passes the ID of every task event this instance commits to
// one watcher (the console's live task pages: console.Server.TaskChanged).
// The watcher must not block.
type TaskWatch struct {
	fn atomic.Pointer[func(taskID string)]
}

// Watch sets the watcher (nil for none).
func (w *TaskWatch) Watch(fn func(taskID string)) {
	if fn == nil {
		w.fn.Store(nil)
		return
	}
	w.fn.Store(&fn)
}

// Notify is the engine's notifier side.
func (w *TaskWatch) Notify(ev tasks.Event) {
	if p := w.fn.Load(); p != nil {
		(*p)(ev.TaskID)
	}
}

// BackendState tells the console an endpoint's backend: "ready",
// "starting" (a backend that reports readiness and is not ready yet) or
// "none" (no backend in this gateway).
func (g *Gateway) BackendState(endpoint string) string {
	b, ok := g.backend(endpoint)
	if !ok {
		return "none"
	}
	if rb, ok := b.(backendkit.Readiness); ok && !rb.Ready() {
		return "starting"
	}
	return "ready"
}

// BridgeInfo is one configured agent's bridge, for the console.
type BridgeInfo struct {
	Kind     string // the [agents.<kind>] section: mcp, connector, acc, oan, a2a …; "manifest" for a static agent; "acc connector"
	Endpoint string
	Name     string // an ACC connector's name
	State    string // BackendState; an ACC connector's enrolled or revoked
	Detail   string // public facts only (an ACC connector's ID and certificate fingerprint)
}

// BridgeList lists the configured agents by bridge kind: their endpoint
// and backend state; nothing from their sections (which hold URLs and
// secret sources) is shown.
func (g *Gateway) BridgeList(ctx context.Context) []BridgeInfo {
	var out []BridgeInfo
	if g.Store.ACC != nil {
		cs, err := g.Store.ACC.Connectors(ctx)
		if err != nil {
			g.log.Warn("console: ACC connectors", "err", err)
		}
		for _, c := range cs {
			st := "enrolled"
			if c.Revoked() {
				st = "revoked " + c.RevokedAt
			}
			out = append(out, BridgeInfo{Kind: "acc connector", Name: c.Name, State: st, Detail: "id " + c.ID + ", certificate sha-256 " + c.CertSHA256})
		}
	}
	for _, a := range g.cfg.Agents {
		kind := a.Backend
		if kind == "" {
			kind = "manifest"
		}
		ep := a.JID
		if j, err := jid.Parse(a.JID); err == nil {
			ep = j.Bare().String()
		}
		out = append(out, BridgeInfo{Kind: kind, Endpoint: ep, State: g.BackendState(ep)})
		// What the bridge tells of itself: channels, accounts, cards.
		if b, ok := g.backend(ep); ok {
			if d, ok := b.(backendkit.Describer); ok {
				for _, x := range d.BridgeDetails() {
					out = append(out, BridgeInfo{Kind: x.Kind, Endpoint: ep, Name: x.Name, State: x.State, Detail: x.Detail})
				}
			}
		}
	}
	return out
}

// ClusterMembers are the instances sharing the store and their task
// leases; ok false outside cluster mode.
func (g *Gateway) ClusterMembers(ctx context.Context) (members []taskdb.Instance, leases []cluster.Lease, ok bool, err error) {
	if g.cl == nil {
		return nil, nil, false, nil
	}
	if c, isCluster := g.Store.Tasks.(taskdb.Cluster); isCluster {
		if members, err = c.Instances(ctx); err != nil {
			return nil, nil, true, err
		}
	}
	leases, err = g.cl.bus.List(ctx)
	return members, leases, true, err
}
