package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/mcpbridge/mcpoauth"
)

// Bridge is the MCP bridge's line of the root's bridge table: an
// [agents.mcp] table (an [mcp] table in a host file).
var Bridge = backendkit.Bridge{
	Section: "mcp",
	Config:  func() backendkit.Section { return &Config{} },
	Build:   build,
	Doctor:  doctor,
	Hosted:  "command or url",
}

// Config is the [agents.mcp] table: an MCP server backend, a stdio
// command or a streamable HTTP URL.
type Config struct {
	Command     []string          `toml:"command"`
	Env         map[string]string `toml:"env"`
	URL         string            `toml:"url"`
	HeadersEnv  map[string]string `toml:"headers_env"`
	HeadersFile map[string]string `toml:"headers_file"`
	// MaxSessions bounds the server sessions that run calls, one at a
	// time each, so elicitations are attributed with certainty (0: 4;
	// docs/mcp-bridge.md). Each stdio session is one server process.
	MaxSessions int `toml:"max_sessions"`
	// OAuth is [agents.mcp.oauth]: a url server that needs a login
	// (docs/oauth.md).
	OAuth *mcpoauth.Config `toml:"oauth"`
}

// Validate implements backendkit.Section.
func (m *Config) Validate(_ *config.Config, _ *config.Agent) []string {
	var out []string
	if (len(m.Command) == 0) == (m.URL == "") {
		out = append(out, "[agents.mcp] needs exactly one of command or url")
	}
	if m.URL != "" {
		if u, err := url.Parse(m.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			out = append(out, "[agents.mcp] url must be an http or https URL")
		}
	}
	if m.OAuth != nil {
		if m.URL == "" {
			out = append(out, "[agents.mcp.oauth] is for url servers (a stdio server takes its credentials from env)")
		}
		out = append(out, m.OAuth.Validate()...)
	}
	if m.MaxSessions < 0 || m.MaxSessions > 64 {
		out = append(out, "[agents.mcp] max_sessions must be between 1 and 64")
	}
	return out
}

// SecretSources implements config.SecretSources: the header values.
func (m *Config) SecretSources() (envs, files []string) {
	for _, env := range m.HeadersEnv {
		envs = append(envs, env)
	}
	for _, f := range m.HeadersFile {
		files = append(files, f)
	}
	if o := m.OAuth; o != nil {
		if o.ClientSecretEnv != "" {
			envs = append(envs, o.ClientSecretEnv)
		}
		if o.ClientSecretFile != "" {
			files = append(files, o.ClientSecretFile)
		}
	}
	return envs, files
}

// AgentOptions turns an agent with an [agents.mcp] table into the
// bridge's options. Header values are read at every connect, so rotated
// header files take effect on the next reconnect. Publisher,
// Availability, Logger, Secrets and ComponentDomain are left for the
// caller.
func AgentOptions(cfg *config.Config, a config.Agent) Options {
	o := Options{
		JID: a.JID, Name: a.Name, Title: a.Title, Description: a.Description, Version: a.Version,
		ConfigDir: cfg.Dir,
	}
	m, _ := a.Section.(*Config)
	if m == nil {
		return o
	}
	o.Command, o.Env, o.URL = m.Command, m.Env, m.URL
	o.MaxSessions = m.MaxSessions
	if len(m.HeadersEnv) > 0 || len(m.HeadersFile) > 0 {
		o.Headers = func() (http.Header, error) { return headers(cfg, m) }
	}
	if m.OAuth != nil && m.URL != "" {
		o.OAuth = mcpoauth.NewSource(OAuthOptions(cfg, m))
	}
	return o
}

// OAuthOptions turns [agents.mcp.oauth] into the token source's options
// (for the bridge and for `agentgw oauth login`).
func OAuthOptions(cfg *config.Config, m *Config) mcpoauth.Options {
	oc := m.OAuth
	o := mcpoauth.Options{ServerURL: m.URL, Grant: oc.Grant, ClientID: oc.ClientID, Scopes: oc.Scopes, Issuer: oc.Issuer}
	if oc.TokenFile != "" {
		o.TokenFile = cfg.Path(oc.TokenFile)
	}
	if oc.ClientSecretEnv != "" || oc.ClientSecretFile != "" {
		env, file := oc.ClientSecretEnv, ""
		if oc.ClientSecretFile != "" {
			file = cfg.Path(oc.ClientSecretFile)
		}
		o.ClientSecret = func() (string, error) { return config.ReadSecret(env, file) }
	}
	return o
}

