package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/config"
)

// configFlag adds the --config flag every operator command takes.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "agentgw.toml", "path of the gateway's TOML config")
}

// bridges is the root's bridge table (gateway.Bridges), which the
// commands load configs with and doctor and host build and check bridges
// by; tests add a bridge to a copy.
var bridges = gateway.Bridges

func loadConfig(path string) (*config.Config, error) {
	return config.Load(path, bridges)
}

// openStores opens the store [store] driver selects.
func openStores(ctx context.Context, cfg *config.Config) (*gateway.Store, error) {
	st, err := gateway.OpenStores(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot open the store: %w", err)
	}
	return st, nil
}

// parsePrincipal accepts a domain or a bare JID and returns its normalized
// form.
func parsePrincipal(s string) (string, error) {
	j, err := jid.Parse(s)
	if err != nil || j.Resourcepart() != "" {
		return "", fmt.Errorf("%q is not a domain or a bare JID", s)
	}
	return j.Bare().String(), nil
}

// parseBareJID accepts only localpart@domain.
func parseBareJID(s string) (string, error) {
	j, err := jid.Parse(s)
	if err != nil || j.Resourcepart() != "" || j.Localpart() == "" {
		return "", fmt.Errorf("%q is not a bare JID (localpart@domain)", s)
	}
	return j.Bare().String(), nil
}

// agentByJID is the last of cfg's [[agents]] entries for the bare JID ep,
// nil when there is none.
func agentByJID(cfg *config.Config, ep string) *config.Agent {
	var agent *config.Agent
	for i := range cfg.Agents {
		if j, err := parseBareJID(cfg.Agents[i].JID); err == nil && j == ep {
			agent = &cfg.Agents[i]
		}
	}
	return agent
}

// printJSON writes v as indented JSON: the --json output of the operator
// commands that print data.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
