package mcp

// MCP Tasks at the backend (issue 30 §2): server-everything's
// simulate-research-query runs as an MCP task. Over streamable HTTP (a
// separate process the gateway's kill -9 does not touch) the XMPP task
// survives a kill -9 of `agentgw serve`: the restarted gateway re-attaches
// to the remote task and completes it with the server's result, and the
// tool ran once (counted at a proxy in front of the server). Over stdio the
// server dies with the gateway, and the task settles agentgw:interrupted
// saying why.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

const researchTool = "simulate-research-query"

// callCounter is a reverse proxy in front of an MCP server that counts the
// tools/call requests of one tool: how often the tool was started.
type callCounter struct {
	url   string
	calls atomic.Int64
}

func countCalls(t *testing.T, target, tool string) *callCounter {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	path := u.Path
	u.Path = ""
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // server-sent events pass at once
	cc := &callCounter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"`+tool+`"`)) {
				cc.calls.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cc.url = srv.URL + path
	return cc
}

// startResearch invokes simulate-research-query and waits until the
// server's task reports its first stage (the remote task exists and its
// handle is committed: progress is relayed only after that).
func startResearch(t *testing.T, ctx context.Context, c *agentclient.Client, ep jid.JID, topic string) *agentclient.Accepted {
	t.Helper()
	p := e2e.WaitPinned(t, ctx, c, ep, researchTool)
	args, err := p.ValidateArguments(json.RawMessage(`{"topic":"` + topic + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: researchTool, Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	events, stop := c.Subscribe(ep, acc.TaskID)
	defer stop()
	for {
		select {
		case ev := <-events:
			if ev.Terminal() {
				t.Fatalf("research settled before the kill: %s %s", ev.Type, ev.Payload)
			}
			if ev.Type == "progress" && strings.Contains(string(ev.Payload), "Gathering sources") {
				return acc
			}
		case <-time.After(60 * time.Second):
			t.Fatal("no stage of the research task within 60 s")
		}
	}
}

// settled waits (through the restarted gateway) for the task's end.
func settled(t *testing.T, ctx context.Context, c *agentclient.Client, ep jid.JID, taskID string) *agentclient.TaskResult {
	t.Helper()
	var st *agentclient.TaskState
	testkit.WaitFor(t, 90*time.Second, "the task to settle after the restart", func() bool {
		var err error
		st, err = c.State(ctx, ep, taskID)
		return err == nil && st.Terminal()
	})
	res, err := c.Result(ctx, ep, taskID)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestMCPTaskSurvivesKill9HTTP(t *testing.T) {
	t.Parallel()
	testTaskSurvivesRestartHTTP(t, true)
}

// TestMCPTaskSurvivesGracefulRestartHTTP: the same through SIGTERM: the
// task is left running for the next start, and its session (where the
// server keeps the task) is not deleted.
func TestMCPTaskSurvivesGracefulRestartHTTP(t *testing.T) {
	t.Parallel()
	testTaskSurvivesRestartHTTP(t, false)
}

func testTaskSurvivesRestartHTTP(t *testing.T, kill bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	counter := countCalls(t, everythingHTTP(t), researchTool)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: inputTOML(t, counter.url, "")(srv.ComponentDomain)})
	gw1 := e.Serve("gw1")
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	ep := e.Endpoint("everything")
	acc := startResearch(t, ctx, c, ep, "tides")
	killed := time.Now()
	how := "kill -9"
	if kill {
		gw1.Kill()
	} else {
		how = "SIGTERM"
		gw1.Stop()
	}

	gw2 := e.Serve("gw2")
	res := settled(t, ctx, c, ep, acc.TaskID)
	took := time.Since(killed)
	if res.State != "completed" || !strings.Contains(string(res.Payload), "Research Report: tides") {
		t.Fatalf("after %s and restart the task ended %s %.300s, want completed with the server's report", how, res.State, res.Payload)
	}
	if n := counter.calls.Load(); n != 1 {
		t.Fatalf("the tool was started %d times, want once", n)
	}
	reattached := ""
	for _, l := range strings.Split(gw2.Log(), "\n") {
		if strings.Contains(l, "MCP task re-attached after a restart") {
			reattached = l
		}
	}
	if reattached == "" {
		t.Errorf("the restarted gateway did not log the re-attachment:\n%s", e2e.Tail(gw2.Log(), 3000))
	}
	t.Logf("gw2: %s", reattached)
	t.Logf("%s mid-task: re-attached and completed %v after the stop; tools/call sent %d time(s)", how, took.Round(time.Millisecond), counter.calls.Load())
}

