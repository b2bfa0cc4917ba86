package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// TestDelegationDepthBoundsCallsBackThroughAgentgwMCP: MCP agents whose
// backend is `agentgw mcp` logged into the same Prosody make every call to
// them a call back through the same gateway. Three of them are chained by
// visibility (hop1's front sees only hop2, hop2's only hop3, hop3's only
// weather), so hop1 offers "hop2.hop3.weather.echo": alice → hop1 → hop2 →
// hop3 → weather, each hop a task whose invocation is one level deeper (the
// gateway passes the depth to the MCP server in _meta, the front sends it
// back on the invoke). With max_delegation_depth = 2 the last invoke (depth
// 3) is refused with policy-violation, and that refusal comes back up the
// chain as a clear tool error. The same chain one hop shorter completes.
//
// A front that sees its own endpoint mirrors its own tools one level
// deeper on every refresh, so a self-loop never holds still long enough to
// pin; the chain exercises the same calls without that.
func TestDelegationDepthBoundsCallsBackThroughAgentgwMCP(t *testing.T) {
	t.Parallel()
	bots := []string{"bot1", "bot2", "bot3"}
	e := e2e.Prepare(t, e2e.Options{
		Agents: []e2e.Agent{{Localpart: "weather"}},
		Users:  append([]string{"alice"}, bots...),
		Mutate: func(c *config.Config) {
			c.Tasks.MaxDelegationDepth = 2
			for i := range c.Agents {
				if strings.HasPrefix(c.Agents[i].JID, "weather@") {
					c.Agents[i].VisibleTo = []string{"bot3@example.test"}
				}
			}
		},
	})
	s := e.Server
	toml := e2e.DfRates
	visible := map[string]string{"hop1": "alice", "hop2": "bot1\", \"alice", "hop3": "bot2"}
	for i, hop := range []string{"hop1", "hop2", "hop3"} {
		bot := bots[i]
		toml += fmt.Sprintf(`
[[agents]]
jid = "%s@%s"
visible_to = ["%s@%s"]
[agents.mcp]
command = [%q, "mcp", "--jid", %q, "--password-env", "BOT_PW", "--server", %q, "--ca-file", %q, "--refresh", "500ms"]
env = { BOT_PW = %q }
`, hop, e.Domain, strings.ReplaceAll(visible[hop], `", "`, `@`+s.Domain+`", "`), s.Domain, e2e.Binary(t), e.JID(bot), s.C2SAddr, s.CAFile, e2e.Password+bot)
	}
	e.Opts.TOML = toml
	e.WriteConfig()
	e.StartGateway()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := e.Dial("alice")
	const deep = "hop2.hop3.weather.echo"
	testkit.WaitFor(t, 90*time.Second, "hop1 offers "+deep, func() bool {
		_, err := c.Pin(ctx, e.Endpoint("hop1"), deep)
		return err == nil
	})
	weatherCalls := func() int {
		n := 0
		for _, call := range e.Agents[e.Endpoint("weather").String()].Calls() {
			if call.Tool == "echo" {
				n++
			}
		}
		return n
	}

	// Within the bound: hop2 → hop3 → weather, the weather invoke at depth 2.
	out, err := c.Call(ctx, e.Endpoint("hop2"), "hop3.weather.echo", json.RawMessage(`{"message":"hi"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" || strings.Contains(string(out.Payload), `"isError":true`) {
		t.Fatalf("hop2's hop3.weather.echo: %v %+v\n%s", err, out, e2e.Tail(e.Log.String(), 4000))
	}
	if !strings.Contains(string(out.Payload), "hi") {
		t.Errorf("hop2's hop3.weather.echo lost the echo: %s", out.Payload)
	}
	if n := weatherCalls(); n != 1 {
		t.Fatalf("weather echo ran %d times, want 1", n)
	}

	// One hop more: the weather invoke would be depth 3.
	out, err = c.Call(ctx, e.Endpoint("hop1"), deep, json.RawMessage(`{"message":"hi"}`), agentclient.CallOptions{})
	if err != nil {
		t.Fatalf("%s: %v", deep, err)
	}
	t.Logf("%s ended %s: %s", deep, out.State, out.Payload)
	if out.State != "completed" || !strings.Contains(string(out.Payload), `"isError":true`) {
		t.Fatalf("%s: want a completed call with isError (the refusal as a tool error), got %s %s\n%s", deep, out.State, out.Payload, e2e.Tail(e.Log.String(), 4000))
	}
	for _, want := range []string{"policy-violation", "delegation depth exceeds this gateway's bound (delegation depth 3 exceeds the bound 2)"} {
		if !strings.Contains(string(out.Payload), want) {
			t.Errorf("result lacks %q: %s", want, out.Payload)
		}
	}
	if n := weatherCalls(); n != 1 {
		t.Errorf("weather echo ran %d times, want 1 (the refused hop must not reach it)", n)
	}
}

// TestAgentgwMCPBackendDoesNotMirrorItself: an `agentgw mcp` backend whose
// account can see its own endpoint lists that endpoint's tools back to the
// gateway (as "loop.weather.echo" …). The bridge leaves those mirrors of the
// endpoint's own tools out, so the manifest holds still instead of gaining
// one nesting level, and a new version, on every refresh.
func TestAgentgwMCPBackendDoesNotMirrorItself(t *testing.T) {
	t.Parallel()
	e := e2e.Prepare(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice", "loopbot"}})
	s := e.Server
	e.Opts.TOML = e2e.DfRates + fmt.Sprintf(`
[[agents]]
jid = "loop@%s"
[agents.mcp]
command = [%q, "mcp", "--jid", %q, "--password-env", "LOOP_PW", "--server", %q, "--ca-file", %q, "--refresh", "300ms"]
env = { LOOP_PW = %q }
`, e.Domain, e2e.Binary(t), e.JID("loopbot"), s.C2SAddr, s.CAFile, e2e.Password+"loopbot")
	e.WriteConfig()
	e.StartGateway()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := e.Dial("alice")
	loop := e.Endpoint("loop")
	testkit.WaitFor(t, 60*time.Second, "loop mirrors weather", func() bool {
		_, err := c.Pin(ctx, loop, "weather.echo")
		return err == nil
	})
	// The front has listed loop's own tools back at least once: the bridge
	// left them out, or (the bug) loop now mirrors itself.
	testkit.WaitFor(t, 60*time.Second, "loop's own tools to come back through the front", func() bool {
		if strings.Contains(e.Log.String(), "an agentgw mcp mirror of this endpoint's own tool") {
			return true
		}
		_, err := c.Pin(ctx, loop, "loop.weather.echo")
		return err == nil
	})
	p, err := c.Pin(ctx, loop, "weather.echo")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range p.Manifest.Doc.Tools {
		if strings.HasPrefix(tool.Name, "loop.") {
			t.Errorf("loop mirrors its own tool %q", tool.Name)
		}
	}
	if n := strings.Count(e.Log.String(), `msg="published MCP manifest" endpoint=loop@`); n > 2 {
		t.Errorf("loop's manifest was published %d times, want at most 2 (empty, then with weather's tools)", n)
	}
}
