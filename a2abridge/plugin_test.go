package a2abridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
)

func load(t *testing.T, body string) (*config.Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agentgw.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(p, backendkit.Bridges{Bridge})
}

func TestA2AAgentURL(t *testing.T) {
	base := "[xmpp]\nserver = \"127.0.0.1:5347\"\ncomponent_domain = \"agents.example.test\"\nsecret_env = \"S\"\n[[agents]]\njid = \"remote@agents.example.test\"\n[agents.a2a]\n"
	for u, ok := range map[string]bool{
		"http://127.0.0.1:9/.well-known/agent-card.json": true,
		"https://a.example/.well-known/agent-card.json":  true,
		"ftp://a.example/card":                           false,
		"https://user:pw@a.example/card":                 false,
		"/relative/card":                                 false,
	} {
		_, err := load(t, base+"url = \""+u+"\"\n")
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), "[agents.a2a] url must be")) {
			t.Errorf("%s: %v", u, err)
		}
	}
}
