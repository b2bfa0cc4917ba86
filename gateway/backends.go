package gateway

import (
	"context"
	"fmt"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/connectorbridge"
	"github.com/agentgw/agentgw/mcpbridge"
)

// publisher registers and activates a backend's generated manifest. Old
// versions stay registered for the tasks pinned to them.
type publisher struct{ g *Gateway }

func (p publisher) Publish(ctx context.Context, manifestJSON []byte) (string, string, error) {
	m, err := p.g.Registry.Register(ctx, manifestJSON)
	if err != nil {
		return "", "", err
	}
	if err := p.g.Registry.Activate(ctx, m.Endpoint, m.Version, m.Hash); err != nil {
		return "", "", err
	}
	p.g.log.Info("backend manifest active", "endpoint", m.Endpoint, "version", m.Version, "hash", m.Hash)
	return m.Version, m.Hash, nil
}

// availability forwards backend up/down changes to the endpoints' presence.
type availability struct{ g *Gateway }

func (a availability) SetAvailable(endpoint string, up bool) {
	a.g.Metrics.SetBackendUp(endpoint, up)
	if a.g.Presence != nil {
		a.g.Presence.SetAvailable(endpoint, up)
	}
}

func (g *Gateway) buildBackends(ctx context.Context) error {
	for _, a := range g.cfg.Agents {
		j, err := jid.Parse(a.JID)
		if err != nil {
			return fmt.Errorf("agent %q: %w", a.JID, err)
		}
		ep := j.Bare().String()
		log := g.log.With("endpoint", ep)
		switch {
		case a.MCP != nil:
			b, err := mcpbridge.New(mcpbridge.Options{
				Agent: a, ComponentDomain: g.domain.String(), ConfigDir: g.cfg.Dir,
				Publisher: publisher{g}, Availability: availability{g}, Logger: log,
				Secrets: g.secrets,
			})
			if err != nil {
				return fmt.Errorf("agent %s: %w", ep, err)
			}
			g.backends[ep] = b
			g.starters = append(g.starters, b.Start)
		case a.Connector != nil:
			o, err := connectorbridge.OptionsFromConfig(g.cfg, a)
			if err != nil {
				return err
			}
			o.Endpoint = ep
			o.Bindings, o.Publisher, o.Availability, o.Logger, o.Secrets = g.bindings, publisher{g}, availability{g}, log, g.secrets
			b, err := connectorbridge.New(o)
			if err != nil {
				return fmt.Errorf("agent %s: %w", ep, err)
			}
			g.backends[ep] = b
			g.starters = append(g.starters, b.Start)
		}
	}
	return nil
}

// secrets lists every configured secret, for the bridges' own scrubbing.
func (g *Gateway) secrets() []string { return Secrets(g.cfg) }

// backendReadiness adapts the bridges' own state to readyBackend: a bridge
// is ready once it has published its manifest, which it does only with a
// live session.
func backendReadiness(b any) (readyBackend, bool) {
	switch x := b.(type) {
	case readyBackend:
		return x, true
	case *mcpbridge.Backend:
		return readyFunc(func() bool { v, _ := x.Current(); return v != "" }), true
	case *connectorbridge.Backend:
		return readyFunc(func() bool { v, _, _ := x.Published(); return v != "" }), true
	}
	return nil, false
}

type readyFunc func() bool

func (f readyFunc) Ready() bool { return f() }