// headers reads the configured HTTP header values. Errors name the header
// and the source, never a value.
func headers(cfg *config.Config, m *Config) (http.Header, error) {
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

func build(_ context.Context, h backendkit.Host, a backendkit.Agent) error {
	o := AgentOptions(a.Config, a.Agent)
	o.ComponentDomain = h.ComponentDomain()
	o.Publisher, o.Availability, o.Logger, o.Secrets = h.Publisher(), h.Availability(), a.Log, h.Secrets
	if o.OAuth != nil {
		// The gateway's log redacts the tokens in use too.
		h.Redactor().AddSource(o.OAuth.Secrets)
	}
	b, err := New(o)
	if err != nil {
		return err
	}
	return h.Add(a.Endpoint, b, b.Start)
}

// doctor starts the server (or reaches its URL) and asks it to initialize.
func doctor(ctx context.Context, d backendkit.Doctor, a backendkit.Agent) {
	cfg, m := a.Config, a.Section.(*Config)
	if len(m.Command) > 0 {
		if problem := commandProblem(cfg, m.Command[0]); problem != "" {
			d.Fail("%s", problem)
			return
		}
	} else {
		u, err := url.Parse(m.URL)
		if err != nil {
			d.Fail("[agents.mcp] url is not a URL")
			return
		}
		if err := d.Dial(ctx, backendkit.HostPort(u), "is the MCP server running? check [agents.mcp] url"); err != nil {
			d.Fail("%v", err)
			return
		}
	}
	o := AgentOptions(cfg, a.Agent)
	o.ComponentDomain = cfg.XMPP.ComponentDomain
	o.Logger = d.Logger()
	// Our context ends first, so a timeout reads as one.
	o.ConnectTimeout = d.StartTimeout() + 5*time.Second
	b, err := New(o)
	if err != nil {
		d.Fail("%s", strings.TrimPrefix(err.Error(), "mcpbridge: "))
		return
	}
	ictx, cancel := context.WithTimeout(ctx, d.StartTimeout())
	defer cancel()
	start := time.Now()
	if o.OAuth != nil {
		// The doctor's output redacts the tokens too; the error, if
		// any, comes again from Initialize.
		if _, err := o.OAuth.Token(ictx); err == nil {
			d.Redact(o.OAuth.Secrets()...)
		}
	}
	err = b.Initialize(ictx)
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case err == nil:
		d.OK("MCP server answered initialize in %v", took)
	case errors.Is(err, mcpoauth.ErrLoginRequired):
		d.Fail("%v — run: agentgw oauth login --config CONFIG %s", err, a.Agent.JID)
	case m.OAuth != nil && strings.HasPrefix(err.Error(), "OAuth discovery:"):
		d.Fail("%v — check [agents.mcp] url and the server's OAuth metadata", err)
	case len(m.Command) > 0 && errors.Is(err, context.DeadlineExceeded):
		d.Fail("the MCP server started but did not answer initialize within %v — run the command by hand: it must speak MCP on stdin/stdout (raise --mcp-timeout if npx is still installing)", d.StartTimeout())
	case len(m.Command) > 0 && strings.Contains(err.Error(), "cannot start MCP server command"):
		d.Fail("%v — check [agents.mcp] command", err)
	case len(m.Command) > 0:
		d.Fail("the MCP server command exited or closed its output before answering initialize (%s) — run %q by hand to see its error", strings.TrimPrefix(backendkit.FirstLine(err.Error()), "MCP initialize failed: "), filepath.Base(m.Command[0]))
	case errors.Is(err, context.DeadlineExceeded):
		d.Fail("the MCP server at %s did not answer initialize within %v", backendkit.RedactURL(m.URL), d.StartTimeout())
	default:
		d.Fail("the MCP server at %s refused initialize (%s) — check the url and headers_env/headers_file", backendkit.RedactURL(m.URL), backendkit.FirstLine(err.Error()))
	}
}

// commandProblem checks that a stdio command can be started, the way
// exec resolves it (a bare name on PATH, a path relative to the config
// directory, which is the command's working directory).
func commandProblem(cfg *config.Config, name string) string {
	if !strings.Contains(name, "/") {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Sprintf("MCP server command %q is not found in PATH — install it or give its full path in [agents.mcp] command (serve's PATH may differ, e.g. under systemd)", name)
		}
		return ""
	}
	p := cfg.Path(name)
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return fmt.Sprintf("MCP server command %s does not exist — fix [agents.mcp] command", p)
	case st.IsDir():
		return fmt.Sprintf("MCP server command %s is a directory — fix [agents.mcp] command", p)
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Sprintf("MCP server command %s is not executable — chmod +x it", p)
	}
	return ""
}
