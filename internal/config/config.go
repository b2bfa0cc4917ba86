// Package config loads and checks agentgw's TOML configuration. The key
// names are the operator contract of DESIGN.md: add keys, never rename them.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"mellium.im/xmpp/jid"
)

// Config is the whole file.
type Config struct {
	XMPP       XMPP       `toml:"xmpp"`
	Store      Store      `toml:"store"`
	Tasks      Tasks      `toml:"tasks"`
	Policy     Policy     `toml:"policy"`
	Federation Federation `toml:"federation"`
	Metrics    Metrics    `toml:"metrics"`
	Log        Log        `toml:"log"`
	Agents     []Agent    `toml:"agents"`

	// Dir is the directory of the config file; relative paths in the file
	// are resolved against it.
	Dir string `toml:"-"`
}

// XMPP is the component link.
type XMPP struct {
	ComponentDomain string   `toml:"component_domain"`
	Server          string   `toml:"server"`
	SecretEnv       string   `toml:"secret_env"`
	SecretFile      string   `toml:"secret_file"`
	LocalDomains    []string `toml:"local_domains"`
	Admins          []string `toml:"admins"`
	// GatewayName is the disco identity name of the gateway.
	GatewayName string `toml:"gateway_name"`
	// PingIntervalSeconds is the idle time before the gateway pings the
	// server (XEP-0199). Default 60.
	PingIntervalSeconds int `toml:"ping_interval_seconds"`
	// IQTimeoutSeconds bounds every IQ the gateway sends. Default 30.
	IQTimeoutSeconds int `toml:"iq_timeout_seconds"`
}

// Store is the SQLite database.
type Store struct {
	Path string `toml:"path"`
}

// Tasks tunes the durable task engine.
type Tasks struct {
	// ReplaySeconds is the advertised request_replay_seconds. Default 86400.
	ReplaySeconds int `toml:"replay_seconds"`
	// RetentionSeconds is how long a terminal task and its result stay
	// queryable after creation (retain-until). Default 86400.
	RetentionSeconds int `toml:"retention_seconds"`
	// MaxActive is the number of non-terminal tasks admitted at once before
	// invoke answers resource-constraint. Default 10000.
	MaxActive int `toml:"max_active"`
	// DefaultTimeoutSeconds applies when neither the invoke nor the tool
	// gives a deadline. Default 3600.
	DefaultTimeoutSeconds int `toml:"default_timeout_seconds"`
	// InputTimeoutSeconds is how long an input request waits. Default 600.
	InputTimeoutSeconds int `toml:"input_timeout_seconds"`
}

// Policy is trusted local policy for tools that declare approval or
// permissions. Without an entry such tools fail closed.
type Policy struct {
	// Permissions maps a permission name to the principals (bare JIDs or
	// domains) that hold it.
	Permissions map[string][]string `toml:"permissions"`
	// Approved lists "endpoint-jid tool-name" pairs whose approvalRequired
	// is satisfied by operator approval, for the listed principals.
	Approvals []Approval `toml:"approvals"`
}

// Approval grants operator approval for one tool to some principals.
type Approval struct {
	Endpoint   string   `toml:"endpoint"`
	Tool       string   `toml:"tool"`
	Principals []string `toml:"principals"`
}

// Federation tunes rate limits for requesters.
type Federation struct {
	// Rate limits, in requests per second with a burst, per requester bare
	// JID and per remote domain. Zero takes the defaults.
	DiscoveryPerSecond float64 `toml:"discovery_per_second"`
	DiscoveryBurst     int     `toml:"discovery_burst"`
	SchemaPerSecond    float64 `toml:"schema_per_second"`
	SchemaBurst        int     `toml:"schema_burst"`
	InvokePerSecond    float64 `toml:"invoke_per_second"`
	InvokeBurst        int     `toml:"invoke_burst"`
	InputPerSecond     float64 `toml:"input_per_second"`
	InputBurst         int     `toml:"input_burst"`
	DomainMultiplier   float64 `toml:"domain_multiplier"`
}

// Metrics is the Prometheus endpoint; off unless Listen is set.
type Metrics struct {
	Listen string `toml:"listen"`
}

// Log selects the log format ("text" or "json") and level.
type Log struct {
	Format string `toml:"format"`
	Level  string `toml:"level"`
}

// Agent is one [[agents]] entry.
type Agent struct {
	JID         string   `toml:"jid"`
	Manifest    string   `toml:"manifest"`
	Name        string   `toml:"name"`
	Title       string   `toml:"title"`
	Description string   `toml:"description"`
	Version     string   `toml:"version"`
	VisibleTo   []string `toml:"visible_to"`
	InvocableBy []string `toml:"invocable_by"`

	MCP       *MCP       `toml:"mcp"`
	Connector *Connector `toml:"connector"`
}

// MCP is an MCP server backend: a stdio command or a streamable HTTP URL.
type MCP struct {
	Command     []string          `toml:"command"`
	Env         map[string]string `toml:"env"`
	URL         string            `toml:"url"`
	HeadersEnv  map[string]string `toml:"headers_env"`
	HeadersFile map[string]string `toml:"headers_file"`
}

// Connector is an xAgent Connector backend.
type Connector struct {
	BaseURL    string `toml:"base_url"`
	APIKeyEnv  string `toml:"api_key_env"`
	APIKeyFile string `toml:"api_key_file"`
}

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(data) > 1<<20 {
		return nil, fmt.Errorf("config: %s is larger than 1 MiB", path)
	}
	var c Config
	md, err := toml.Decode(string(data), &c)
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("config: %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	c.Dir = dirOf(path)
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return &c, nil
}

func dirOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "."
	}
	return path[:i]
}

func (c *Config) applyDefaults() {
	if c.XMPP.PingIntervalSeconds == 0 {
		c.XMPP.PingIntervalSeconds = 60
	}
	if c.XMPP.IQTimeoutSeconds == 0 {
		c.XMPP.IQTimeoutSeconds = 30
	}
	if c.XMPP.GatewayName == "" {
		c.XMPP.GatewayName = "agentgw"
	}
	if c.Store.Path == "" {
		c.Store.Path = "agentgw.db"
	}
	if c.Tasks.ReplaySeconds == 0 {
		c.Tasks.ReplaySeconds = 86400
	}
	if c.Tasks.RetentionSeconds == 0 {
		c.Tasks.RetentionSeconds = 86400
	}
	if c.Tasks.MaxActive == 0 {
		c.Tasks.MaxActive = 10000
	}
	if c.Tasks.DefaultTimeoutSeconds == 0 {
		c.Tasks.DefaultTimeoutSeconds = 3600
	}
	if c.Tasks.InputTimeoutSeconds == 0 {
		c.Tasks.InputTimeoutSeconds = 600
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
}

// Validate checks the whole config and reports every problem it finds.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	x := c.XMPP
	if x.ComponentDomain == "" {
		add("[xmpp] component_domain is required")
	} else if d, err := jid.Parse(x.ComponentDomain); err != nil || d.Localpart() != "" || d.Resourcepart() != "" {
		add("[xmpp] component_domain %q is not a bare domain", x.ComponentDomain)
	}
	if x.Server == "" {
		add("[xmpp] server is required (host:port of the server's component listener)")
	}
	if (x.SecretEnv == "") == (x.SecretFile == "") {
		add("[xmpp] set exactly one of secret_env or secret_file")
	}
	for _, d := range x.LocalDomains {
		if j, err := jid.Parse(d); err != nil || j.Localpart() != "" || j.Resourcepart() != "" {
			add("[xmpp] local_domains entry %q is not a domain", d)
		}
	}
	for _, a := range x.Admins {
		if j, err := jid.Parse(a); err != nil || j.Resourcepart() != "" {
			add("[xmpp] admins entry %q is not a bare JID", a)
		}
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		add("[log] format must be \"text\" or \"json\"")
	}
	seen := map[string]bool{}
	for i, a := range c.Agents {
		where := fmt.Sprintf("[[agents]] #%d", i+1)
		j, err := jid.Parse(a.JID)
		if err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
			add("%s: jid %q is not a bare JID localpart@domain", where, a.JID)
			continue
		}
		if x.ComponentDomain != "" && j.Domainpart() != strings.ToLower(x.ComponentDomain) {
			add("%s: jid %q is not below component_domain %q", where, a.JID, x.ComponentDomain)
		}
		bare := j.Bare().String()
		if seen[bare] {
			add("%s: jid %q is declared twice", where, a.JID)
		}
		seen[bare] = true
		n := 0
		if a.Manifest != "" {
			n++
		}
		if a.MCP != nil {
			n++
			if (len(a.MCP.Command) == 0) == (a.MCP.URL == "") {
				add("%s: [agents.mcp] needs exactly one of command or url", where)
			}
			if a.MCP.URL != "" {
				if u, err := url.Parse(a.MCP.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					add("%s: [agents.mcp] url must be an http or https URL", where)
				}
			}
		}
		if a.Connector != nil {
			n++
			if a.Connector.BaseURL == "" {
				add("%s: [agents.connector] base_url is required", where)
			}
			if (a.Connector.APIKeyEnv == "") == (a.Connector.APIKeyFile == "") {
				add("%s: [agents.connector] set exactly one of api_key_env or api_key_file", where)
			}
		}
		if n != 1 {
			add("%s: set exactly one of manifest, [agents.mcp] or [agents.connector]", where)
		}
	}
	return errors.Join(errs...)
}

// Path resolves p against the config file's directory.
func (c *Config) Path(p string) string {
	if p == "" || strings.HasPrefix(p, "/") || c.Dir == "" {
		return p
	}
	return c.Dir + "/" + p
}

// ReadSecret returns the secret named by an env var or a file. The value is
// trimmed of one trailing newline. Errors name the source, never the value.
// A variable moved out of the environment by TakeSecretEnv is still found.
func ReadSecret(envName, file string) (string, error) {
	switch {
	case envName != "":
		v, ok := lookupSecretEnv(envName)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set or empty", envName)
		}
		return v, nil
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("cannot read secret file: %w", err)
		}
		v := strings.TrimRight(string(data), "\r\n")
		if v == "" {
			return "", fmt.Errorf("secret file %s is empty", file)
		}
		return v, nil
	}
	return "", errors.New("no secret source configured")
}

// ComponentSecret reads the component secret.
func (c *Config) ComponentSecret() (string, error) {
	return ReadSecret(c.XMPP.SecretEnv, c.Path(c.XMPP.SecretFile))
}

// PingInterval and IQTimeout as durations.
func (c *Config) PingInterval() time.Duration {
	return time.Duration(c.XMPP.PingIntervalSeconds) * time.Second
}
func (c *Config) IQTimeout() time.Duration {
	return time.Duration(c.XMPP.IQTimeoutSeconds) * time.Second
}
