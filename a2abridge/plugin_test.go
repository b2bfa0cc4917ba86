package a2abridge

import (
	"strings"
	"testing"

	"github.com/agentgw/agentgw/backendkit/bridgetest"
)

func TestA2AAgentURL(t *testing.T) {
	base := "[xmpp]\nserver = \"127.0.0.1:5347\"\ncomponent_domain = \"agents.example.test\"\nsecret_env = \"S\"\n[[agents]]\njid = \"remote@agents.example.test\"\n[agents.a2a]\n"
	for u, ok := range map[string]bool{
		"http://127.0.0.1:9/.well-known/agent-card.json": true,
		"https://a.example/.well-known/agent-card.json":  true,
		"ftp://a.example/card":                           false,
		"https://user:pw@a.example/card":                 false,
		"/relative/card":                                 false,
	} {
		_, err := bridgetest.Load(t, base+"url = \""+u+"\"\n", Bridge)
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), "[agents.a2a] url must be")) {
			t.Errorf("%s: %v", u, err)
		}
	}
}
