package mcp

// Interactive input over MCP does not depend on luck (issue 27 item 1):
// after cancelled and expired calls, and with several callers in flight,
// every call of the real server-everything that asks for input reaches
// input_required with its own question, and every answer reaches its own
// call. Over stdio and over server-everything's streamable HTTP mode.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit/e2e"
)

const elicitQuestion = "Please provide inputs for the following fields:"

// everythingHTTP starts server-everything in its streamable HTTP mode on a
// free port and returns its MCP URL. The process ends with the test.
func everythingHTTP(t *testing.T) string {
	t.Helper()
	node, entry := e2e.AccEverything(t)
	port := e2e.FreePort(t)
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Env = append(cmd.Environ(), "PORT="+strconv.Itoa(port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				once.Do(func() { close(listening) })
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(60 * time.Second):
		t.Fatal("server-everything streamableHttp did not start listening within 60 s")
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return "http://" + addr + "/mcp"
}

// inputTOML is the [[agents]] entry for server-everything over stdio, or
// over streamable HTTP when url is set; extra is appended to [agents.mcp].
func inputTOML(t *testing.T, url, extra string) func(d string) string {
	return func(d string) string {
		if url == "" {
			return e2e.EverythingTOML(t, "everything", d) + extra
		}
		return fmt.Sprintf("\n[[agents]]\njid = %q\n[agents.mcp]\nurl = %q\n%s", "everything@"+d, url, extra)
	}
}

// cancelLongRunning starts trigger-long-running-operation, waits for its
// first progress (the server is running it) and cancels it over XMPP.
func cancelLongRunning(t *testing.T, ctx context.Context, c *agentclient.Client, ep jid.JID) {
	t.Helper()
	acc, err := c.Invoke(ctx, ep, longRunning(t, ctx, c, ep, ""))
	if err != nil {
		t.Fatal(err)
	}
	events, stop := c.Subscribe(ep, acc.TaskID)
	defer stop()
	for progressed := false; !progressed; {
		select {
		case ev := <-events:
			if ev.Terminal() {
				t.Fatalf("long-running call settled before the cancel: %s %s", ev.Type, ev.Payload)
			}
			progressed = ev.Type == "progress"
		case <-time.After(60 * time.Second):
			t.Fatal("no progress from trigger-long-running-operation within 60 s")
		}
	}
	reason := "the caller changed its mind"
	for attempt := 0; ; attempt++ {
		st, err := c.State(ctx, ep, acc.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err = c.Cancel(ctx, ep, acc.TaskID, st.Revision, &reason); err == nil {
			break
		}
		if e2e.ErrCondition(err) != "conflict" || attempt == 10 {
			t.Fatalf("cancel: %v", err)
		}
	}
	for {
		select {
		case ev := <-events:
			if ev.Terminal() {
				if ev.Type != "cancelled" {
					t.Fatalf("long-running call ended %s %s, want cancelled", ev.Type, ev.Payload)
				}
				return
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the cancelled call did not settle within 60 s")
		}
	}
}

// longRunning is an invoke request of a 30 s, 30-step
// trigger-long-running-operation, with the deadline when set.
func longRunning(t *testing.T, ctx context.Context, c *agentclient.Client, ep jid.JID, deadline string) *agentclient.InvokeRequest {
	t.Helper()
	const tool = "trigger-long-running-operation"
	p, err := c.Pin(ctx, ep, tool)
	if err != nil {
		t.Fatal(err)
	}
	args, err := p.ValidateArguments(json.RawMessage(`{"duration":30,"steps":30}`))
	if err != nil {
		t.Fatal(err)
	}
	return &agentclient.InvokeRequest{Tool: tool, Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: args, Deadline: deadline}
}

// expireLongRunning runs trigger-long-running-operation with a deadline
// that passes while the server still runs it.
func expireLongRunning(t *testing.T, ctx context.Context, c *agentclient.Client, ep jid.JID) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Second).UTC().Format(time.RFC3339)
	acc, err := c.Invoke(ctx, ep, longRunning(t, ctx, c, ep, deadline))
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.Follow(ctx, ep, acc, agentclient.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o.State != "failed" || !strings.Contains(string(o.Payload), agentproto.CodeDeadlineExpired) {
		t.Fatalf("long-running call past its deadline ended %s %s, want failed %s", o.State, o.Payload, agentproto.CodeDeadlineExpired)
	}
}

// elicitCall is one trigger-elicitation-request call whose answer carries
// name. gate, when set, runs before the answer is given.
type elicitCall struct {
	name      string
	states    []string
	questions []string
	text      string
	err       error
}

func runElicit(ctx context.Context, t *testing.T, c *agentclient.Client, ep jid.JID, name string, gate func()) *elicitCall {
	ec := &elicitCall{name: name}
	var mu sync.Mutex
	o, err := c.Call(ctx, ep, "trigger-elicitation-request", json.RawMessage(`{}`), agentclient.CallOptions{
		OnStatus: func(s agentproto.State) { mu.Lock(); ec.states = append(ec.states, string(s)); mu.Unlock() },
		OnInput: func(_ context.Context, req agentclient.InputRequest) (json.RawMessage, error) {
			mu.Lock()
			ec.questions = append(ec.questions, req.Question)
			mu.Unlock()
			if gate != nil {
				gate()
			}
			return json.RawMessage(fmt.Sprintf(`{"name":%q,"check":true}`, name)), nil
		},
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		ec.err = err
		return ec
	}
	if o.State != "completed" {
		ec.err = fmt.Errorf("state %s, payload %s", o.State, o.Payload)
		return ec
	}
	var w struct {
		Result struct {
			Content []struct{ Type, Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(o.Payload, &w); err != nil {
		ec.err = err
		return ec
	}
	for _, it := range w.Result.Content {
		ec.text += it.Text + "\n"
	}
	return ec
}

// check reports whether the call reached input_required with the server's
// question and its own answer reached the server.
func (ec *elicitCall) check(t *testing.T) {
	t.Helper()
	switch {
	case ec.err != nil:
		t.Errorf("%s: %v", ec.name, ec.err)
	case !slices.Contains(ec.states, "input_required"):
		t.Errorf("%s: never reached input_required (states %v); result:\n%s", ec.name, ec.states, trimText(ec.text))
	case len(ec.questions) != 1 || ec.questions[0] != elicitQuestion:
		t.Errorf("%s: questions %q, want exactly the server's one", ec.name, ec.questions)
	case !strings.Contains(ec.text, "Name: "+ec.name+"\n") || !strings.Contains(ec.text, `"action": "accept"`):
		t.Errorf("%s: its answer did not reach its call; result:\n%s", ec.name, trimText(ec.text))
	}
}

func trimText(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

func testInputAfterAbandoned(t *testing.T, url string) {
	_, c, _, ep := e2e.AccStart(t, "everything", inputTOML(t, url, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for i := range 2 {
		cancelLongRunning(t, ctx, c, ep)
		ec := runElicit(ctx, t, c, ep, fmt.Sprintf("after-cancel-%d", i), nil)
		ec.check(t)
		t.Logf("after cancelled call %d: states %v", i+1, ec.states)
	}
	expireLongRunning(t, ctx, c, ep)
	ec := runElicit(ctx, t, c, ep, "after-expiry", nil)
	ec.check(t)
	t.Logf("after the expired call: states %v", ec.states)
}

// TestMCPInputAfterCancelStdio: two cancelled and one expired
// trigger-long-running-operation calls, each followed by a
// trigger-elicitation-request that must reach input_required.
func TestMCPInputAfterCancelStdio(t *testing.T) { testInputAfterAbandoned(t, "") }

// TestMCPInputAfterCancelHTTP: the same over streamable HTTP.
func TestMCPInputAfterCancelHTTP(t *testing.T) { testInputAfterAbandoned(t, everythingHTTP(t)) }

// testInputConcurrent runs n trigger-elicitation-request calls at once.
// Each answer waits until `together` questions are pending at the same
// time, so the calls are truly in flight together; each answer names its
// caller, and the server's result must carry that caller's name.
func testInputConcurrent(t *testing.T, e *e2e.Env, c *agentclient.Client, ep jid.JID, n, together int) {
	defer func() {
		if t.Failed() {
			t.Logf("gateway log tail:\n%s", e2e.Tail(e.Log.String(), 6000))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var (
		mu      sync.Mutex
		asked   int
		enough  = make(chan struct{})
		results = make([]*elicitCall, n)
		wg      sync.WaitGroup
	)
	gate := func() {
		mu.Lock()
		asked++
		if asked == together {
			close(enough)
		}
		mu.Unlock()
		select {
		case <-enough:
		case <-time.After(90 * time.Second):
		}
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runElicit(ctx, t, c, ep, fmt.Sprintf("caller-%d-of-%d", i+1, n), gate)
		}()
	}
	wg.Wait()
	select {
	case <-enough:
	default:
		t.Errorf("only %d of %d calls had a question pending at the same time", asked, together)
	}
	for _, ec := range results {
		ec.check(t)
	}
	if !t.Failed() {
		t.Logf("%d concurrent calls (%d asking at once): each reached input_required with one question, and each result names its own caller", n, together)
	}
}

// TestMCPInputConcurrentStdio: 2, then 8 concurrent elicitation calls to
// one stdio agent (max_sessions default 4: the first 4 ask together, the
// others wait for a session and then ask).
func TestMCPInputConcurrentStdio(t *testing.T) {
	t.Parallel()
	e, c, _, ep := e2e.AccStart(t, "everything", inputTOML(t, "", ""))
	testInputConcurrent(t, e, c, ep, 2, 2)
	testInputConcurrent(t, e, c, ep, 8, 4)
}

// TestMCPInputConcurrentHTTP: the same over streamable HTTP.
func TestMCPInputConcurrentHTTP(t *testing.T) {
	t.Parallel()
	e, c, _, ep := e2e.AccStart(t, "everything", inputTOML(t, everythingHTTP(t), ""))
	testInputConcurrent(t, e, c, ep, 2, 2)
	testInputConcurrent(t, e, c, ep, 8, 4)
}
