package a2a

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// An A2A agent from the official JS SDK behind [agents.a2a], invoked by
// slixmpp through Prosody and the gateway: manifest from the card,
// completion, streaming status as progress, input-required, and cancel
// (honoured by the agent, and ignored by it).
func TestA2ABackendSlixmpp(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	agent := e2e.StartA2AAgent(t, `{}`)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Start(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: e2e.A2ATOML(srv.ComponentDomain, agent.URL+"/.well-known/agent-card.json")})
	ep := e.Endpoint("remote")
	c := e.Dial("alice")
	testkit.WaitFor(t, 30*time.Second, "the A2A endpoint's manifest", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.GetManifest(ctx, ep, "")
		return err == nil
	})
	checks := e2e.RunSlixmpp(t, e, "a2a.py", "alice", "--endpoint", ep.String())
	e2e.RequireChecks(t, checks, "a2a-manifest", "a2a-echo", "a2a-streaming-progress", "a2a-input-required", "a2a-cancel", "a2a-cancel-ignored")
	// Each invocation reached the agent exactly once.
	for skill, want := range map[string]int{"echo": 1, "long": 2, "ask": 1, "stuck": 1} {
		if got := agent.Count(skill); got != want {
			t.Errorf("the agent executed %s %d times, want %d", skill, got, want)
		}
	}
}

// Hostile cards: too large, redirected to another host, an interface on
// another host — each refused with a clear log line, the endpoint never
// published, nothing crashes.
func TestA2ABackendHostileCards(t *testing.T) {
	t.Parallel()
	other := e2e.StartA2AAgent(t, `{}`)
	for name, c := range map[string]struct{ opts, want string }{
		"huge":     {`{"mode":"huge-card"}`, "larger than"},
		"redirect": {`{"mode":"redirect-card","redirect":"` + strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + `/.well-known/agent-card.json"}`, "redirect to another host refused"},
		"foreign":  {`{"mode":"foreign-url"}`, "not on the card's host"},
	} {
		t.Run(name, func(t *testing.T) {
			agent := e2e.StartA2AAgent(t, c.opts)
			srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
			e := e2e.Start(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: e2e.A2ATOML(srv.ComponentDomain, agent.URL+"/.well-known/agent-card.json")})
			testkit.WaitFor(t, 30*time.Second, "the refusal in the log", func() bool { return strings.Contains(e.Log.String(), c.want) })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := e.Dial("alice").GetManifest(ctx, e.Endpoint("remote"), ""); err == nil {
				t.Errorf("a manifest was published from a refused card")
			}
		})
	}
}

// A result the bridge cannot carry fails with a documented code, never
// completed with empty content; single SSE events far over a 64 KiB line
// scanner (and under the 16 MiB event cap) pass whole. The peer is a raw
// A2A 0.3 server writing its own SSE frames (testdata/a2a/rawpeer.mjs);
// it answers a resubscription to a settled task with the task's snapshot,
// or (as a server without event history may) with its final status only.
func TestA2ABackendUnreadableResults(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"snapshot", "status"} {
		t.Run(mode, func(t *testing.T) { testA2AUnreadable(t, `{"resubscribe":"`+mode+`"}`) })
	}
}

func testA2AUnreadable(t *testing.T, peerOpts string) {
	peer := e2e.StartA2AScript(t, "rawpeer.mjs", peerOpts)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Start(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: e2e.A2ATOML(srv.ComponentDomain, peer.URL+"/.well-known/agent-card.json")})
	ep := e.Endpoint("remote")
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	testkit.WaitFor(t, 30*time.Second, "the A2A endpoint's manifest", func() bool {
		_, err := c.Pin(ctx, ep, "empty")
		return err == nil
	})
	type want struct {
		state, code string
		text        string // the one text content, for completed
	}
	cases := map[string]want{
		"oddpart": {state: "failed", code: "agentgw:a2a-protocol"},
		"big":     {state: "completed", text: strings.Repeat("b", 200<<10)},
		"bigmsg":  {state: "completed", text: strings.Repeat("g", 200<<10)},
		"huge":    {state: "failed", code: "agentgw:result-too-large"},
		"many":    {state: "failed", code: "agentgw:result-too-large"},
		"empty":   {state: "completed"},
	}
	type got struct {
		out *agentclient.Outcome
		err error
	}
	results := map[string]got{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for skill := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := c.Call(ctx, ep, skill, json.RawMessage(`{"text":"go"}`), agentclient.CallOptions{})
			mu.Lock()
			results[skill] = got{out, err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for skill, w := range cases {
		r := results[skill]
		if r.err != nil {
			t.Errorf("%s: %v", skill, r.err)
			continue
		}
		var p struct {
			Result struct {
				Content []struct {
					Type, Text string
				} `json:"content"`
			} `json:"result"`
			Error struct {
				Code, Message string
			} `json:"error"`
		}
		if err := json.Unmarshal(r.out.Payload, &p); err != nil {
			t.Errorf("%s: payload %v", skill, err)
			continue
		}
		switch {
		case string(r.out.State) != w.state:
			t.Errorf("%s: %s (code %q, %d content blocks), want %s %s", skill, r.out.State, p.Error.Code, len(p.Result.Content), w.state, w.code)
		case w.state == "failed" && p.Error.Code != w.code:
			t.Errorf("%s: failed %q (%s), want %q", skill, p.Error.Code, p.Error.Message, w.code)
		case w.state == "completed" && w.text == "" && len(p.Result.Content) != 0:
			t.Errorf("%s: %d content blocks, want none", skill, len(p.Result.Content))
		case w.state == "completed" && w.text != "" && (len(p.Result.Content) != 1 || p.Result.Content[0].Text != w.text):
			n := 0
			if len(p.Result.Content) > 0 {
				n = len(p.Result.Content[0].Text)
			}
			t.Errorf("%s: %d content blocks (first text %d bytes), want the whole %d bytes", skill, len(p.Result.Content), n, len(w.text))
		}
	}
}
