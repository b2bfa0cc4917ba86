package accbridge

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
)

// Bridge is the agent-control-center bridge's line of the root's bridge
// table: an [agents.acc] table per endpoint, all served by the one
// listener of the top-level [acc] section. In cluster mode the listener
// runs on the member holding the lease ListenerLease, and runs go there.
var Bridge = backendkit.Bridge{
	Section: "acc",
	Config:  func() backendkit.Section { return &AgentConfig{} },
	Check:   check,
	// acc-notes: at most one active run per agent (MUST); the others wait
	// accepted.
	MaxRunning: 1,
	Build:      build,
	Secrets:    secrets,
	Doctor:     doctor,
}

// ListenerLease is the cluster lease the one [acc] listener is held
// under (docs/cluster.md).
const ListenerLease = "acc:listener"

// AgentConfig is the [agents.acc] table: it maps an endpoint to one agent
// a connector declares.
type AgentConfig struct {
	Connector string `toml:"connector"`
	AgentID   string `toml:"agent_id"`
}

// Validate implements backendkit.Section; check does the rest.
func (a *AgentConfig) Validate(_ *config.Config, _ *config.Agent) []string { return nil }

// check checks every [agents.acc] together: the shared [acc] listener,
// one run at a time, no connector agent mapped twice.
func check(c *config.Config) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	uses := false
	seen := map[string]string{}
	for i, a := range c.Agents {
		x, ok := a.Section.(*AgentConfig)
		if !ok {
			continue
		}
		uses = true
		where := fmt.Sprintf("agents[%d]", i)
		if x.Connector == "" || x.AgentID == "" {
			add("%s: [agents.acc] needs connector and agent_id", where)
		}
		if len(x.AgentID) > 128 {
			add("%s: [agents.acc] agent_id is longer than 128 characters", where)
		}
		if a.MaxRunning > 1 {
			add("%s: max_running must be 1 for an [agents.acc] agent (one active run per agent)", where)
		}
		key := x.Connector + "\x00" + x.AgentID
		if prev, dup := seen[key]; dup {
			add("%s: [agents.acc] maps the same connector agent as %s", where, prev)
		}
		seen[key] = where
	}
	if c.ACC == nil && uses {
		add("[agents.acc] needs an [acc] section")
	}
	return errs
}

// FilesOf resolves the [acc] key material paths against the config.
func FilesOf(cfg *config.Config) Files {
	x := cfg.ACC
	if x == nil {
		x = &config.ACC{}
	}
	return Files{
		Cert: cfg.Path(x.CertFile), Key: cfg.Path(x.KeyFile),
		CA: cfg.Path(x.ClientCAFile), CAKey: cfg.Path(x.ClientCAKeyFile),
		JWTKey: cfg.Path(x.JWTKeyFile), Hostnames: x.Hostnames, EnrollDays: x.EnrollValidDays, URL: x.URL,
	}
}

// ServerOptions turns [acc] into the listener's options; Store,
// Publisher, Availability, Logger and Redactor are left for the caller.
func ServerOptions(cfg *config.Config) Options {
	x := cfg.ACC
	return Options{
		Listen: x.Listen, Files: FilesOf(cfg),
		Heartbeat: config.Seconds(x.HeartbeatSeconds), Grace: config.Seconds(x.ReconnectGraceSeconds),
		RegisterTimeout: config.Seconds(x.RegisterTimeoutSeconds), AcceptTimeout: config.Seconds(x.AcceptTimeoutSeconds),
		CancelTimeout: config.Seconds(x.CancelTimeoutSeconds), BusyRetry: config.Seconds(x.BusyRetrySeconds),
		ApprovalTimeout: config.Seconds(x.ApprovalTimeoutSeconds), HighRiskApprovers: x.HighRiskApprovers,
		ForwardToolOutput: x.ForwardToolOutput, MaxFrameBytes: x.MaxFrameBytes, MaxAgents: x.MaxAgents,
	}
}

// build maps an [agents.acc] endpoint onto the one listener, which the
// first such agent creates.
func build(_ context.Context, h backendkit.Host, a backendkit.Agent) error {
	cfg := a.Config
	v, err := h.Shared("acc", func() (any, error) {
		if cfg.ACC == nil {
			return nil, fmt.Errorf("[agents.acc] needs an [acc] section")
		}
		o := ServerOptions(cfg)
		h.Store(&o.Store)
		o.Publisher, o.Availability = h.Publisher(), h.Availability()
		o.Logger = h.Logger().With("part", "acc")
		o.Redactor = h.Redactor()
		s, err := NewServer(o)
		if err != nil {
			return nil, err
		}
		if h.Leased() {
			s.leased = true
			// One listener across the cluster: the holder of its lease
			// binds [acc] listen and runs every ACC endpoint's runs.
			return s, h.Hold(ListenerLease, s.Endpoints, s.Start)
		}
		return s, h.Add("", nil, s.Start)
	})
	if err != nil {
		return err
	}
	x := a.Section.(*AgentConfig)
	b := v.(*Server).AddAgent(AgentOptions{
		Endpoint: a.Endpoint, Connector: x.Connector, AgentID: x.AgentID,
		Name: a.Name, Title: a.Title, Description: a.Description, Version: a.Version,
	})
	return h.Add(a.Endpoint, b, nil)
}

// secrets are the listener's private keys (their PEM text), for the
// redactor.
func secrets(cfg *config.Config) []string {
	if cfg.ACC == nil {
		return nil
	}
	f := FilesOf(cfg)
	var out []string
	for _, p := range []string{f.Key, f.CAKey, f.JWTKey} {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			out = append(out, string(b))
		}
	}
	return out
}

// doctor checks that the listener's key material loads and the agent's
// connector is enrolled and not revoked. Whether the connector is
// connected is only known to the running gateway.
func doctor(ctx context.Context, d backendkit.Doctor, a backendkit.Agent) {
	f := FilesOf(a.Config)
	if _, err := tls.LoadX509KeyPair(f.Cert, f.Key); err != nil {
		d.Fail("ACC server certificate: %s — run `agentgw acc init`", backendkit.LastPart(err))
		return
	}
	if _, err := ReadCert(f.CA); err != nil {
		d.Fail("ACC connector CA: %s — run `agentgw acc init`", backendkit.LastPart(err))
		return
	}
	if _, err := ReadKey(f.JWTKey); err != nil {
		d.Fail("ACC JWT key: %s — run `agentgw acc init`", backendkit.LastPart(err))
		return
	}
	var accs accdb.Driver
	if !d.Store(&accs) {
		return // no store to read (doctor reported why)
	}
	x := a.Section.(*AgentConfig)
	c, ok, err := accs.Connector(ctx, x.Connector)
	switch {
	case err != nil:
		d.Fail("cannot read the ACC connectors: %s", backendkit.LastPart(err))
	case !ok:
		d.Fail("connector %q is not enrolled — run `agentgw acc enroll --name %s`", x.Connector, x.Connector)
	case c.Revoked():
		d.Fail("connector %q was revoked at %s — enroll another name", x.Connector, c.RevokedAt)
	default:
		d.OK("ACC key material loads; connector %q (%s) is enrolled", c.Name, c.ID)
	}
}
