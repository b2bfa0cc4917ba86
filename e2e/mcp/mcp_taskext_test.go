package mcp

// MCP Tasks in the 2026-07-28 extension form at the backend (issue 30
// rest §3): testdata/mcptaskserver (written from SEP-2663; no SDK here
// speaks the extension) runs as a process of its own over streamable
// HTTP. The gateway negotiates the form from the server's advertised
// extension, calls task-augmented, answers the task's question with
// tasks/update, and after a kill -9 of `agentgw serve` re-attaches with
// tasks/get: the XMPP task completes with the server's result, and the
// tool ran once (counted at the server).

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

func TestMCPTaskExtensionSurvivesKill9(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ref := e2e.MCPTaskServer(t)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: inputTOML(t, ref.URL, "")(srv.ComponentDomain)})
	gw1 := e.Serve("gw1")
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	ep := e.Endpoint("everything")
	p := e2e.WaitPinned(t, ctx, c, ep, "research")
	args, err := p.ValidateArguments(json.RawMessage(`{"topic":"tides","hold":true}`))
	if err != nil {
		t.Fatal(err)
	}
	acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: "research", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	questions := make(chan string, 4)
	go func() {
		_, _ = c.Follow(ctx, ep, acc, agentclient.CallOptions{OnInput: func(_ context.Context, req agentclient.InputRequest) (json.RawMessage, error) {
			questions <- req.Question
			return json.RawMessage(`{"year":1999}`), nil
		}})
	}()
	select {
	case q := <-questions:
		if !strings.Contains(q, "Which year") {
			t.Fatalf("question %q", q)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the task's question did not reach the caller")
	}
	// The answer reached the server (tasks/update): the task holds in
	// its second stage. Now the gateway dies.
	testkit.WaitFor(t, 60*time.Second, "the answer at the server", func() bool { return ref.Stats(t)["updates"] == 1 })
	killed := time.Now()
	gw1.Kill()

	gw2 := e.Serve("gw2")
	testkit.WaitFor(t, 90*time.Second, "the re-attachment", func() bool {
		return strings.Contains(gw2.Log(), "MCP task re-attached after a restart")
	})
	ref.Release(t)
	res := settled(t, ctx, c, ep, acc.TaskID)
	if res.State != "completed" || !strings.Contains(string(res.Payload), "Research report: tides in 1999") {
		t.Fatalf("after kill -9 and restart the task ended %s %.300s, want completed with the server's report", res.State, res.Payload)
	}
	st := ref.Stats(t)
	if st["runs"] != 1 || st["unknown"] != 0 {
		t.Fatalf("server stats %v: the tool must run once and no request name an unknown task", st)
	}
	t.Logf("2026-07-28 extension task: answered via tasks/update, kill -9 of the gateway, re-attached and completed %v after the kill; server stats %v",
		time.Since(killed).Round(time.Millisecond), st)
}
