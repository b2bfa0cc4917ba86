package gateway

import (
	"context"
	"sort"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/directory/dirxmpp"
	"github.com/agentgw/agentgw/messaging"
)

// buildMessaging creates the Human Messaging service, registers its
// message handler and attaches its Chat to every backend that originates
// messages, before any backend starts. A backend serving several endpoints
// gets one Chat that may send from those endpoints only.
func (g *Gateway) buildMessaging() {
	m := g.cfg.Messaging
	o := messaging.Options{
		Domain:   g.domain,
		Sender:   g.Component,
		Resolver: dirxmpp.NewResolver(g.Registry, g.Policy),
		Backend: func(endpoint string) (any, bool) {
			b, ok := g.backends[endpoint]
			return b, ok
		},
		Limits: messaging.Limits{
			MaxBodyBytes: m.MaxBodyBytes,
			MaxFiles:     m.MaxFiles,
			PerSecond:    m.PerConversationPerSecond,
			Burst:        m.PerConversationBurst,
			MaxQueued:    m.MaxQueued,
		},
		Log: g.log.With("part", "messaging"),
	}
	if r := g.opts.Redactor; r != nil {
		o.Redact = r.Scrub
	}
	g.Messaging = messaging.New(o)
	g.Messaging.Register(g.Router)

	served := map[backendkit.ChatAttacher][]string{}
	for ep, b := range g.backends {
		if a, ok := b.(backendkit.ChatAttacher); ok {
			served[a] = append(served[a], ep)
		}
	}
	for a, eps := range served {
		sort.Strings(eps)
		a.AttachChat(g.Messaging.ChatFor(eps...))
	}
}

// checkBlocking warns, after each connect, about local servers that do
// not implement XEP-0191, when some backend converses (only then does an
// agent originate chat messages).
func (g *Gateway) checkBlocking(ctx context.Context) {
	conversing := false
	for _, b := range g.backends {
		if _, ok := b.(backendkit.Conversant); ok {
			conversing = true
		}
	}
	if conversing && len(g.cfg.XMPP.LocalDomains) > 0 {
		g.Messaging.CheckBlocking(ctx, g.cfg.XMPP.LocalDomains)
	}
}
