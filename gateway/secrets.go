package gateway

import (
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
)

// Secrets returns every secret value the config refers to that can be read
// now: the component secret, connector API keys, MCP header values, and
// the PostgreSQL DSN with its password.
// The logger scrubs them all. Unreadable ones are skipped here; the parts
// that need them report the problem.
func Secrets(cfg *config.Config) []string {
	var out []string
	add := func(env, file string) {
		if v, err := config.ReadSecret(env, cfg.Path(file)); err == nil {
			out = append(out, v)
		}
	}
	if cfg.XMPP.SecretEnv != "" {
		add(cfg.XMPP.SecretEnv, "")
	} else if cfg.XMPP.SecretFile != "" {
		add("", cfg.XMPP.SecretFile)
	}
	for _, a := range cfg.Agents {
		if c := a.Connector; c != nil {
			if c.APIKeyEnv != "" {
				add(c.APIKeyEnv, "")
			} else if c.APIKeyFile != "" {
				add("", c.APIKeyFile)
			}
		}
		if o := a.OAN; o != nil && o.APIKeyFile != "" {
			add("", o.APIKeyFile)
		}
		if m := a.MCP; m != nil {
			for _, env := range m.HeadersEnv {
				add(env, "")
			}
			for _, file := range m.HeadersFile {
				add("", file)
			}
		}
	}
	out = append(out, DSNSecrets(cfg)...)
	out = append(out, accSecrets(cfg)...)
	// An Authorization value "Bearer <token>" also protects the bare token.
	for _, v := range out {
		if cred := backendkit.CredentialPart(v); len(cred) >= backendkit.MinSecretLen {
			out = append(out, cred)
		}
	}
	return out
}
