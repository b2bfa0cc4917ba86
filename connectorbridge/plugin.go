package connectorbridge

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/internal/config"
)

// Bridge is the xAgent connector bridge's line of the root's bridge
// table: an [agents.connector] table. In cluster mode its one connection
// runs under the lease "connector:<endpoint>".
var Bridge = backendkit.Bridge{
	Section: "connector",
	Config:  func() backendkit.Section { return &Config{} },
	Build:   build,
	Doctor:  doctor,
}

// Config is the [agents.connector] table: an xAgent Connector backend.
type Config struct {
	BaseURL    string `toml:"base_url"`
	APIKeyEnv  string `toml:"api_key_env"`
	APIKeyFile string `toml:"api_key_file"`
	// Inbox is the bare JID that receives the IM network's messages (IM
	// Profile v2) and whose replies go back; empty bridges tools only.
	Inbox string `toml:"inbox"`
	// UploadService is the XEP-0363 service JID for inbound files; empty
	// discovers it on the server's domain.
	UploadService string `toml:"upload_service"`
	// DownloadOrigins are further origins (scheme://host[:port]) files
	// that XMPP users share may be downloaded from, beside the upload
	// service's own.
	DownloadOrigins []string `toml:"download_origins"`
	// MaxFileBytes caps one file each way. Default 10 MiB.
	MaxFileBytes int64 `toml:"max_file_bytes"`
}

// Validate implements backendkit.Section.
func (c *Config) Validate(_ *config.Config, _ *config.Agent) []string {
	var out []string
	add := func(s string) { out = append(out, s) }
	if c.BaseURL == "" {
		add("[agents.connector] base_url is required")
	}
	if (c.APIKeyEnv == "") == (c.APIKeyFile == "") {
		add("[agents.connector] set exactly one of api_key_env or api_key_file")
	}
	if in := c.Inbox; in != "" {
		if j, err := jid.Parse(in); err != nil || j.Resourcepart() != "" {
			add("[agents.connector] inbox must be a bare JID")
		}
	}
	if us := c.UploadService; us != "" {
		if j, err := jid.Parse(us); err != nil || j.Resourcepart() != "" || j.Localpart() != "" {
			add("[agents.connector] upload_service must be a service JID (a domain)")
		}
	}
	for _, o := range c.DownloadOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			add("[agents.connector] download_origins entries must be scheme://host[:port]")
		}
	}
	if c.MaxFileBytes < 0 || c.MaxFileBytes > 1<<30 {
		add("[agents.connector] max_file_bytes must be between 0 (default 10 MiB) and 1 GiB")
	}
	return out
}

// SecretSources implements config.SecretSources: the API key.
func (c *Config) SecretSources() (envs, files []string) {
	if c.APIKeyEnv != "" {
		return []string{c.APIKeyEnv}, nil
	}
	if c.APIKeyFile != "" {
		return nil, []string{c.APIKeyFile}
	}
	return nil, nil
}

// AgentOptions turns an agent with an [agents.connector] table into the
// bridge's options, reading the API key from its env var or file.
// Bindings, Publisher, Availability and Logger are left for the caller.
func AgentOptions(cfg *config.Config, a config.Agent) (Options, error) {
	o, err := agentOptions(cfg, a)
	if err != nil {
		return Options{}, fmt.Errorf("agent %s: %w", a.JID, err)
	}
	return o, nil
}

func agentOptions(cfg *config.Config, a config.Agent) (Options, error) {
	c, _ := a.Section.(*Config)
	if c == nil {
		return Options{}, errors.New("no [agents.connector]")
	}
	key, err := config.ReadSecret(c.APIKeyEnv, cfg.Path(c.APIKeyFile))
	if err != nil {
		return Options{}, fmt.Errorf("connector API key: %w", err)
	}
	return Options{
		Endpoint:        a.JID,
		BaseURL:         c.BaseURL,
		APIKey:          key,
		Name:            a.Name,
		Title:           a.Title,
		Description:     a.Description,
		Version:         a.Version,
		Inbox:           c.Inbox,
		DownloadOrigins: c.DownloadOrigins,
		ChatLimits:      ChatLimits{MaxFileBytes: c.MaxFileBytes},
	}, nil
}

func build(_ context.Context, h backendkit.Host, a backendkit.Agent) error {
	o, err := agentOptions(a.Config, a.Agent) // the root names the agent
	if err != nil {
		return err
	}
	c := a.Section.(*Config)
	o.Endpoint = a.Endpoint
	h.Store(&o.Bindings)
	o.Publisher, o.Availability, o.Logger, o.Secrets = h.Publisher(), h.Availability(), a.Log, h.Secrets
	if o.Inbox != "" {
		var chats chatdb.Driver
		h.Store(&chats)
		o.Chats = chats
		o.Uploader = h.Uploader(c.UploadService, c.MaxFileBytes)
	}
	if h.Leased() {
		// One connection at a time across the cluster.
		tmpl, err := New(o) // validates the options now
		if err != nil {
			return err
		}
		return h.Lease(a.Endpoint, "connector:"+a.Endpoint, tmpl, func() (backendkit.LeasedTerm, error) {
			b, err := New(o)
			if err != nil {
				return backendkit.LeasedTerm{}, err
			}
			return backendkit.LeasedTerm{Backend: b, Run: b.Start, Ready: b.Ready}, nil
		})
	}
	b, err := New(o)
	if err != nil {
		return err
	}
	return h.Add(a.Endpoint, b, b.Start)
}

// doctor checks the key, that the connector listens and that its Card and
// /health are good.
func doctor(ctx context.Context, d backendkit.Doctor, a backendkit.Agent) {
	c := a.Section.(*Config)
	o, err := AgentOptions(a.Config, a.Agent)
	if err != nil {
		d.Fail("%s — set it to the connector's system API key", strings.TrimPrefix(err.Error(), "agent "+a.JID+": "))
		return
	}
	d.Redact(o.APIKey)
	u, err := url.Parse(c.BaseURL)
	if err != nil || u.Host == "" {
		d.Fail("[agents.connector] base_url is not an http(s) URL")
		return
	}
	if err := d.Dial(ctx, backendkit.HostPort(u), "is the connector running? check [agents.connector] base_url"); err != nil {
		d.Fail("%v", err)
		return
	}
	o.Logger = d.Logger()
	var bindings bindingdb.Driver
	if d.Store(&bindings) {
		o.Bindings = bindings
	}
	o.RequestTimeout = d.Timeout()
	b, err := New(o)
	if err != nil {
		d.Fail("%s", strings.TrimPrefix(err.Error(), "connectorbridge: "))
		return
	}
	defer b.Close()
	hctx, cancel := context.WithTimeout(ctx, 2*d.Timeout()+time.Second)
	defer cancel()
	if err := b.Health(hctx); err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		if strings.Contains(msg, "authenticated binding") && !strings.Contains(msg, "connector auth") {
			msg += " — authenticate its channel: agentgw connector auth --config " + d.ConfigPath() + " --flow FLOW_ID " + a.JID
		}
		d.Fail("connector at %s is not healthy: %s", backendkit.RedactURL(c.BaseURL), msg)
		return
	}
	d.OK("connector at %s: Card valid, /health ok", backendkit.RedactURL(c.BaseURL))
}
