package gateway

import (
	"testing"

	"github.com/agentgw/agentgw/accbridge"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/mcpbridge"
)

// One active run per ACC agent (acc-notes MUST) is the engine's running
// limit of 1 for every [agents.acc] endpoint.
func TestACCAgentsRunOneAtATime(t *testing.T) {
	cfg := &config.Config{Agents: []config.Agent{
		{JID: "hermes@agents.example.test", Backend: "acc", Section: &accbridge.AgentConfig{Connector: "farm", AgentID: "a"}},
		{JID: "mcp@agents.example.test", MaxRunning: 5, Backend: "mcp", Section: &mcpbridge.Config{URL: "http://x"}},
		{JID: "other@agents.example.test", Backend: "mcp", Section: &mcpbridge.Config{URL: "http://x"}},
	}}
	limit := runningLimits(cfg, Bridges)
	if got := limit("hermes@agents.example.test"); got != 1 {
		t.Fatalf("ACC agent running limit %d, want 1", got)
	}
	if got := limit("mcp@agents.example.test"); got != 5 {
		t.Fatalf("max_running override %d", got)
	}
	if got := limit("other@agents.example.test"); got != 0 {
		t.Fatalf("default %d, want 0 (the engine's max_running_per_backend)", got)
	}
}
