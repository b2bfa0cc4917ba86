package a2afront_test

// End-to-end proof of `agentgw a2a` with real parts only: the official A2A
// JS SDK (@a2a-js/sdk, its v0.3 JSON-RPC transport, testdata/a2a/client.mjs)
// talks to a built `agentgw a2a`, which logs into a private Prosody and
// calls a running agentgw gateway whose agents are scripted
// (testkit/e2e) or backed by server-everything over MCP.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	gatewaytest "github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

const (
	pwEnv     = "A2AFRONT_TEST_PASSWORD"
	bearerEnv = "A2AFRONT_TEST_BEARER"
	bearer    = "a2a-test-bearer-7f3c9e"
)

type e2e struct {
	env        *gatewaytest.Env
	bin        string
	node, root string
	base       string
	weather    *taskstest.Executor
	// a2aArgs are extra flags of agentgw a2a.
	a2aArgs []string
	// secrets are values (beside the bearer) that agentgw a2a must never
	// print: push config tokens, for example.
	secrets []string
}

func nodeTools(tb testing.TB) (node, root string) {
	tb.Helper()
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	node, err = exec.LookPath("node")
	var missing []string
	if err != nil {
		missing = append(missing, "node")
	}
	for _, p := range []string{"@a2a-js/sdk", "@modelcontextprotocol/server-everything"} {
		if _, err := os.Stat(filepath.Join(root, "node_modules", p, "package.json")); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		testkit.Unavailable(tb, "missing %v (npm ci at the module root)", missing)
	}
	return node, root
}

// start runs a gateway with the scripted "weather" agent and, with
// everything, server-everything as "everything"; then `agentgw a2a` as
// alice.
func start(tb testing.TB, everything bool) *e2e {
	return startWith(tb, everything, nil)
}

func startWith(tb testing.TB, everything bool, mutate func(*config.Config)) *e2e {
	tb.Helper()
	node, root := nodeTools(tb)
	weather := gatewaytest.DefaultExecutor()
	opts := gatewaytest.Options{Agents: []gatewaytest.Agent{{Localpart: "weather", Executor: weather}}, Users: []string{"alice"}, Mutate: mutate}
	if everything {
		srv := xmppharness.StartProsody(tb, xmppharness.ProsodyOptions{})
		opts.Server = srv
		entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
		opts.TOML = fmt.Sprintf("[[agents]]\njid = %q\n[agents.mcp]\ncommand = [%q, %q, \"stdio\"]\n", "everything@"+srv.ComponentDomain, node, entry)
	}
	x := &e2e{env: gatewaytest.Start(tb, opts), bin: gatewaytest.Binary(tb), node: node, root: root, weather: weather}
	x.base = x.startA2A(tb)
	return x
}

func (x *e2e) startA2A(tb testing.TB) string {
	tb.Helper()
	s := x.env.Server
	cmd := exec.Command(x.bin, "a2a", "--jid", x.env.JID("alice"), "--password-env", pwEnv, "--server", s.C2SAddr, "--ca-file", s.CAFile,
		"--gateway", x.env.Domain, "--http", "127.0.0.1:0", "--bearer-env", bearerEnv, "--refresh", "1s", "--cancel-wait", "5s")
	cmd.Args = append(cmd.Args, x.a2aArgs...)
	cmd.Env = append(os.Environ(), pwEnv+"="+gatewaytest.Password+"alice", bearerEnv+"="+bearer)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	testkit.StopOnCleanup(tb, cmd, "agentgw a2a")
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, bearer) {
				tb.Errorf("agentgw a2a printed the bearer token: %q", line)
			}
			for i, sec := range x.secrets {
				if strings.Contains(line, sec) {
					tb.Errorf("agentgw a2a printed secret %d", i)
				}
			}
			tb.Log("agentgw a2a: " + line)
			if i := strings.Index(line, "serving A2A on "); i >= 0 {
				u := strings.TrimSuffix(strings.Fields(line[i+len("serving A2A on "):])[0], "/agents")
				select {
				case urls <- u:
				default:
				}
			}
		}
	}()
	select {
	case u := <-urls:
		return u
	case <-time.After(60 * time.Second):
		tb.Fatal("agentgw a2a did not start")
	}
	return ""
}

type part struct {
	Kind     string         `json:"kind"`
	Value    any            `json:"value"`
	Metadata map[string]any `json:"metadata"`
}

