package mcpfront

import (
	"context"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
)

// catalogWatcher is the optional push side of a Client
// (*agentclient.Client has it): agentgw's catalog change PubSub node.
// With it the front refreshes as soon as a gateway announces an
// activation or deactivation, so hosts get notifications/tools/list_changed
// within a fraction of a second; the poll stays as the fallback for
// gateways without the node and for changes the node does not carry
// (grants, presence of new gateways).
type catalogWatcher interface {
	SubscribeCatalog(ctx context.Context, gw jid.JID) error
	OnCatalogChange(func(agentclient.CatalogChange))
}

// watchCatalog installs the change callback; New calls it.
func (f *Front) watchCatalog() {
	cw, ok := f.c.(catalogWatcher)
	if !ok {
		return
	}
	cw.OnCatalogChange(func(ch agentclient.CatalogChange) {
		f.log.Debug("catalog change pushed", "gateway", ch.Gateway.String(), "endpoint", ch.Endpoint, "active", ch.Active)
		f.soon()
	})
}

// subscribeCatalogs subscribes to the catalog node of every gateway the
// front lists. Gateways keep subscriptions in memory, so this runs after
// every refresh: cheap, idempotent, and it re-subscribes after a gateway
// restart. A gateway without the node answers an error, which is ignored
// (polling covers it).
func (f *Front) subscribeCatalogs(ctx context.Context) {
	cw, ok := f.c.(catalogWatcher)
	if !ok {
		return
	}
	gws := f.opts.Gateways
	if len(gws) == 0 {
		f.mu.Lock()
		gws = append([]jid.JID(nil), f.gateways...)
		f.mu.Unlock()
	}
	for _, gw := range gws {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := cw.SubscribeCatalog(sctx, gw)
		cancel()
		if err != nil && ctx.Err() == nil {
			f.log.Debug("catalog subscription refused; polling only", "gateway", gw.String(), "error", err)
		}
	}
}
