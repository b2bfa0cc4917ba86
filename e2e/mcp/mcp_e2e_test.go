package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// everythingTOML declares server-everything (installed from the committed
// npm lockfile) as an MCP agent over stdio.
func everythingTOML(t testing.TB, domain string) string {
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	return fmt.Sprintf(`
[[agents]]
jid = "everything@%s"
[agents.mcp]
command = ["node", %q, "stdio"]
`, domain, entry)
}

// TestMCPAgentThroughProsody calls server-everything's tools through XMPP.
func TestMCPAgentThroughProsody(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Users: []string{"alice"}, TOML: everythingTOML(t, "agents.example.test")})
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ep := e.Endpoint("everything")
	testkit.WaitFor(t, 60*time.Second, "server-everything's manifest", func() bool {
		_, err := c.GetManifest(ctx, ep, "")
		return err == nil
	})

	out, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"hello mcp"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" || !strings.Contains(string(out.Payload), "hello mcp") {
		t.Fatalf("echo: %v %+v", err, out)
	}
	out, err = c.Call(ctx, ep, "get-sum", json.RawMessage(`{"a":2,"b":40}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" || !strings.Contains(string(out.Payload), "42") {
		t.Fatalf("get-sum: %v %+v", err, out)
	}
	var percents []float64
	out, err = c.Call(ctx, ep, "trigger-long-running-operation", json.RawMessage(`{"duration":2,"steps":4}`), agentclient.CallOptions{
		OnProgress: func(p agentclient.Progress) {
			if p.Percent != nil {
				percents = append(percents, *p.Percent)
			}
		}})
	if err != nil || out.State != "completed" {
		t.Fatalf("long-running: %v %+v", err, out)
	}
	if len(percents) < 3 {
		t.Fatalf("progress percents = %v, want at least 3 rising", percents)
	}
	for i := 1; i < len(percents); i++ {
		if percents[i] < percents[i-1] {
			t.Fatalf("progress went down: %v", percents)
		}
	}
	t.Logf("progress: %v", percents)
}
