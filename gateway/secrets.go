package gateway

import (
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
)

// Secrets returns every secret value the config refers to that can be read
// now: the component secret, the bridge sections' secrets (connector API
// keys, MCP header values, OAN keys, the ACC listener's keys), and the
// PostgreSQL DSN with its password.
// The logger scrubs them all. Unreadable ones are skipped here; the parts
// that need them report the problem.
func Secrets(cfg *config.Config) []string { return SecretsOf(cfg, Bridges) }

// SecretsOf is Secrets with the bridges of table.
func SecretsOf(cfg *config.Config, table backendkit.Bridges) []string {
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
		if s, ok := a.Section.(config.SecretSources); ok {
			envs, files := s.SecretSources()
			for _, env := range envs {
				add(env, "")
			}
			for _, file := range files {
				add("", file)
			}
		}
	}
	out = append(out, DSNSecrets(cfg)...)
	if tok, err := cfg.ConsoleToken(); err == nil && tok != "" {
		out = append(out, tok)
	}
	for _, b := range table {
		if b.Secrets != nil {
			out = append(out, b.Secrets(cfg)...)
		}
	}
	// An Authorization value "Bearer <token>" also protects the bare token.
	for _, v := range out {
		if cred := backendkit.CredentialPart(v); len(cred) >= backendkit.MinSecretLen {
			out = append(out, cred)
		}
	}
	return out
}