type task struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	State     string `json:"state"`
	Message   []part `json:"message"`
	Artifacts []struct {
		ID    string `json:"id"`
		Parts []part `json:"parts"`
	} `json:"artifacts"`
	Metadata map[string]any `json:"metadata"`
}

type event struct {
	// A task event (the stream's first) carries the artifacts of a task
	// that settled before the stream began.
	Artifacts []struct {
		ID    string `json:"id"`
		Parts []part `json:"parts"`
	} `json:"artifacts"`
	Kind    string  `json:"kind"`
	ID      string  `json:"id"`
	TaskID  string  `json:"taskId"`
	State   string  `json:"state"`
	Message []part  `json:"message"`
	Parts   []part  `json:"parts"`
	AtMs    float64 `json:"atMs"`
}

type step struct {
	Op     string          `json:"op"`
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
	Task   *task           `json:"task"`
	Events []event         `json:"events"`
	TaskID string          `json:"taskId"`
	Error  *struct {
		Message string `json:"message"`
		Code    any    `json:"code"`
	} `json:"error"`
	Push *struct {
		ID  string `json:"id"`
		URL string `json:"url"`
		N   int    `json:"n"`
	} `json:"push"`
	Verified   *bool  `json:"verified"`
	Reason     string `json:"reason"`
	Signatures int    `json:"signatures"`
	List       *struct {
		Tasks         []task `json:"tasks"`
		NextPageToken string `json:"nextPageToken"`
		PageSize      int    `json:"pageSize"`
		TotalSize     int    `json:"totalSize"`
	} `json:"list"`
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

func (x *e2e) run(tb testing.TB, steps ...map[string]any) []step {
	tb.Helper()
	return x.runSignalling(tb, nil, steps...)
}

// signalWriter keeps the client's stderr and closes signalled when a
// line equal to line has been written (a step's "signal": the client has
// read the first event of its stream).
type signalWriter struct {
	mu        sync.Mutex
	b         strings.Builder
	line      string
	signalled chan struct{}
	once      sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if w.signalled != nil && strings.Contains(w.b.String(), w.line+"\n") {
		w.once.Do(func() { close(w.signalled) })
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// runSignalling is run; a step with "signal": "first-event" closes
// signalled once the client has read that stream's first event.
func (x *e2e) runSignalling(tb testing.TB, signalled chan struct{}, steps ...map[string]any) []step {
	tb.Helper()
	return x.runProto(tb, "0.3", signalled, steps...)
}

// runProto is runSignalling with the client speaking proto ("0.3",
// "0.3-rest", "1.0-jsonrpc" or "1.0-rest"; testdata/a2a/client.mjs).
func (x *e2e) runProto(tb testing.TB, proto string, signalled chan struct{}, steps ...map[string]any) []step {
	tb.Helper()
	plan, _ := json.Marshal(map[string]any{"base": x.base, "bearer": bearer, "proto": proto, "steps": steps})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, x.node, filepath.Join(x.root, "testdata", "a2a", "client.mjs"), string(plan))
	cmd.Dir = x.root
	stderr := &signalWriter{line: "first-event", signalled: signalled}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	var res struct {
		Steps []step `json:"steps"`
		Fatal *struct {
			Message string `json:"message"`
		} `json:"fatal"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		tb.Fatalf("client.mjs: %v; output %q\nstderr:\n%s", err, out, stderr.String())
	}
	if res.Fatal != nil {
		tb.Fatalf("client.mjs failed: %s\nstderr:\n%s", res.Fatal.Message, stderr.String())
	}
	return res.Steps
}

func text(ps []part) string {
	var b []string
	for _, p := range ps {
		if p.Kind == "text" {
			s, _ := p.Value.(string)
			b = append(b, s)
		}
	}
	return strings.Join(b, "\n")
}

func states(evs []event) []string {
	var out []string
	for _, e := range evs {
		switch e.Kind {
		case "task", "status":
			out = append(out, e.State)
		case "artifact":
			out = append(out, "artifact")
		}
	}
	return out
}

func noError(tb testing.TB, s step) {
	tb.Helper()
	if s.Error != nil {
		tb.Fatalf("%s: %s (code %v)", s.Op, s.Error.Message, s.Error.Code)
	}
}

func TestA2AFrontScripted(t *testing.T) {
	t.Parallel()
	x := start(t, false)
	weather := "weather@" + x.env.Domain
	steps := x.run(t,
		map[string]any{"op": "agents"},
		map[string]any{"op": "card", "jid": weather},
		map[string]any{"op": "send", "jid": weather, "skill": "echo", "data": map[string]any{"message": "hi from A2A"}, "messageId": "m-echo-1"},
		map[string]any{"op": "send", "jid": weather, "skill": "echo", "data": map[string]any{"message": "hi from A2A"}, "messageId": "m-echo-1"},
		map[string]any{"op": "stream", "jid": weather, "skill": "slow", "data": map[string]any{}},
		map[string]any{"op": "stream", "jid": weather, "skill": "ask", "data": map[string]any{}},
		map[string]any{"op": "stream", "jid": weather, "taskOf": 5, "data": map[string]any{"unit": "F"}},
		map[string]any{"op": "get", "jid": weather, "taskOf": 5},
		map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false},
		map[string]any{"op": "cancel", "jid": weather, "taskOf": 8},
		map[string]any{"op": "send", "jid": weather, "skill": "fail", "data": map[string]any{}},
		map[string]any{"op": "card", "jid": "nobody@" + x.env.Domain},
	)
	for _, s := range steps[:11] {
		noError(t, s)
	}

	// The card list and one card: skills from tools, schemas and the pin in
	// the extension.
	var list struct {
		Agents []struct {
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(steps[0].Body, &list); err != nil || len(list.Agents) == 0 {
		t.Fatalf("agents: %s", steps[0].Body)
	}
	var card struct {
		URL             string `json:"url"`
		ProtocolVersion string `json:"protocolVersion"`
		Skills          []struct {
			ID string `json:"id"`
		} `json:"skills"`
		Capabilities struct {
			Streaming  bool `json:"streaming"`
			Extensions []struct {
				URI    string         `json:"uri"`
				Params map[string]any `json:"params"`
			} `json:"extensions"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(steps[1].Body, &card); err != nil {
		t.Fatalf("card: %v %s", err, steps[1].Body)
	}
	skills := map[string]bool{}
	for _, s := range card.Skills {
		skills[s.ID] = true
	}
	if card.ProtocolVersion != "0.3.0" || !card.Capabilities.Streaming || !skills["echo"] || !skills["ask"] || !strings.HasSuffix(card.URL, "/agents/"+weather) {
		t.Errorf("card: %s", steps[1].Body)
	}
	if len(card.Capabilities.Extensions) != 1 || card.Capabilities.Extensions[0].Params["jid"] != weather || card.Capabilities.Extensions[0].Params["manifestHash"] == "" {
		t.Errorf("card extension: %+v", card.Capabilities.Extensions)
	}
	if sk, _ := card.Capabilities.Extensions[0].Params["skills"].(map[string]any); sk["echo"] == nil {
		t.Errorf("no echo schema in the extension: %v", card.Capabilities.Extensions[0].Params)
	}

	// message/send blocks to completion; the same messageId is the same task.
	e1, e2 := steps[2].Task, steps[3].Task
	if e1 == nil || e1.State != "TASK_STATE_COMPLETED" || len(e1.Artifacts) != 1 || !strings.Contains(fmt.Sprint(e1.Artifacts[0].Parts), "hi from A2A") {
		t.Errorf("echo: %+v", e1)
	}
	if e2 == nil || e2.ID != e1.ID {
		t.Errorf("retried messageId made another task: %v vs %v", e1.ID, e2)
	}
	countEcho := 0
	for _, ex := range x.weather.Calls() {
		if ex.Tool == "echo" {
			countEcho++
		}
	}
	if countEcho != 1 {
		t.Errorf("echo executed %d times, want 1", countEcho)
	}

	// message/stream: submitted/working, progress, the artifact, completed.
	slow := steps[4].Events
	st := states(slow)
	if len(st) < 5 || st[len(st)-1] != "TASK_STATE_COMPLETED" || st[len(st)-2] != "artifact" {
		t.Errorf("slow stream states %v", st)
	}
	progress := 0
	for _, e := range slow {
		if e.Kind == "status" && e.State == "TASK_STATE_WORKING" && strings.Contains(text(e.Message), "%") {
			progress++
		}
	}
	if progress != 3 {
		t.Errorf("slow stream had %d progress updates, want 3: %+v", progress, slow)
	}

	// input-required carries the question; the follow-up message answers it.
	ask := steps[5].Events
	if last := ask[len(ask)-1]; last.State != "TASK_STATE_INPUT_REQUIRED" || !strings.Contains(text(last.Message), "Which unit?") {
		t.Errorf("ask stream ended %+v", last)
	}
	ans := states(steps[6].Events)
	if len(ans) == 0 || ans[len(ans)-1] != "TASK_STATE_COMPLETED" {
		t.Errorf("answer stream %v", ans)
	}
	if g := steps[7].Task; g == nil || g.State != "TASK_STATE_COMPLETED" || len(g.Artifacts) != 1 {
		t.Errorf("get after answer: %+v", steps[7].Task)
	}

	// Non-blocking send returns at once; cancel settles it.
	if w := steps[8].Task; w == nil || (w.State != "TASK_STATE_SUBMITTED" && w.State != "TASK_STATE_WORKING") {
		t.Errorf("non-blocking send: %+v", steps[8].Task)
	}
	if c := steps[9].Task; c == nil || c.State != "TASK_STATE_CANCELED" {
		t.Errorf("cancel: %+v", steps[9].Task)
	}
	// A failure keeps its code in the status message.
	if f := steps[10].Task; f == nil || f.State != "TASK_STATE_FAILED" || !strings.Contains(text(f.Message), "com.example:broken") {
		t.Errorf("fail: %+v", steps[10].Task)
	}
	if steps[11].Status != 404 {
		t.Errorf("unknown agent's card: %d", steps[11].Status)
	}

	// From a new client process (a reconnect): tasks/get reads XMPP
	// state, and resubscribe to a running task streams it from its
	// current state until it settles.
	again := x.run(t,
		map[string]any{"op": "get", "jid": weather, "taskId": e1.ID},
		map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false},
	)
	if g := again[0].Task; g == nil || g.State != "TASK_STATE_COMPLETED" {
		t.Errorf("get after reconnect: %+v", again[0])
	}
	waitID := again[1].Task.ID
	resub := make(chan []step, 1)
	streaming := make(chan struct{})
	go func() {
		resub <- x.runSignalling(t, streaming, map[string]any{"op": "resubscribe", "jid": weather, "taskId": waitID, "signal": "first-event"})
	}()
	// Cancel only once the resubscription streams: a fixed one-second
	// sleep lost to a slow node start on a loaded machine.
	select {
	case <-streaming:
	case rs := <-resub:
		resub <- rs // ended before its first event; the checks below say how
	case <-time.After(2 * time.Minute):
		t.Fatal("the resubscription never streamed")
	}
	x.run(t, map[string]any{"op": "cancel", "jid": weather, "taskId": waitID})
	rs := <-resub
	noError(t, rs[0])
	if st := states(rs[0].Events); len(st) < 2 || st[0] != "TASK_STATE_WORKING" || st[len(st)-1] != "TASK_STATE_CANCELED" {
		t.Errorf("resubscribe to a running task: %v", st)
	}
	ep := jid.MustParse(weather)
	if st, err := x.env.Dial("alice").State(context.Background(), ep, e1.ID); err != nil || st.State != "completed" {
		t.Errorf("the A2A task is not the XMPP task: %v %v", st, err)
	}
}

// The chain JS A2A client → agentgw a2a → Prosody → gateway →
// server-everything: echo, a long-running tool's progress as status
// updates, an elicitation answered through input-required, and cancel of a
// running stream's task.
func TestA2AFrontServerEverything(t *testing.T) {
	t.Parallel()
	x := start(t, true)
	ev := "everything@" + x.env.Domain
	content := map[string]any{
		"name": "Ada Lovelace", "check": true, "email": "ada@example.test", "integer": 7,
		"untitledSingleSelectEnum": "Rachel", "untitledMultipleSelectEnum": []any{"Piano"},
		"titledSingleSelectEnum": "hero-2", "titledMultipleSelectEnum": []any{"fish-3"}, "legacyTitledEnum": "pet-2",
	}
	steps := x.run(t,
		map[string]any{"op": "send", "jid": ev, "skill": "echo", "text": "through the A2A chain"},
		map[string]any{"op": "stream", "jid": ev, "skill": "trigger-long-running-operation", "data": map[string]any{"duration": 2, "steps": 4}},
		map[string]any{"op": "stream", "jid": ev, "skill": "trigger-elicitation-request", "data": map[string]any{}},
		map[string]any{"op": "stream", "jid": ev, "taskOf": 2, "data": content},
		map[string]any{"op": "stream", "jid": ev, "skill": "trigger-long-running-operation", "data": map[string]any{"duration": 60, "steps": 60}, "stopAfter": 4},
		map[string]any{"op": "cancel", "jid": ev, "taskOf": 4},
	)
	for _, s := range steps {
		noError(t, s)
	}
	if e := steps[0].Task; e == nil || e.State != "TASK_STATE_COMPLETED" || !strings.Contains(fmt.Sprint(e.Artifacts), "Echo: through the A2A chain") {
		t.Errorf("echo (text part to the tool's one string argument): %+v", steps[0].Task)
	}
	long := steps[1].Events
	working := 0
	for _, e := range long {
		if e.Kind == "status" && e.State == "TASK_STATE_WORKING" && strings.Contains(text(e.Message), "%") {
			working++
		}
	}
	if st := states(long); working < 3 || st[len(st)-1] != "TASK_STATE_COMPLETED" {
		t.Errorf("long-running: %d progress updates, states %v", working, st)
	}
	el := steps[2].Events
	last := el[len(el)-1]
	if last.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("elicitation stream ended %+v", last)
	}
	var schemaSeen bool
	for _, p := range last.Message {
		if p.Kind == "data" {
			d, _ := p.Value.(map[string]any)
			_, schemaSeen = d["inputSchema"].(map[string]any)
		}
	}
	if !schemaSeen {
		t.Errorf("input-required carries no inputSchema: %+v", last.Message)
	}
	ans := steps[3].Events
	if st := states(ans); st[len(st)-1] != "TASK_STATE_COMPLETED" || !strings.Contains(fmt.Sprint(ans), "Ada Lovelace") {
		t.Errorf("elicitation answered: %v %+v", st, ans)
	}
	if c := steps[5].Task; c == nil || c.State != "TASK_STATE_CANCELED" {
		t.Errorf("cancel of a running long operation: %+v", steps[5].Task)
	}
}

// Hostile and malformed requests get clear errors, and none reflects its
// payload.
func TestA2AFrontHostileInput(t *testing.T) {
	t.Parallel()
	x := start(t, false)
	weather := "weather@" + x.env.Domain
	post := func(token, body string) (int, string) {
		req, _ := http.NewRequest("POST", x.base+"/agents/"+weather, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	send := func(msg string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":` + msg + `}}`
	}
	const marker = "<script>EVIL-MARKER</script>"
	for name, c := range map[string]struct {
		token, body string
		status      int
		want        string
	}{
		"no bearer":      {"", send(`{}`), 401, "unauthorized"},
		"wrong bearer":   {"nope", send(`{}`), 401, "unauthorized"},
		"not JSON":       {bearer, `{"jsonrpc":` + marker, 200, `"code":-32700`},
		"not JSON-RPC":   {bearer, `{"jsonrpc":"1.0","id":1,"method":"message/send"}`, 200, `"code":-32600`},
		"unknown method": {bearer, `{"jsonrpc":"2.0","id":1,"method":"` + marker + `"}`, 200, `"code":-32601`},
		"unknown part kind": {bearer, send(`{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"` + marker + `","x":1}]}`),
			200, `"code":-32`},
		"agent role": {bearer, send(`{"kind":"message","messageId":"m2","role":"agent","parts":[{"kind":"text","text":"hi"}]}`), 200, `"code":-32602`},
		"no parts":   {bearer, send(`{"kind":"message","messageId":"m3","role":"user","parts":[]}`), 200, `"code":-32602`},
		"unknown skill": {bearer, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m4","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"agentgw/skill":"` + marker + `"}}}}`,
			200, `"code":-32602`},
		"oversized": {bearer, send(`{"kind":"message","messageId":"m5","role":"user","parts":[{"kind":"text","text":"` + strings.Repeat("A", 2<<20) + `"}]}`), 200, `larger than 1048576 bytes`},
		"bad args": {bearer, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m6","role":"user","parts":[{"kind":"data","data":{"message":42}}],"metadata":{"agentgw/skill":"echo"}}}}`,
			200, `"code":-32602`},
		"unknown task": {bearer, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"task-18ed492c73f0d1a5LOr5nErftYIZE4vTPGJf2x"}}`, 200, `"code":-32001`},
		// An id that is not a task-id names no task: TaskNotFound, like a
		// well-formed unknown one (issue 27; TestA2AFrontUnknownTaskIDs).
		"invalid task id": {bearer, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"task-` + marker + `"}}`, 200, `"code":-32001`},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := post(c.token, c.body)
			if status != c.status || !strings.Contains(body, c.want) {
				t.Errorf("%d %s, want %d containing %s", status, a2amapBound(body), c.status, c.want)
			}
			if strings.Contains(body, "EVIL-MARKER") {
				t.Errorf("payload reflected: %s", a2amapBound(body))
			}
		})
	}
	// The card endpoints need the token too.
	resp, err := http.Get(x.base + "/agents/" + weather + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("card without token: %d", resp.StatusCode)
	}
}

