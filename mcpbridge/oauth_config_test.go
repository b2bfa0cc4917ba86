package mcpbridge

import (
	"strings"
	"testing"

	"github.com/agentgw/agentgw/backendkit/bridgetest"
)

// The [agents.mcp.oauth] problems, and its secrets among the config's.
func TestOAuthConfig(t *testing.T) {
	t.Parallel()
	base := `
[xmpp]
component_domain = "agents.example.test"
server = "127.0.0.1:5347"
secret_env = "S"

[[agents]]
jid = "x@agents.example.test"
[agents.mcp]
`
	for body, want := range map[string]string{
		"command = [\"a\"]\n[agents.mcp.oauth]\ngrant = \"client_credentials\"\nclient_id = \"c\"\nclient_secret_env = \"E\"": "[agents.mcp.oauth] is for url servers",
		"url = \"https://x/mcp\"\n[agents.mcp.oauth]\ngrant = \"password\"\nclient_id = \"c\"":                                "grant must be \"client_credentials\" or \"authorization_code\"",
		"url = \"https://x/mcp\"\n[agents.mcp.oauth]\ngrant = \"authorization_code\"\nclient_id = \"c\"":                      "needs token_file",
		"url = \"https://x/mcp\"\n[agents.mcp.oauth]\ngrant = \"client_credentials\"\nclient_id = \"c\"\ntoken = \"t\"":       "unknown keys: agents.mcp.oauth.token",
	} {
		if _, err := bridgetest.Load(t, base+body, Bridge); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", body, err, want)
		}
	}
	c, err := bridgetest.Load(t, base+"url = \"https://x/mcp\"\n[agents.mcp.oauth]\ngrant = \"client_credentials\"\nclient_id = \"c\"\nclient_secret_file = \"cs\"\n", Bridge)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Agents[0].Section.(*Config)
	if _, files := m.SecretSources(); len(files) != 1 || files[0] != "cs" {
		t.Fatalf("secret files %v, want the client secret file", files)
	}
	o := AgentOptions(c, c.Agents[0])
	if o.OAuth == nil {
		t.Fatal("no token source for [agents.mcp.oauth]")
	}
}
