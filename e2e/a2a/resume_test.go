package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// The same slixmpp checks as TestA2ABackendSlixmpp against an agent whose
// card lists an A2A 1.0 JSON-RPC interface only: the bridge picks it from
// the card and calls it with A2A 1.0 (the manifest records the version).
func TestA2ABackendSlixmpp10(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	agent := e2e.StartA2AAgent(t, `{"v10":true}`)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Start(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: e2e.A2ATOML(srv.ComponentDomain, agent.URL+"/.well-known/agent-card.json")})
	ep := e.Endpoint("remote")
	c := e.Dial("alice")
	var m *agentclient.Manifest
	testkit.WaitFor(t, 30*time.Second, "the A2A endpoint's manifest", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		m, err = c.GetManifest(ctx, ep, "")
		return err == nil
	})
	if !strings.Contains(string(m.JSON), `"protocolVersion":"1.0"`) {
		t.Errorf("the manifest does not record A2A 1.0: %s", m.JSON)
	}
	checks := e2e.RunSlixmpp(t, e, "a2a.py", "alice", "--endpoint", ep.String())
	e2e.RequireChecks(t, checks, "a2a-manifest", "a2a-echo", "a2a-streaming-progress", "a2a-input-required", "a2a-cancel", "a2a-cancel-ignored")
	for skill, want := range map[string]int{"echo": 1, "long": 2, "ask": 1, "stuck": 1} {
		if got := agent.Count(skill); got != want {
			t.Errorf("the agent executed %s %d times, want %d", skill, got, want)
		}
	}
}

// kill -9 of `agentgw serve` while an A2A task runs at the agent (a JS SDK
// 1.3.0 server, its own process): after the restart the XMPP task
// completes with the agent's result, executed once; a task that was
// waiting for input cannot be followed (its question was asked of the dead
// gateway): it settles agentgw:interrupted and the remote task is
// cancelled at the agent. For an agent of either version.
func TestA2ABackendResumeAfterKill9(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]string{"1.0": `{"v10":true,"slowSteps":40}`, "0.3": `{"slowSteps":40}`} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resumeAfterKill(t, opts)
		})
	}
}

func resumeAfterKill(t *testing.T, agentOpts string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	agent := e2e.StartA2AAgent(t, agentOpts)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: e2e.A2ATOML(srv.ComponentDomain, agent.URL+"/.well-known/agent-card.json")})
	ep := e.Endpoint("remote")
	gw1 := e.Serve("gw1")
	c := e.Dial("alice")
	slow := e2e.WaitPinned(t, ctx, c, ep, "slow")
	ask := e2e.WaitPinned(t, ctx, c, ep, "ask")
	invoke := func(p *agentclient.Pinned, text string) string {
		acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: p.Tool.Name, Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{"text":"` + text + `"}`)})
		if err != nil {
			t.Fatalf("invoke %s: %v", p.Tool.Name, err)
		}
		return acc.TaskID
	}
	slowID := invoke(slow, "go")
	askID := invoke(ask, "?")
	state := func(id string) *agentclient.TaskState {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := c.State(sctx, ep, id)
		if err != nil {
			return nil
		}
		return st
	}
	// The slow task runs at the agent (its progress reached XMPP, so its
	// remote id is committed); the ask task waits for input.
	testkit.WaitFor(t, 60*time.Second, "the slow task's progress and the ask task's question", func() bool {
		s, a := state(slowID), state(askID)
		return s != nil && s.State == agentproto.StateRunning && s.Revision >= 3 && a != nil && a.State == agentproto.StateInputRequired
	})
	gw1.Kill()
	if st := agent.Tasks("slow"); len(st) != 1 {
		t.Fatalf("the agent ran slow %d times before the kill", len(st))
	}
	gw2 := e.Serve("gw2")

	var res *agentclient.TaskResult
	testkit.WaitFor(t, 90*time.Second, "the slow task to settle after the restart", func() bool {
		s := state(slowID)
		if s == nil || !s.Terminal() {
			return false
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := c.Result(rctx, ep, slowID)
		if err != nil {
			return false
		}
		res = r
		return true
	})
	if res.State != agentproto.StateCompleted || !strings.Contains(string(res.Payload), "slow done after 40 steps") {
		t.Errorf("the resumed task settled %s: %s\ngw2 log:\n%s", res.State, res.Payload, e2e.Tail(gw2.Log(), 3000))
	}
	if n := agent.Count("slow"); n != 1 {
		t.Errorf("the agent executed slow %d times, want 1", n)
	}
	if !strings.Contains(gw2.Log(), "resuming an A2A task after a restart") {
		t.Errorf("gw2 did not log the resumption")
	}

	// The task that waited for input: interrupted, and cancelled remotely.
	a := state(askID)
	if a == nil || a.State != agentproto.StateFailed {
		t.Fatalf("the ask task after the restart: %+v", a)
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	r, err := c.Result(rctx, ep, askID)
	rcancel()
	if err != nil || !strings.Contains(string(r.Payload), agentproto.CodeInterrupted) {
		t.Errorf("the ask task's result: %v %v", r, err)
	}
	remoteAsk := agent.Tasks("ask")
	if len(remoteAsk) != 1 {
		t.Fatalf("the agent ran ask %d times", len(remoteAsk))
	}
	deadline := time.Now().Add(30 * time.Second)
	for remoteState(t, agent.URL, remoteAsk[0]) != "TASK_STATE_CANCELED" {
		if time.Now().After(deadline) {
			var lines []string
			for _, l := range strings.Split(gw2.Log(), "\n") {
				if strings.Contains(l, "A2A") || strings.Contains(l, "a2a") {
					lines = append(lines, l)
				}
			}
			t.Fatalf("the remote ask task was not cancelled (state %q); gw2's A2A lines:\n%s", remoteState(t, agent.URL, remoteAsk[0]), strings.Join(lines, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// remoteState reads a task's state at the agent: A2A 1.0 GetTask, else
// 0.3 tasks/get (an agent whose card lists 0.3 only), as a TASK_STATE_*.
func remoteState(t *testing.T, base, id string) string {
	for _, v10 := range []bool{true, false} {
		method, ver := "GetTask", "1.0"
		if !v10 {
			method, ver = "tasks/get", ""
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": map[string]any{"id": id}})
		req, _ := http.NewRequest("POST", base+"/rpc", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if ver != "" {
			req.Header.Set("A2A-Version", ver)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return ""
		}
		var r struct {
			Result struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"result"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		switch st := r.Result.Status.State; {
		case st == "canceled":
			return "TASK_STATE_CANCELED"
		case st != "":
			return st
		}
	}
	return ""
}