func a2amapBound(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// BenchmarkA2AEchoVsMCP measures server-everything's echo through the whole
// chain from the two official JS SDKs, in the same run: A2A client →
// agentgw a2a → Prosody → gateway → server-everything, beside MCP client →
// agentgw mcp → the same. Run with -benchtime=1x; each path makes n calls
// inside node and reports percentiles in milliseconds.
func BenchmarkA2AEchoVsMCP(b *testing.B) {
	x := startWith(b, true, func(c *config.Config) {
		c.Federation.InvokePerSecond, c.Federation.InvokeBurst = 1e6, 1e6
	})
	ev := "everything@" + x.env.Domain
	n := 300
	if b.N > n {
		n = b.N
	}
	b.ResetTimer()
	a2a := x.run(b, map[string]any{"op": "bench", "jid": ev, "skill": "echo", "text": "hello", "n": n, "warmup": 30})[0]
	// The MCP front's client (testdata/mcpfront/client.mjs) on the same gateway.
	s := x.env.Server
	plan, _ := json.Marshal(map[string]any{
		"transport": "stdio", "command": x.bin,
		"args":  []string{"mcp", "--jid", x.env.JID("alice"), "--password-env", pwEnv, "--server", s.C2SAddr, "--ca-file", s.CAFile, "--gateway", x.env.Domain},
		"env":   map[string]string{pwEnv: gatewaytest.Password + "alice"},
		"steps": []any{map[string]any{"op": "bench", "tool": "everything.echo", "args": map[string]any{"message": "hello"}, "n": n, "warmup": 30}},
	})
	cmd := exec.Command(x.node, filepath.Join(x.root, "testdata", "mcpfront", "client.mjs"), string(plan))
	cmd.Dir = x.root
	out, err := cmd.Output()
	var mcp struct {
		Steps []struct {
			N        int
			P50, P99 float64
		} `json:"steps"`
	}
	if jerr := json.Unmarshal(out, &mcp); err != nil || jerr != nil || len(mcp.Steps) != 1 || mcp.Steps[0].N == 0 {
		b.Fatalf("mcp client: %v %v %s", err, jerr, out)
	}
	b.StopTimer()
	if a2a.Error != nil || a2a.N == 0 {
		b.Fatalf("a2a bench: %+v", a2a)
	}
	m := mcp.Steps[0]
	b.ReportMetric(a2a.P50, "a2a-p50-ms")
	b.ReportMetric(a2a.P99, "a2a-p99-ms")
	b.ReportMetric(m.P50, "mcp-p50-ms")
	b.ReportMetric(m.P99, "mcp-p99-ms")
	b.ReportMetric(a2a.P50/m.P50, "p50-ratio")
	b.ReportMetric(a2a.P99/m.P99, "p99-ratio")
	b.Logf("n=%d a2a p50 %.2f ms p99 %.2f ms; mcp p50 %.2f ms p99 %.2f ms", a2a.N, a2a.P50, a2a.P99, m.P50, m.P99)
}

// rpcPost posts one JSON-RPC body with the bearer and returns the status,
// the Content-Type and the body.
func (x *e2e) rpcPost(t *testing.T, agent, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", x.base+"/agents/"+agent, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// rpcResponses are the JSON-RPC responses of a body: the body itself for
// application/json, every SSE event's data for text/event-stream.
func rpcResponses(t *testing.T, ctype, body string) []map[string]any {
	t.Helper()
	var raws []string
	switch {
	case ctype == "application/json":
		raws = []string{body}
	case ctype == "text/event-stream":
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				raws = append(raws, d)
			}
		}
	default:
		t.Errorf("Content-Type %q, want application/json (or text/event-stream for a stream): %s", ctype, a2amapBound(body))
		return nil
	}
	var out []map[string]any
	for _, r := range raws {
		var m map[string]any
		if err := json.Unmarshal([]byte(r), &m); err != nil || m["jsonrpc"] != "2.0" {
			t.Errorf("not a JSON-RPC response: %s", a2amapBound(r))
			continue
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		t.Errorf("no JSON-RPC response in %s", a2amapBound(body))
	}
	return out
}

func rpcCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// Every JSON-RPC response of the front is application/json (A2A 0.3
// §3.2.1, §7): results and errors, the SDK's and the front's own; a
// stream is text/event-stream whose every event is a JSON-RPC response,
// and a stream that fails before its first event is its error as
// application/json.
func TestA2AFrontJSONRPCContentType(t *testing.T) {
	t.Parallel()
	x := start(t, false)
	weather := "weather@" + x.env.Domain
	msg := func(method, id, skill string) string {
		return `{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `","params":{"message":{"kind":"message","messageId":"` + id + `","role":"user","parts":[{"kind":"data","data":{"message":"hi"}}],"metadata":{"agentgw/skill":"` + skill + `"}}}}`
	}
	unknown := "task-18ed492c73f0d1a5LOr5nErftYIZE4vTPGJf2x"
	for name, c := range map[string]struct {
		body   string
		stream bool
		code   float64 // 0: a result
	}{
		"send result":           {body: msg("message/send", "ct-1", "echo")},
		"send unknown skill":    {body: msg("message/send", "ct-2", "nope"), code: -32602},
		"get unknown task":      {body: `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"id":"` + unknown + `"}}`, code: -32001},
		"cancel unknown task":   {body: `{"jsonrpc":"2.0","id":4,"method":"tasks/cancel","params":{"id":"` + unknown + `"}}`, code: -32001},
		"unknown method":        {body: `{"jsonrpc":"2.0","id":5,"method":"tasks/nope"}`, code: -32601},
		"push config":           {body: `{"jsonrpc":"2.0","id":6,"method":"tasks/pushNotificationConfig/get","params":{"id":"` + unknown + `"}}`, code: -32003},
		"parse error":           {body: `{"jsonrpc":`, code: -32700},
		"wrong jsonrpc":         {body: `{"jsonrpc":"1.0","id":7,"method":"tasks/get"}`, code: -32600},
		"stream result":         {body: msg("message/stream", "ct-8", "echo"), stream: true},
		"stream unknown skill":  {body: msg("message/stream", "ct-9", "nope"), stream: true, code: -32602},
		"resubscribe unknown":   {body: `{"jsonrpc":"2.0","id":10,"method":"tasks/resubscribe","params":{"id":"` + unknown + `"}}`, stream: true, code: -32001},
		"stream bad params":     {body: `{"jsonrpc":"2.0","id":11,"method":"message/stream","params":{"message":42}}`, code: -32602},
		"extended card":         {body: `{"jsonrpc":"2.0","id":12,"method":"agent/getAuthenticatedExtendedCard"}`, code: -32007},
		"send to no such agent": {body: msg("message/send", "ct-13", "echo"), code: -32600},
	} {
		t.Run(name, func(t *testing.T) {
			agent := weather
			if name == "send to no such agent" {
				agent = "nobody@" + x.env.Domain
			}
			status, ctype, body := x.rpcPost(t, agent, c.body)
			if status != 200 {
				t.Fatalf("HTTP %d", status)
			}
			// A stream that fails before its first event is one JSON-RPC
			// error, application/json (as the JS SDK's server answers).
			want := "application/json"
			if c.stream && c.code == 0 {
				want = "text/event-stream"
			}
			if mt := strings.TrimSpace(strings.Split(ctype, ";")[0]); mt != want {
				t.Errorf("Content-Type %q, want %s", ctype, want)
			}
			rs := rpcResponses(t, strings.TrimSpace(strings.Split(ctype, ";")[0]), body)
			if len(rs) == 0 {
				return
			}
			last := rs[len(rs)-1]
			if got := rpcCode(last); got != c.code {
				t.Errorf("error code %v, want %v: %s", got, c.code, a2amapBound(body))
			}
		})
	}
}

// tasks/get, tasks/cancel, tasks/resubscribe and an answer (message/send
// with taskId) for an id that names no task answer -32001 TaskNotFound
// whatever its spelling — the same as a well-formed unknown id, never
// invalid params or an internal error, never echoing the id — through raw
// HTTP and through the official JS SDK client. A missing id is invalid
// params.
func TestA2AFrontUnknownTaskIDs(t *testing.T) {
	t.Parallel()
	x := start(t, false)
	weather := "weather@" + x.env.Domain
	steps := x.run(t, map[string]any{"op": "send", "jid": weather, "skill": "echo", "data": map[string]any{"message": "hi"}})
	noError(t, steps[0])
	real := steps[0].Task.ID
	ids := map[string]string{
		"well-formed":    "task-18ed492c73f0d1a5LOr5nErftYIZE4vTPGJf2x",
		"short":          "zz",
		"path":           "../x",
		"spaces":         "no such task",
		"marker":         "task-<script>EVIL-MARKER</script>",
		"upper-case":     strings.ToUpper(real),
		"suffixed":       real + "x",
		"too long":       "task-" + strings.Repeat("EVIL-MARKER", 40),
		"control":        "task-\u0001EVIL-MARKER",
		"nul":            "task-\u0000EVIL-MARKER",
		"line separator": "task-\u2028EVIL-MARKER",
		"non-ascii":      "tâsk-EVIL-MARKER-ünknown-0123456789",
		"query":          "task-x?EVIL-MARKER=1&a=b",
		"xml":            "task-]]>&lt;EVIL-MARKER'\"",
	}
	methods := map[string]func(id string) string{
		"tasks/get": func(id string) string {
			return `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":` + jsonString(id) + `}}`
		},
		"tasks/cancel": func(id string) string {
			return `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":` + jsonString(id) + `}}`
		},
		"tasks/resubscribe": func(id string) string {
			return `{"jsonrpc":"2.0","id":1,"method":"tasks/resubscribe","params":{"id":` + jsonString(id) + `}}`
		},
		"answer": func(id string) string {
			return `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"ans-` + fmt.Sprint(len(id)) + `","taskId":` + jsonString(id) + `,"role":"user","parts":[{"kind":"text","text":"F"}]}}}`
		},
	}
	for method, body := range methods {
		for name, id := range ids {
			t.Run(method+"/"+name, func(t *testing.T) {
				_, ctype, resp := x.rpcPost(t, weather, body(id))
				if strings.Contains(resp, "EVIL-MARKER") {
					t.Errorf("the id was reflected: %s", a2amapBound(resp))
				}
				rs := rpcResponses(t, strings.TrimSpace(strings.Split(ctype, ";")[0]), resp)
				if len(rs) == 0 {
					return
				}
				if got := rpcCode(rs[len(rs)-1]); got != -32001 {
					t.Errorf("error code %v, want -32001 TaskNotFound: %s", got, a2amapBound(resp))
				}
			})
		}
	}
	// A missing id is invalid params, not an unknown task.
	for _, m := range []string{"tasks/get", "tasks/cancel"} {
		_, ctype, resp := x.rpcPost(t, weather, `{"jsonrpc":"2.0","id":1,"method":"`+m+`","params":{"id":""}}`)
		if rs := rpcResponses(t, strings.TrimSpace(strings.Split(ctype, ";")[0]), resp); len(rs) > 0 && rpcCode(rs[0]) != -32602 {
			t.Errorf("%s without an id: %s", m, a2amapBound(resp))
		}
	}
	// The official JS SDK client sees TaskNotFound too.
	js := x.run(t,
		map[string]any{"op": "get", "jid": weather, "taskId": "zz"},
		map[string]any{"op": "cancel", "jid": weather, "taskId": "../x"},
		map[string]any{"op": "get", "jid": weather, "taskId": "no such task"},
		map[string]any{"op": "resubscribe", "jid": weather, "taskId": "no such task"},
	)
	for i, s := range js {
		if s.Error == nil || fmt.Sprint(s.Error.Code) != "-32001" {
			t.Errorf("JS client step %d (%s): %+v, want error -32001", i, s.Op, s.Error)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
