package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/a2abridge"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/transfer"
	"github.com/agentgw/agentgw/mcpbridge"
	"github.com/agentgw/agentgw/oanbridge"
)

var (
	_ backendkit.Publisher    = publisher{}
	_ backendkit.Availability = availability{}
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
			o := MCPOptions(g.cfg, a)
			o.ComponentDomain = g.domain.String()
			o.Publisher, o.Availability, o.Logger, o.Secrets = publisher{g}, availability{g}, log, g.secrets
			b, err := mcpbridge.New(o)
			if err != nil {
				return fmt.Errorf("agent %s: %w", ep, err)
			}
			g.backends[ep] = b
			g.starters = append(g.starters, b.Start)
		case a.A2A != nil:
			b, err := a2abridge.New(a2abridge.Options{
				Endpoint: ep, Name: a.Name, Title: a.Title, Description: a.Description, Version: a.Version,
				CardURL: a.A2A.URL, Publisher: publisher{g}, Availability: availability{g}, Logger: log,
			})
			if err != nil {
				return fmt.Errorf("agent %s: %w", ep, err)
			}
			g.backends[ep] = b
			g.starters = append(g.starters, b.Start)
		case a.Connector != nil:
			o, err := ConnectorOptions(g.cfg, a)
			if err != nil {
				return err
			}
			o.Endpoint = ep
			o.Bindings, o.Publisher, o.Availability, o.Logger, o.Secrets = g.bindings, publisher{g}, availability{g}, log, g.secrets
			if o.Inbox != "" {
				o.Chats = g.Store.Chats
				o.Uploader = g.uploader(a.Connector)
			}
			if g.cl != nil {
				if err := g.leaseConnector(ep, o); err != nil {
					return fmt.Errorf("agent %s: %w", ep, err)
				}
				continue
			}
			b, err := connectorbridge.New(o)
			if err != nil {
				return fmt.Errorf("agent %s: %w", ep, err)
			}
			g.backends[ep] = b
			g.starters = append(g.starters, b.Start)
		case a.OAN != nil:
			o := OANOptions(g.cfg, a)
			o.Endpoint = ep
			o.Store, o.Publisher, o.Availability, o.Logger, o.Secrets = g.Store.OAN, publisher{g}, availability{g}, log, g.secrets
			b, err := oanbridge.New(o)
			if err != nil {
				return fmt.Errorf("agent %s: %w", ep, err)
			}
			g.backends[ep] = b
			g.starters = append(g.starters, b.Start)
		case a.ACC != nil:
			if err := g.addACCAgent(ep, a, log); err != nil {
				return err
			}
		}
	}
	return nil
}

// OANOptions turns an [[agents]] entry with an [agents.oan] table into the
// bridge's options. The key file is read by the bridge at every connect
// (and watched after a revocation), never here. Store, Publisher,
// Availability, Logger and Secrets are left for the caller.
func OANOptions(cfg *config.Config, a config.Agent) oanbridge.Options {
	o := oanbridge.Options{Endpoint: a.JID, Name: a.Name, Title: a.Title, Description: a.Description, Version: a.Version}
	if a.OAN == nil {
		return o
	}
	o.BaseURL, o.KeyFile, o.Owner = a.OAN.BaseURL, cfg.Path(a.OAN.APIKeyFile), a.OAN.Owner
	if p, err := config.ParsePrincipal(a.OAN.Owner); err == nil {
		o.Owner = p // the form callers are compared in
	}
	if a.OAN.ReplyTimeoutSeconds > 0 {
		o.ReplyTimeout = time.Duration(a.OAN.ReplyTimeoutSeconds) * time.Second
	}
	return o
}

// MCPOptions turns an [[agents]] entry with an [agents.mcp] table into
// the bridge's options. Header values are read at every connect, so
// rotated header files take effect on the next reconnect. Publisher,
// Availability, Logger, Secrets and ComponentDomain are left for the
// caller.
func MCPOptions(cfg *config.Config, a config.Agent) mcpbridge.Options {
	o := mcpbridge.Options{
		JID: a.JID, Name: a.Name, Title: a.Title, Description: a.Description, Version: a.Version,
		ConfigDir: cfg.Dir,
	}
	m := a.MCP
	if m == nil {
		return o
	}
	o.Command, o.Env, o.URL = m.Command, m.Env, m.URL
	o.MaxSessions = m.MaxSessions
	if len(m.HeadersEnv) > 0 || len(m.HeadersFile) > 0 {
		o.Headers = func() (http.Header, error) { return mcpHeaders(cfg, m) }
	}
	return o
}

// mcpHeaders reads the configured HTTP header values. Errors name the
// header and the source, never a value.
func mcpHeaders(cfg *config.Config, m *config.MCP) (http.Header, error) {
	h := http.Header{}
	for name, env := range m.HeadersEnv {
		v, err := config.ReadSecret(env, "")
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		h.Set(name, v)
	}
	for name, file := range m.HeadersFile {
		v, err := config.ReadSecret("", cfg.Path(file))
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		h.Set(name, v)
	}
	return h, nil
}

// ConnectorOptions turns an [[agents]] entry with an [agents.connector]
// table into the bridge's options, reading the API key from its env var or
// file. Bindings, Publisher, Availability and Logger are left for the caller.
func ConnectorOptions(cfg *config.Config, a config.Agent) (connectorbridge.Options, error) {
	if a.Connector == nil {
		return connectorbridge.Options{}, fmt.Errorf("agent %s has no [agents.connector]", a.JID)
	}
	key, err := config.ReadSecret(a.Connector.APIKeyEnv, cfg.Path(a.Connector.APIKeyFile))
	if err != nil {
		return connectorbridge.Options{}, fmt.Errorf("agent %s: connector API key: %w", a.JID, err)
	}
	return connectorbridge.Options{
		Endpoint:        a.JID,
		BaseURL:         a.Connector.BaseURL,
		APIKey:          key,
		Name:            a.Name,
		Title:           a.Title,
		Description:     a.Description,
		Version:         a.Version,
		Inbox:           a.Connector.Inbox,
		DownloadOrigins: a.Connector.DownloadOrigins,
		ChatLimits:      connectorbridge.ChatLimits{MaxFileBytes: a.Connector.MaxFileBytes},
	}, nil
}

// uploader is the XEP-0363 client a connector agent offers inbound files
// through: the configured service, else one discovered among the items
// of the server's domain (the first local domain, else the component
// domain's parent).
func (g *Gateway) uploader(c *config.Connector) *transfer.HTTPUpload {
	server := g.domain.Domainpart()
	if len(g.cfg.XMPP.LocalDomains) > 0 {
		server = g.cfg.XMPP.LocalDomains[0]
	} else if i := strings.IndexByte(server, '.'); i > 0 {
		server = server[i+1:]
	}
	return &transfer.HTTPUpload{IQ: g.Component, Server: server, Service: c.UploadService, MaxBytes: c.MaxFileBytes}
}

// secrets lists every configured secret, for the bridges' own scrubbing.
func (g *Gateway) secrets() []string { return Secrets(g.cfg) }