func TestMCPTaskKill9StdioInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: e2e.EverythingTOML(t, "everything", srv.ComponentDomain)})
	gw1 := e.Serve("gw1")
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	ep := e.Endpoint("everything")
	acc := startResearch(t, ctx, c, ep, "tides")
	gw1.Kill() // and the stdio server with it

	e.Serve("gw2")
	res := settled(t, ctx, c, ep, acc.TaskID)
	p := string(res.Payload)
	if res.State != "failed" || !strings.Contains(p, agentproto.CodeInterrupted) || !strings.Contains(p, "stdio") {
		t.Fatalf("after kill -9 the stdio task ended %s %s, want failed %s saying its stdio server stopped", res.State, p, agentproto.CodeInterrupted)
	}
	t.Logf("stdio task after kill -9: %s %s", res.State, p)
}

// TestMCPTaskConcurrentQuestionsHTTP: several ambiguous research calls at
// once, each asking its own question through related-task metadata; every
// answer reaches its own task.
func TestMCPTaskConcurrentQuestionsHTTP(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e, c, _, ep := e2e.AccStart(t, "everything", inputTOML(t, everythingHTTP(t), ""))
	e2e.WaitPinned(t, ctx, c, ep, researchTool)
	choices := []string{"technical", "historical", "current", "technical", "historical", "current"}
	type outcome struct {
		questions []string
		state     string
		text      string
		err       error
	}
	out := make([]outcome, len(choices))
	var wg sync.WaitGroup
	for i, choice := range choices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			topic := "topic" + string(rune('a'+i))
			var mu sync.Mutex
			o, err := c.Call(ctx, ep, researchTool, json.RawMessage(`{"topic":"`+topic+`","ambiguous":true}`), agentclient.CallOptions{
				OnInput: func(_ context.Context, req agentclient.InputRequest) (json.RawMessage, error) {
					mu.Lock()
					out[i].questions = append(out[i].questions, req.Question)
					mu.Unlock()
					return json.RawMessage(`{"interpretation":"` + choice + `"}`), nil
				},
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out[i].err = err
				return
			}
			out[i].state, out[i].text = string(o.State), string(o.Payload)
		}()
	}
	wg.Wait()
	for i, choice := range choices {
		topic := "topic" + string(rune('a'+i))
		o := out[i]
		if o.err != nil || o.state != "completed" {
			t.Errorf("call %d: %v %s %.200s (questions %q)", i, o.err, o.state, o.text, o.questions)
			continue
		}
		if len(o.questions) != 1 || !strings.Contains(o.questions[0], `"`+topic+`"`) {
			t.Errorf("call %d (%s): questions %q, want one about its own topic", i, topic, o.questions)
		}
		if !strings.Contains(o.text, "Research Report: "+topic+" ("+choice+")") {
			t.Errorf("call %d: the report does not carry its own answer %q: %.200s", i, choice, o.text)
		}
	}
	if t.Failed() {
		var lines []string
		for _, l := range strings.Split(e.Log.String(), "\n") {
			if strings.Contains(l, "MCP") || strings.Contains(l, "elicit") || strings.Contains(l, "input") {
				lines = append(lines, l)
			}
		}
		t.Logf("gateway log (MCP lines):\n%s", e2e.Tail(strings.Join(lines, "\n"), 6000))
	}
	if !t.Failed() {
		t.Logf("%d concurrent ambiguous research tasks: each asked one question of its own and got its own answer", len(choices))
	}
}
