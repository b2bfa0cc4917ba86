package oanbridge

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/oanbridge/oandb"
)

// Bridge is the OpenAgentNetwork bridge's line of the root's bridge
// table: an [agents.oan] table. In cluster mode the account's connection
// runs under the lease Lease(endpoint).
var Bridge = backendkit.Bridge{
	Section: "oan",
	Config:  func() backendkit.Section { return &Config{} },
	Build:   build,
	Doctor:  doctor,
}

// Config is the [agents.oan] table: an OpenAgentNetwork account whose
// connector the gateway is (docs/oan-bridge.md).
type Config struct {
	BaseURL    string `toml:"base_url"`
	APIKeyFile string `toml:"api_key_file"` // written by `agentgw oan pair`, mode 0600
	Owner      string `toml:"owner"`        // the account owner's bare JID: escalations go here only
	// ReplyTimeoutSeconds bounds the wait for a Gofer's reply to a chat
	// message (the protocol's silent failure, §4); default 60.
	ReplyTimeoutSeconds int `toml:"reply_timeout_seconds"`
}

// DefaultReplyTimeoutSeconds is reply_timeout_seconds when unset.
const DefaultReplyTimeoutSeconds = 60

// Validate implements backendkit.Section.
func (o *Config) Validate(_ *config.Config, _ *config.Agent) []string {
	var out []string
	if u, err := url.Parse(o.BaseURL); o.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		out = append(out, "[agents.oan] base_url must be an http or https URL without credentials, query or fragment")
	}
	if o.APIKeyFile == "" {
		out = append(out, "[agents.oan] api_key_file is required (written by `agentgw oan pair`)")
	}
	if o.Owner == "" {
		out = append(out, "[agents.oan] owner is required: the JID escalations go to")
	} else if p, err := config.ParsePrincipal(o.Owner); err != nil || !strings.Contains(p, "@") {
		out = append(out, "[agents.oan] owner must be a bare JID")
	}
	if o.ReplyTimeoutSeconds < 0 || o.ReplyTimeoutSeconds > 3600 {
		out = append(out, "[agents.oan] reply_timeout_seconds must be between 1 and 3600 (0: the default 60)")
	}
	return out
}

// SecretSources implements config.SecretSources: the API key file.
func (o *Config) SecretSources() (envs, files []string) {
	if o.APIKeyFile != "" {
		files = append(files, o.APIKeyFile)
	}
	return nil, files
}

// AgentOptions turns an agent with an [agents.oan] table into the
// bridge's options. The key file is read by the bridge at every connect
// (and watched after a revocation), never here. Store, Publisher,
// Availability, Logger and Secrets are left for the caller.
func AgentOptions(cfg *config.Config, a config.Agent) Options {
	o := Options{Endpoint: a.JID, Name: a.Name, Title: a.Title, Description: a.Description, Version: a.Version}
	c, _ := a.Section.(*Config)
	if c == nil {
		return o
	}
	o.BaseURL, o.KeyFile, o.Owner = c.BaseURL, cfg.Path(c.APIKeyFile), c.Owner
	if p, err := config.ParsePrincipal(c.Owner); err == nil {
		o.Owner = p // the form callers are compared in
	}
	if c.ReplyTimeoutSeconds > 0 {
		o.ReplyTimeout = time.Duration(c.ReplyTimeoutSeconds) * time.Second
	}
	return o
}

func build(_ context.Context, h backendkit.Host, a backendkit.Agent) error {
	o := AgentOptions(a.Config, a.Agent)
	o.Endpoint = a.Endpoint
	var st oandb.Driver
	h.Store(&st)
	o.Store, o.Publisher, o.Availability, o.Logger, o.Secrets = st, h.Publisher(), h.Availability(), a.Log, h.Secrets
	if h.Leased() {
		// One socket per account across the cluster: the holder of the
		// lease follows the events; the store applies each once.
		tmpl, err := New(o) // validates the options now
		if err != nil {
			return err
		}
		return h.Lease(a.Endpoint, Lease(a.Endpoint), tmpl, func() (backendkit.LeasedTerm, error) {
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

// Lease is the cluster lease an account's connection is held under.
func Lease(endpoint string) string { return "oan:" + endpoint }

// doctor checks the key file and that OAN accepts the key.
func doctor(ctx context.Context, d backendkit.Doctor, a backendkit.Agent) {
	c := a.Section.(*Config)
	keyFile := a.Config.Path(c.APIKeyFile)
	if k, err := ReadKey(keyFile); err == nil {
		d.Redact(k)
	}
	hctx, cancel := context.WithTimeout(ctx, 2*d.Timeout()+time.Second)
	defer cancel()
	if err := Check(hctx, c.BaseURL, keyFile); err != nil {
		d.Fail("OAN at %s: %s", backendkit.RedactURL(c.BaseURL), d.Scrub(err.Error()))
		return
	}
	d.OK("OAN at %s accepts the API key", backendkit.RedactURL(c.BaseURL))
}
