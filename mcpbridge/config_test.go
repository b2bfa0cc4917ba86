package mcpbridge

import (
	"strings"
	"testing"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/backendkit/bridgetest"
	"github.com/agentgw/agentgw/internal/config"
)

var table = backendkit.Bridges{Bridge}

// The [agents.mcp] problems, reported with the other problems of the file
// (internal/config's TestLoadReportsEveryProblemClearly).
func TestConfigProblems(t *testing.T) {
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
		`url = "ftp://x"`:                       "[[agents]] #1: [agents.mcp] url must be an http or https URL",
		"command = [\"a\"]\nurl = \"http://x\"": "[[agents]] #1: [agents.mcp] needs exactly one of command or url",
		"":                                      "[[agents]] #1: [agents.mcp] needs exactly one of command or url",
		"url = \"http://x\"\nmax_sessions = 65": "[[agents]] #1: [agents.mcp] max_sessions must be between 1 and 64",
		"command = [\"a\"]\nheader_env = {A = \"B\"}": "unknown keys: agents.mcp.header_env",
	} {
		if _, err := bridgetest.Load(t, base+body, Bridge); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", body, err, want)
		}
	}
	c, err := bridgetest.Load(t, base+"command = [\"npx\", \"server-everything\"]\nheaders_env = {Authorization = \"MCP_AUTH\"}\n", Bridge)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := c.Agents[0].Section.(*Config); !ok || len(m.Command) != 2 || m.HeadersEnv["Authorization"] != "MCP_AUTH" {
		t.Fatalf("section = %#v", c.Agents[0].Section)
	}
	if got := c.SecretEnvNames(); len(got) != 2 || got[0] != "MCP_AUTH" {
		t.Errorf("SecretEnvNames = %v, want the header's variable beside secret_env", got)
	}
}

// The host file's [mcp] table (internal/config's TestLoadHost).
func TestHostFile(t *testing.T) {
	t.Parallel()
	h, err := config.LoadHost(bridgetest.Write(t, "name = \"bot\"\n[mcp]\ncommand = [\"node\", \"server.js\", \"stdio\"]\n"), table)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := h.Section.(*Config); !ok || len(m.Command) != 3 || h.Backend != "mcp" {
		t.Fatalf("host file = %+v", h)
	}
	for body, want := range map[string]string{
		"[mcp]\ncommand = [\"a\"]\nurl = \"http://x\"": "[mcp] needs exactly one of command or url",
		`name = "x"`: "an [mcp] table (command or url) is required",
	} {
		if _, err := config.LoadHost(bridgetest.Write(t, body), table); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", body, err, want)
		}
	}
}
