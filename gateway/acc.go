package gateway

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/agentgw/agentgw/accbridge"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
)

// ACCFiles resolves the [acc] key material paths against the config.
func ACCFiles(cfg *config.Config) accbridge.Files {
	x := cfg.ACC
	if x == nil {
		x = &config.ACC{}
	}
	return accbridge.Files{
		Cert: cfg.Path(x.CertFile), Key: cfg.Path(x.KeyFile),
		CA: cfg.Path(x.ClientCAFile), CAKey: cfg.Path(x.ClientCAKeyFile),
		JWTKey: cfg.Path(x.JWTKeyFile), Hostnames: x.Hostnames, EnrollDays: x.EnrollValidDays, URL: x.URL,
	}
}

// ACCOptions turns [acc] into the listener's options; Store, Publisher,
// Availability, Logger and Redactor are left for the caller.
func ACCOptions(cfg *config.Config) accbridge.Options {
	x := cfg.ACC
	return accbridge.Options{
		Listen: x.Listen, Files: ACCFiles(cfg),
		Heartbeat: config.Seconds(x.HeartbeatSeconds), Grace: config.Seconds(x.ReconnectGraceSeconds),
		RegisterTimeout: config.Seconds(x.RegisterTimeoutSeconds), AcceptTimeout: config.Seconds(x.AcceptTimeoutSeconds),
		CancelTimeout: config.Seconds(x.CancelTimeoutSeconds), BusyRetry: config.Seconds(x.BusyRetrySeconds),
		ApprovalTimeout: config.Seconds(x.ApprovalTimeoutSeconds), HighRiskApprovers: x.HighRiskApprovers,
		ForwardToolOutput: x.ForwardToolOutput, MaxFrameBytes: x.MaxFrameBytes, MaxAgents: x.MaxAgents,
	}
}

// addACCAgent maps an [agents.acc] endpoint onto the one ACC listener,
// creating it with the first such agent.
func (g *Gateway) addACCAgent(ep string, a config.Agent, log *slog.Logger) error {
	if g.acc == nil {
		if g.cfg.ACC == nil {
			return fmt.Errorf("agent %s: [agents.acc] needs an [acc] section", ep)
		}
		o := ACCOptions(g.cfg)
		o.Store, o.Publisher, o.Availability = g.Store.ACC, publisher{g}, availability{g}
		o.Logger = g.log.With("part", "acc")
		o.Redactor = g.opts.Redactor
		if o.Redactor == nil {
			o.Redactor = backendkit.NewRedactor(g.secrets)
		}
		s, err := accbridge.NewServer(o)
		if err != nil {
			return err
		}
		g.acc = s
		g.starters = append(g.starters, s.Start)
	}
	b := g.acc.AddAgent(accbridge.AgentOptions{
		Endpoint: ep, Connector: a.ACC.Connector, AgentID: a.ACC.AgentID,
		Name: a.Name, Title: a.Title, Description: a.Description, Version: a.Version,
	})
	g.backends[ep] = b
	return nil
}

// ACC returns the control-center listener, nil without [agents.acc].
func (g *Gateway) ACC() *accbridge.Server { return g.acc }

// accSecrets are the listener's private keys (their PEM text), for the
// redactor.
func accSecrets(cfg *config.Config) []string {
	if cfg.ACC == nil {
		return nil
	}
	f := ACCFiles(cfg)
	var out []string
	for _, p := range []string{f.Key, f.CAKey, f.JWTKey} {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			out = append(out, string(b))
		}
	}
	return out
}
