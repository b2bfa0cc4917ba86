package a2a_test

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

// An artifact update with append:false replaces the artifact of the same
// id; append:true extends it (A2A 0.3 §7.2.2, 1.0 §4.2.2). The raw peer's
// rewrite skill sends A "draft", A "final" (append:false), B "x", B "y"
// (append:true): the XMPP result is final, x, y — never the draft.
func TestA2ABackendArtifactReplace(t *testing.T) {
	t.Parallel()
	peer := e2e.StartA2AScript(t, "rawpeer.mjs", `{}`)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Start(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: e2e.A2ATOML(srv.ComponentDomain, peer.URL+"/.well-known/agent-card.json")})
	ep := e.Endpoint("remote")
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testkit.WaitFor(t, 30*time.Second, "the A2A endpoint's manifest", func() bool {
		_, err := c.Pin(ctx, ep, "rewrite")
		return err == nil
	})
	out, err := c.Call(ctx, ep, "rewrite", json.RawMessage(`{"text":"go"}`), agentclient.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Result struct {
			Content []struct{ Type, Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out.Payload, &p); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, c := range p.Result.Content {
		texts = append(texts, c.Text)
	}
	if string(out.State) != "completed" || strings.Join(texts, "|") != "final|x|y" {
		t.Fatalf("result %s with texts %q, want completed with [final x y]", out.State, texts)
	}
}
