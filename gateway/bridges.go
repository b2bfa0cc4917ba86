package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/agentgw/agentgw/a2abridge"
	"github.com/agentgw/agentgw/accbridge"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/transfer"
	"github.com/agentgw/agentgw/mcpbridge"
	"github.com/agentgw/agentgw/oanbridge"
	"github.com/agentgw/agentgw/tasks"
)

// Bridges is the bridge table: one line per kind of backend, in the order
// the config's "set exactly one backend" message names their sections.
// `agentgw serve`, `agentgw host` and `agentgw doctor` all read it; a new
// bridge is its folder and one line here (docs/design-notes.md, "Adding a
// bridge").
var Bridges = backendkit.Bridges{
	mcpbridge.Bridge,
	connectorbridge.Bridge,
	oanbridge.Bridge,
	accbridge.Bridge,
	a2abridge.Bridge,
}

// LoadConfig reads and validates the gateway's config file with the
// bridge table's sections.
func LoadConfig(path string) (*config.Config, error) { return config.Load(path, Bridges) }

var (
	_ backendkit.Publisher    = publisher{}
	_ backendkit.Availability = availability{}
	_ backendkit.Host         = (*bridgeHost)(nil)
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

// SetStatus shows a degraded backend's status text in its presence.
func (a availability) SetStatus(endpoint, status string) {
	if a.g.Presence != nil {
		a.g.Presence.SetStatus(endpoint, status)
	}
}

// availability forwards backend up/down changes to the endpoints' presence.
type availability struct{ g *Gateway }

func (a availability) SetAvailable(endpoint string, up bool) {
	a.g.Metrics.SetBackendUp(endpoint, up)
	if a.g.Presence != nil {
		a.g.Presence.SetAvailable(endpoint, up)
	}
}

// buildBackends builds every [[agents]] entry with a bridge section
// through its bridge's line of the table.
func (g *Gateway) buildBackends(ctx context.Context) error {
	h := &bridgeHost{g: g, shared: map[string]any{}}
	for _, a := range g.cfg.Agents {
		if a.Section == nil {
			continue
		}
		b, ok := g.bridges.Lookup(a.Backend)
		if !ok {
			return fmt.Errorf("agent %s: no bridge for [agents.%s]", a.JID, a.Backend)
		}
		ba := backendkit.NewAgent(g.cfg, a)
		ba.Log = g.log.With("endpoint", ba.Endpoint)
		if err := b.Build(ctx, h, ba); err != nil {
			return fmt.Errorf("agent %s: %w", ba.Endpoint, err)
		}
	}
	return nil
}

// bridgeHost is the gateway as the bridges' Build sees it.
type bridgeHost struct {
	g      *Gateway
	shared map[string]any
}

func (h *bridgeHost) Publisher() backendkit.Publisher       { return publisher{h.g} }
func (h *bridgeHost) Availability() backendkit.Availability { return availability{h.g} }
func (h *bridgeHost) Logger() *slog.Logger                  { return h.g.log }
func (h *bridgeHost) ComponentDomain() string               { return h.g.domain.String() }
func (h *bridgeHost) Secrets() []string                     { return h.g.secrets() }
func (h *bridgeHost) Leased() bool                          { return h.g.cl != nil }

func (h *bridgeHost) Redactor() *backendkit.Redactor {
	if h.g.opts.Redactor != nil {
		return h.g.opts.Redactor
	}
	return backendkit.NewRedactor(h.g.secrets)
}

// Store hands out the drivers of the store gateway/store.go opened (one
// connector binding driver for all connector agents, so that its card
// claims cover them all).
func (h *bridgeHost) Store(ptr any) bool {
	s := h.g.Store
	return backendkit.FillStore(ptr, s.Bindings, s.Chats, s.ACC, s.OAN)
}

func (h *bridgeHost) Add(ep string, backend any, start func(context.Context) error) error {
	if backend != nil {
		b, ok := backend.(tasks.Backend)
		if !ok {
			return fmt.Errorf("bridge backend %T is not a tasks.Backend", backend)
		}
		h.g.backends[ep] = b
	}
	if start != nil {
		h.g.starters = append(h.g.starters, start)
	}
	return nil
}

func (h *bridgeHost) Lease(ep, lease string, template any, newTerm func() (backendkit.LeasedTerm, error)) error {
	if h.g.cl == nil {
		return errors.New("not in cluster mode")
	}
	tmpl, ok := template.(tasks.Backend)
	if !ok {
		return fmt.Errorf("bridge backend %T is not a tasks.Backend", template)
	}
	return h.g.leaseBackend(ep, lease, tmpl, func() (LeasedTerm, error) {
		t, err := newTerm()
		if err != nil {
			return LeasedTerm{}, err
		}
		b, ok := t.Backend.(tasks.Backend)
		if !ok {
			return LeasedTerm{}, fmt.Errorf("bridge backend %T is not a tasks.Backend", t.Backend)
		}
		return LeasedTerm{Backend: b, Run: t.Run, Ready: t.Ready}, nil
	})
}

func (h *bridgeHost) Hold(lease string, endpoints func() []string, run func(context.Context) error) error {
	if h.g.cl == nil {
		h.g.starters = append(h.g.starters, run)
		return nil
	}
	h.g.holdShared(lease, endpoints, run)
	return nil
}

func (h *bridgeHost) Shared(key string, make func() (any, error)) (any, error) {
	if v, ok := h.shared[key]; ok {
		return v, nil
	}
	v, err := make()
	if err != nil {
		return nil, err
	}
	h.shared[key] = v
	return v, nil
}

// Uploader is the XEP-0363 client an agent offers inbound files through:
// the configured service, else one discovered among the items of the
// server's domain (the first local domain, else the component domain's
// parent).
func (h *bridgeHost) Uploader(service string, maxBytes int64) backendkit.FileUploader {
	g := h.g
	server := g.domain.Domainpart()
	if len(g.cfg.XMPP.LocalDomains) > 0 {
		server = g.cfg.XMPP.LocalDomains[0]
	} else if i := strings.IndexByte(server, '.'); i > 0 {
		server = server[i+1:]
	}
	return &transfer.HTTPUpload{IQ: g.Component, Server: server, Service: service, MaxBytes: maxBytes}
}

// secrets lists every configured secret, for the bridges' own scrubbing.
func (g *Gateway) secrets() []string { return SecretsOf(g.cfg, g.bridges) }
