package mcpfront_test

// MCP Tasks through `agentgw mcp` with real parts only (issue 30 §1): the
// TypeScript SDK's experimental tasks client (2025-11-25,
// testdata/mcpfront/tasks.mjs) and a small 2026-07-28 client written from
// SEP-2663 below drive a built `agentgw mcp` over stdio and streamable
// HTTP, against a gateway on a private Prosody. A task outlives its host
// (a new client process fetches it) and the front (kill -9, restart).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	gatewaytest "github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

var b64url = base64.RawURLEncoding

// taskEnv is an e2e environment whose weather agent has a "slow" tool held
// by a gate the test opens, and a second agent "plain" whose echo forbids
// task execution.
type taskEnv struct {
	*e2e
	gate     chan struct{}
	gateOnce sync.Once
}

func (x *taskEnv) open() { x.gateOnce.Do(func() { close(x.gate) }) }

func startTaskEnv(tb testing.TB) *taskEnv { return startTaskEnvWith(tb, nil, false) }

// startTaskEnvWith can turn Nagle's algorithm off in Prosody, as the
// front's other benchmark does (about 40 ms per round trip otherwise).
func startTaskEnvWith(tb testing.TB, mutate func(*config.Config), noNagle bool) *taskEnv {
	tb.Helper()
	node, root := nodeTools(tb)
	gate := make(chan struct{})
	x0 := gatewaytest.DefaultExecutor()
	x0.Script("slow",
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(10), Stage: "held", Message: "waiting for the gate"}},
		taskstest.Step{Do: func(ctx context.Context, _ tasks.Call, _ tasks.Run) error {
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return nil
		}},
		taskstest.Step{Complete: taskstest.Text("slow done")},
	)
	x0.Script("ask", taskstest.Step{Do: func(ctx context.Context, _ tasks.Call, run tasks.Run) error {
		ans, err := run.RequestInput(ctx, tasks.InputRequest{Question: "Which unit?",
			Schema: json.RawMessage(`{"type":"object","properties":{"unit":{"enum":["C","F"]}},"required":["unit"]}`)})
		if err != nil {
			return run.Cancelled("no input")
		}
		b, _ := json.Marshal("unit " + string(ans))
		return run.Complete(tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":` + string(b) + `}]`)})
	}})
	// In this env "fail" is an agent that ignores cancellation: it
	// completes after the cancellation was accepted (tasks_list_e2e_test.go).
	x0.Script("fail", taskstest.Step{AwaitCancel: true}, taskstest.Step{Complete: taskstest.Text("finished anyway")})
	srv := xmppharness.StartProsody(tb, xmppharness.ProsodyOptions{})
	if noNagle {
		cfg, err := os.ReadFile(srv.ConfigPath)
		if err != nil {
			tb.Fatal(err)
		}
		cfg = append([]byte("network_settings = { nagle = false }\n"), cfg...)
		if err := os.WriteFile(srv.ConfigPath, cfg, 0o600); err != nil {
			tb.Fatal(err)
		}
		if err := srv.Restart(context.Background()); err != nil {
			tb.Fatal(err)
		}
	}
	echo := gatewaytest.Tool("echo", "Echo", "Returns its arguments.", `{"type":"object","properties":{"message":{"type":"string"}}}`, false)
	echo["execution"] = map[string]any{"taskSupport": "forbidden"}
	plain, _ := json.Marshal(map[string]any{
		"manifestSpecVersion": "0",
		"agent": map[string]any{"jid": "plain@" + srv.ComponentDomain, "name": "plain", "title": "Plain",
			"description": "Synchronous calls only.", "version": "1.0.0"},
		"tools": []any{echo},
	})
	x := &taskEnv{gate: gate, e2e: &e2e{node: node, root: root, script: filepath.Join(root, "testdata", "mcpfront", "tasks.mjs")}}
	tb.Cleanup(x.open)
	x.env = gatewaytest.Start(tb, gatewaytest.Options{
		Server: srv,
		Agents: []gatewaytest.Agent{{Localpart: "weather", Executor: x0}, {Localpart: "plain", Manifest: string(plain)}},
		Users:  []string{"alice", "bob"},
		Mutate: mutate,
	})
	x.bin = gatewaytest.Binary(tb)
	return x
}

// tsOut is what tasks.mjs prints.
type tsOut struct {
	Steps []struct {
		Op           string           `json:"op"`
		TaskID       string           `json:"taskId"`
		Task         map[string]any   `json:"task"`
		Tools        []map[string]any `json:"tools"`
		Capabilities map[string]any   `json:"capabilities"`
		Result       map[string]any   `json:"result"`
		List         map[string]any   `json:"list"`
		Messages     []map[string]any `json:"messages"`
		Seen         []string         `json:"seen"`
		Error        *struct {
			Message string         `json:"message"`
			Code    int64          `json:"code"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
		Ms float64 `json:"ms"`
	} `json:"steps"`
	Elicitations []struct {
		Message string         `json:"message"`
		Meta    map[string]any `json:"meta"`
	} `json:"elicitations"`
	Fatal *struct {
		Message string `json:"message"`
	} `json:"fatal"`
}

func (x *taskEnv) runTS(tb testing.TB, plan map[string]any) *tsOut {
	tb.Helper()
	p, _ := json.Marshal(plan)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, x.node, x.script, string(p))
	cmd.Dir = x.root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	var out tsOut
	if jerr := json.Unmarshal(stdout, &out); jerr != nil {
		tb.Fatalf("tasks.mjs: %v; output %q\nstderr:\n%s", err, stdout, tail(stderr.String()))
	}
	if out.Fatal != nil {
		tb.Fatalf("tasks.mjs failed: %s\nstderr:\n%s", out.Fatal.Message, tail(stderr.String()))
	}
	return &out
}

// stdioPlan and httpPlan are the transport parts of a plan.
func (x *taskEnv) stdioPlan(steps ...any) map[string]any {
	return map[string]any{"transport": "stdio", "command": x.bin, "args": x.mcpArgs(), "env": x.mcpEnv(), "steps": steps}
}

func httpPlan(url, bearer string, steps ...any) map[string]any {
	return map[string]any{"transport": "http", "url": url, "bearer": bearer, "steps": steps}
}

// httpFront runs `agentgw mcp --http` as a process the test can kill.
func (x *taskEnv) httpFront(tb testing.TB, bearer string) (string, *exec.Cmd) {
	tb.Helper()
	cmd := exec.Command(x.bin, x.mcpArgs("--http", "127.0.0.1:0", "--bearer-env", "MCPFRONT_TEST_BEARER")...)
	cmd.Env = append(os.Environ(), pwEnv+"="+gatewaytest.Password+"alice", "MCPFRONT_TEST_BEARER="+bearer)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	testkit.StopOnCleanup(tb, cmd, "agentgw mcp --http")
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "on http://"); i >= 0 {
				u := line[i+3:]
				if j := strings.IndexByte(u, ' '); j >= 0 {
					u = u[:j]
				}
				select {
				case urls <- u:
				default:
				}
			}
		}
	}()
	select {
	case u := <-urls:
		return u, cmd
	case <-time.After(60 * time.Second):
		tb.Fatal("agentgw mcp --http printed no address")
		return "", nil
	}
}

func step(op string, kv ...any) map[string]any {
	m := map[string]any{"op": op}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func textOf(tb testing.TB, res map[string]any) string {
	tb.Helper()
	c, _ := res["content"].([]any)
	if len(c) == 0 {
		tb.Fatalf("result without content: %v", res)
	}
	s, _ := c[0].(map[string]any)["text"].(string)
	return s
}

// xmppOf decodes an MCP task id the way the docs describe it.
func xmppOf(tb testing.TB, id string) (endpoint, taskID string) {
	tb.Helper()
	parts := strings.Split(strings.TrimPrefix(id, "xmpp1."), ".")
	if len(parts) != 3 {
		tb.Fatalf("task id %q is not xmpp1.<ep>.<task>.<tool>", id)
	}
	dec := func(s string) string {
		b, err := b64dec(s)
		if err != nil {
			tb.Fatalf("task id part %q: %v", s, err)
		}
		return string(b)
	}
	return dec(parts[0]), dec(parts[1])
}

// TestTasksTSClientSurvivesHostAndFront: the TS tasks client creates a
// task, goes away; a new client process (and front) fetches the result.
// Then the same after kill -9 of the front, over stdio and over HTTP.
func TestTasksTSClientSurvivesHostAndFront(t *testing.T) {
	t.Parallel()
	x := startTaskEnv(t)

	// 1. stdio: capabilities, taskSupport, create, disconnect.
	a := x.runTS(t, x.stdioPlan(step("init"), step("create", "tool", "weather.slow", "ttl", 60000)))
	caps := a.Steps[0].Capabilities
	if tc, _ := caps["tasks"].(map[string]any); tc == nil || tc["requests"] == nil || tc["list"] == nil || tc["cancel"] == nil {
		t.Fatalf("server capabilities without tasks: %v", caps)
	}
	support := map[string]string{}
	for _, tl := range a.Steps[0].Tools {
		ex, _ := tl["execution"].(map[string]any)
		s, _ := ex["taskSupport"].(string)
		support[tl["name"].(string)] = s
	}
	if support["weather.slow"] != "optional" || support["plain.echo"] != "forbidden" {
		t.Fatalf("taskSupport = %v", support)
	}
	cr := a.Steps[1]
	if cr.Error != nil || cr.TaskID == "" || cr.Task["status"] != "working" {
		t.Fatalf("create = %+v %+v", cr.Task, cr.Error)
	}
	ep, xid := xmppOf(t, cr.TaskID)
	if ep != "weather@"+x.env.Domain {
		t.Fatalf("task id names endpoint %q", ep)
	}
	x.waitState(t, ep, xid, "running") // the host is gone, the task is not

	// 2. A new client process: state, then the result once the gate opens.
	// It also gives up on a tasks/result (timeout: notifications/cancelled);
	// that does not cancel the task either.
	b := x.runTS(t, x.stdioPlan(step("get", "taskId", cr.TaskID), step("list"), step("result", "taskId", cr.TaskID, "timeoutMs", 1500)))
	if b.Steps[0].Error != nil || b.Steps[0].Task["status"] != "working" {
		t.Fatalf("get from a new process = %+v %+v", b.Steps[0].Task, b.Steps[0].Error)
	}
	if b.Steps[2].Error == nil {
		t.Fatalf("tasks/result returned before the gate opened: %+v", b.Steps[2].Result)
	}
	x.waitState(t, ep, xid, "running")
	x.open()
	c := x.runTS(t, x.stdioPlan(step("until", "taskId", cr.TaskID, "status", []string{"completed"}), step("result", "taskId", cr.TaskID)))
	if c.Steps[1].Error != nil || textOf(t, c.Steps[1].Result) != "slow done" {
		t.Fatalf("result from a new process = %+v %+v", c.Steps[1].Result, c.Steps[1].Error)
	}
	rel, _ := c.Steps[1].Result["_meta"].(map[string]any)["io.modelcontextprotocol/related-task"].(map[string]any)
	if rel["taskId"] != cr.TaskID {
		t.Errorf("tasks/result _meta related-task = %v", rel)
	}
	t.Logf("stdio: created %s (XMPP task %s), fetched by a new process after %.0f ms polling", cr.TaskID[:24]+"…", xid, c.Steps[0].Ms)
}

// TestTasksTSClientKill9: kill -9 of the front between create and fetch,
// stdio and HTTP; each time a new front process resolves the id.
func TestTasksTSClientKill9(t *testing.T) {
	t.Parallel()
	x := startTaskEnv(t)

	// stdio: the client SIGKILLs its own server right after create.
	a := x.runTS(t, x.stdioPlan(step("create", "tool", "weather.echo", "args", map[string]any{"message": "kept"}), step("kill9"), step("get", "taskId", "$0")))
	id1 := a.Steps[0].TaskID
	if id1 == "" || a.Steps[2].Error == nil {
		t.Fatalf("stdio create/kill9: %+v / get after kill: %+v", a.Steps[0], a.Steps[2])
	}

	// HTTP: front 1 creates a held task and is killed with SIGKILL.
	url1, front1 := x.httpFront(t, "tok-1")
	h := x.runTS(t, httpPlan(url1, "tok-1", step("create", "tool", "weather.slow")))
	id2 := h.Steps[0].TaskID
	if id2 == "" {
		t.Fatalf("http create: %+v", h.Steps[0])
	}
	// That client is gone; a new one on the same front sees the task.
	h2 := x.runTS(t, httpPlan(url1, "tok-1", step("get", "taskId", id2), step("list")))
	if h2.Steps[0].Error != nil || h2.Steps[0].Task["status"] != "working" {
		t.Fatalf("http get from a new client = %+v %+v", h2.Steps[0].Task, h2.Steps[0].Error)
	}
	// The list comes from the gateway: the stdio front's task too.
	if got := listedIDs(t, h2.Steps[1].List); len(got) != 2 || got[0] != id2 || got[1] != id1 {
		t.Fatalf("tasks/list = %v, want [%s %s]", got, id2, id1)
	}
	if err := front1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = front1.Process.Wait()
	ep, xid := xmppOf(t, id2)
	x.waitState(t, ep, xid, "running")
	x.open()

	// A restarted front (new process, new port) resolves both ids.
	url2, _ := x.httpFront(t, "tok-2")
	r := x.runTS(t, httpPlan(url2, "tok-2",
		step("result", "taskId", id2),
		step("until", "taskId", id1, "status", []string{"completed"}),
		step("result", "taskId", id1)))
	if r.Steps[0].Error != nil || textOf(t, r.Steps[0].Result) != "slow done" {
		t.Fatalf("http result after kill -9 = %+v %+v", r.Steps[0].Result, r.Steps[0].Error)
	}
	if r.Steps[2].Error != nil || !strings.Contains(textOf(t, r.Steps[2].Result), "kept") {
		t.Fatalf("stdio-created task's result over a restarted HTTP front = %+v %+v", r.Steps[2].Result, r.Steps[2].Error)
	}
	// Input over HTTP: tasks/result's elicitation on the request's stream.
	hp := httpPlan(url2, "tok-2", step("stream", "tool", "weather.ask"))
	hp["elicit"] = map[string]any{"action": "accept", "content": map[string]any{"unit": "C"}}
	ha := x.runTS(t, hp)
	if ha.Steps[0].Error != nil || textOf(t, ha.Steps[0].Result) != `unit {"unit":"C"}` || len(ha.Elicitations) != 1 {
		t.Fatalf("ask over HTTP = %+v %+v, elicitations %+v", ha.Steps[0].Result, ha.Steps[0].Error, ha.Elicitations)
	}
	// And over stdio with yet another process.
	s := x.runTS(t, x.stdioPlan(step("result", "taskId", id2)))
	if s.Steps[0].Error != nil || textOf(t, s.Steps[0].Result) != "slow done" {
		t.Fatalf("stdio result after kill -9 = %+v %+v", s.Steps[0].Result, s.Steps[0].Error)
	}
}

// TestTasksTSClientCancelAndInput: tasks/cancel reaches the XMPP task;
// an input round trip goes through tasks/result's elicitation (with
// related-task) and the answer reaches the agent.
func TestTasksTSClientCancelAndInput(t *testing.T) {
	t.Parallel()
	x := startTaskEnv(t)
	plan := x.stdioPlan(
		step("create", "tool", "weather.wait"),
		step("until", "taskId", "$0", "status", []string{"working"}),
		step("cancel", "taskId", "$0"),
		step("get", "taskId", "$0"),
		step("cancel", "taskId", "$0"),
		step("stream", "tool", "weather.ask"),
	)
	plan["elicit"] = map[string]any{"action": "accept", "content": map[string]any{"unit": "F"}}
	out := x.runTS(t, plan)
	if s := out.Steps[2]; s.Error != nil || s.Task["status"] != "cancelled" {
		t.Fatalf("tasks/cancel = %+v %+v", s.Task, s.Error)
	}
	ep, xid := xmppOf(t, out.Steps[0].TaskID)
	x.waitState(t, ep, xid, "cancelled")
	if s := out.Steps[3]; s.Task["status"] != "cancelled" {
		t.Fatalf("tasks/get after cancel = %+v", s.Task)
	}
	if s := out.Steps[4]; s.Error == nil || s.Error.Code != -32602 {
		t.Fatalf("cancelling a terminal task = %+v", s.Error)
	}
	ask := out.Steps[5]
	if ask.Error != nil || ask.Result == nil || textOf(t, ask.Result) != `unit {"unit":"F"}` {
		t.Fatalf("ask via tasks = %+v %+v (messages %v)", ask.Result, ask.Error, ask.Messages)
	}
	sawInput := false
	for _, m := range ask.Messages {
		sawInput = sawInput || m["status"] == "input_required"
	}
	if len(out.Elicitations) != 1 || !strings.Contains(out.Elicitations[0].Message, "Which unit?") {
		t.Fatalf("elicitations = %+v", out.Elicitations)
	}
	rel, _ := out.Elicitations[0].Meta["io.modelcontextprotocol/related-task"].(map[string]any)
	if rel["taskId"] != ask.TaskID {
		t.Errorf("elicitation related-task = %v, want %s", rel, ask.TaskID)
	}
	t.Logf("ask: statuses seen %v (input_required seen: %v)", ask.Messages, sawInput)
}

// TestTasksBadInput: unknown, foreign and malformed ids get one clear
// JSON-RPC error that repeats nothing of the request.
func TestTasksBadInput(t *testing.T) {
	t.Parallel()
	x := startTaskEnv(t)
	// bob's task, a real one on the same endpoint.
	bob := x.env.Dial("bob")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep := jid.MustParse("weather@" + x.env.Domain)
	pin, err := bob.Pin(ctx, ep, "wait")
	if err != nil {
		t.Fatal(err)
	}
	acc, err := bob.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: "wait", Version: pin.Manifest.Version, ManifestHash: pin.Manifest.Hash, Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	enc := func(ep, task, tool string) string {
		return "xmpp1." + b64enc(ep) + "." + b64enc(task) + "." + b64enc(tool)
	}
	foreign := enc(ep.String(), acc.TaskID, "wait")
	missing := enc(ep.String(), "task-0123456789abcdefghijkl", "wait")
	elsewhere := enc("someone@elsewhere.example", "task-0123456789abcdefghijkl", "wait")
	secret := "<script>SECRET-PAYLOAD</script>"
	out := x.runTS(t, x.stdioPlan(
		step("get", "taskId", foreign),
		step("get", "taskId", missing),
		step("result", "taskId", foreign),
		step("cancel", "taskId", foreign),
		step("get", "taskId", elsewhere),
		step("get", "taskId", secret),
		step("raw", "method", "tasks/get", "params", map[string]any{"taskId": 42}),
		step("raw", "method", "tasks/get", "params", map[string]any{}),
		step("raw", "method", "tasks/list", "params", map[string]any{"cursor": secret}),
		step("raw", "method", "tools/call", "params", map[string]any{"name": "plain.echo", "arguments": map[string]any{"message": "x"}, "task": map[string]any{}}),
	))
	first := out.Steps[0].Error
	if first == nil || first.Code != -32602 {
		t.Fatalf("foreign id: %+v", out.Steps[0])
	}
	for i, s := range out.Steps[:6] {
		if s.Error == nil || s.Error.Code != first.Code || s.Error.Message != first.Message {
			t.Errorf("step %d (%s): error %+v, want the same as the foreign id's %+v", i, s.Op, s.Error, first)
		}
	}
	for i, s := range out.Steps {
		if s.Error == nil {
			t.Errorf("step %d (%s) succeeded: %+v", i, s.Op, s)
			continue
		}
		if strings.Contains(s.Error.Message, "SECRET") || strings.Contains(s.Error.Message, acc.TaskID) || strings.Contains(s.Error.Message, "elsewhere") {
			t.Errorf("step %d error reflects the request: %q", i, s.Error.Message)
		}
		t.Logf("step %d %s: %d %s", i, s.Op, s.Error.Code, s.Error.Message)
	}
	if c := out.Steps[9].Error; c == nil || c.Code != -32601 {
		t.Errorf("task-augmented call of a forbidden tool: %+v", c)
	}
	// bob's task is untouched by alice's cancel.
	st, err := bob.State(ctx, ep, acc.TaskID)
	if err != nil || st.State != "running" {
		t.Fatalf("bob's task after alice's cancel attempt: %v %v", st, err)
	}
}

func b64enc(s string) string { return b64url.EncodeToString([]byte(s)) }

func b64dec(s string) ([]byte, error) { return b64url.DecodeString(s) }

// --- a 2026-07-28 client written from SEP-2663 -------------------------

// rawMCP is a line-delimited JSON-RPC client of `agentgw mcp` over stdio.
type rawMCP struct {
	tb    testing.TB
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	next  int
	meta  map[string]any    // sent in every request's _meta
	notes []json.RawMessage // notifications read so far
	// url and bearer: streamable HTTP instead of stdio.
	url, bearer string
}

// rawHTTP is a 2026-07-28 client of `agentgw mcp --http` (stateless: every
// request is a POST that carries its identity in _meta and the SEP-2243
// headers).
func rawHTTP(tb testing.TB, url, bearer string) *rawMCP {
	r := &rawMCP{tb: tb, url: url, bearer: bearer, meta: map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps26,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-http-test", "version": "1"},
	}}
	return r
}

// post sends one request over HTTP and returns its response line.
func (r *rawMCP) post(method string, id int, body []byte, params map[string]any) []byte {
	req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		r.tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.bearer)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok && method == "tools/call" {
		req.Header.Set("Mcp-Name", name)
	}
	if id, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id) // SEP-2663: tasks/* route by task id
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.tb.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != http.StatusOK {
		r.tb.Fatalf("%s: HTTP %d: %s", method, resp.StatusCode, data)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return data
	}
	for _, line := range strings.Split(string(data), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, fmt.Sprintf(`"id":%d`, id)) {
			return []byte(d)
		}
	}
	r.tb.Fatalf("%s: no response in the event stream: %s", method, data)
	return nil
}

type rpcResp struct {
	ID     *int            `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (x *taskEnv) raw(tb testing.TB, protocol string, caps map[string]any) *rawMCP {
	tb.Helper()
	cmd := exec.Command(x.bin, x.mcpArgs()...)
	cmd.Env = append(os.Environ(), pwEnv+"="+gatewaytest.Password+"alice")
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	testkit.StopOnCleanup(tb, cmd, "agentgw mcp (raw client)")
	r := &rawMCP{tb: tb, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	info := map[string]any{"name": "raw-test", "version": "1"}
	if protocol >= "2026-07-28" {
		// 2026-07-28 is stateless: no initialize; every request says who
		// it is (SEP-2575), and server/discover tells the capabilities.
		r.meta = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    protocol,
			"io.modelcontextprotocol/clientCapabilities": caps,
			"io.modelcontextprotocol/clientInfo":         info,
		}
		var disc struct {
			Capabilities struct {
				Extensions map[string]any `json:"extensions"`
			} `json:"capabilities"`
		}
		r.must("server/discover", map[string]any{}, &disc)
		if _, ok := disc.Capabilities.Extensions["io.modelcontextprotocol/tasks"]; !ok {
			tb.Fatalf("server/discover: no tasks extension in %+v", disc.Capabilities)
		}
		return r
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	r.must("initialize", map[string]any{"protocolVersion": protocol, "capabilities": caps, "clientInfo": info}, &init)
	if init.ProtocolVersion != protocol {
		tb.Fatalf("negotiated %q, want %q", init.ProtocolVersion, protocol)
	}
	r.notify("notifications/initialized", map[string]any{})
	return r
}

func (r *rawMCP) notify(method string, params any) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if _, err := r.in.Write(append(b, '\n')); err != nil {
		r.tb.Fatal(err)
	}
}

// call sends one request and returns its response, skipping notifications.
func (r *rawMCP) call(method string, params map[string]any) rpcResp {
	r.next++
	id := r.next
	if r.meta != nil && method != "initialize" {
		p := map[string]any{}
		for k, v := range params {
			p[k] = v
		}
		m, _ := p["_meta"].(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		for k, v := range r.meta {
			m[k] = v
		}
		p["_meta"] = m
		params = p
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if r.url != "" {
		var resp rpcResp
		line := r.post(method, id, b, params)
		if err := json.Unmarshal(line, &resp); err != nil {
			r.tb.Fatalf("%s: %v in %q", method, err, line)
		}
		return resp
	}
	if _, err := r.in.Write(append(b, '\n')); err != nil {
		r.tb.Fatal(err)
	}
	for {
		line, err := r.out.ReadBytes('\n')
		if err != nil {
			r.tb.Fatalf("%s: reading the response: %v", method, err)
		}
		var resp rpcResp
		if err := json.Unmarshal(line, &resp); err != nil {
			r.tb.Fatalf("%s: %v in %q", method, err, line)
		}
		if resp.ID != nil && *resp.ID == id && resp.Method == "" {
			return resp
		}
		if resp.ID == nil && resp.Method != "" {
			r.notes = append(r.notes, append(json.RawMessage(nil), line...))
		}
	}
}

func (r *rawMCP) must(method string, params map[string]any, v any) {
	r.tb.Helper()
	resp := r.call(method, params)
	if resp.Error != nil {
		r.tb.Fatalf("%s: error %d %s", method, resp.Error.Code, resp.Error.Message)
	}
	if v != nil {
		if err := json.Unmarshal(resp.Result, v); err != nil {
			r.tb.Fatalf("%s: %v in %s", method, err, resp.Result)
		}
	}
}

func (r *rawMCP) kill() {
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = r.cmd.Process.Wait()
}

type task26 struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          *int64                     `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
	Result         map[string]any             `json:"result"`
	Error          map[string]any             `json:"error"`
}

// until polls tasks/get until the status is one of want.
func (r *rawMCP) until(id string, want ...string) task26 {
	r.tb.Helper()
	var t task26
	testkit.WaitFor(r.tb, 60*time.Second, "task "+strings.Join(want, "|"), func() bool {
		r.must("tasks/get", map[string]any{"taskId": id}, &t)
		for _, w := range want {
			if t.Status == w {
				return true
			}
		}
		return false
	})
	return t
}

var caps26 = map[string]any{"elicitation": map[string]any{"form": map[string]any{}}, "extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}

// TestTasks2026Client: the 2026-07-28 extension end to end with a client
// written from SEP-2663: tools/call answered with resultType "task",
// kill -9 of the front, a new front's tasks/get with the inlined result;
// tasks/update answers input; tasks/cancel acknowledges and cancels.
func TestTasks2026Client(t *testing.T) {
	t.Parallel()
	start := time.Now()
	x := startTaskEnv(t)
	t.Logf("environment up after %v", time.Since(start))
	a := x.raw(t, "2026-07-28", caps26)
	var created task26
	a.must("tools/call", map[string]any{"name": "weather.slow", "arguments": map[string]any{}}, &created)
	if created.ResultType != "task" || created.Status != "working" || created.TaskID == "" || created.TTLMs == nil || created.PollIntervalMs == 0 {
		t.Fatalf("tools/call = %+v", created)
	}
	// A plain (sync) call of a tool that forbids tasks still answers.
	var plain map[string]any
	a.must("tools/call", map[string]any{"name": "plain.echo", "arguments": map[string]any{"message": "sync"}}, &plain)
	if plain["resultType"] == "task" || !strings.Contains(fmt.Sprint(plain["content"]), "sync") {
		t.Fatalf("forbidden tool answered %v", plain)
	}
	a.kill()

	t.Logf("created and killed after %v", time.Since(start))
	x.open()
	b := x.raw(t, "2026-07-28", caps26)
	done := b.until(created.TaskID, "completed")
	if done.ResultType != "complete" || textOf(t, done.Result) != "slow done" {
		t.Fatalf("tasks/get after kill -9 = %+v", done)
	}

	t.Logf("fetched by a new front after %v", time.Since(start))
	// Input through tasks/get inputRequests and tasks/update.
	var ask task26
	b.must("tools/call", map[string]any{"name": "weather.ask", "arguments": map[string]any{}}, &ask)
	waiting := b.until(ask.TaskID, "input_required")
	if len(waiting.InputRequests) != 1 {
		t.Fatalf("input_required without one input request: %+v", waiting)
	}
	var key string
	var ir struct {
		Method string `json:"method"`
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
	}
	for k, v := range waiting.InputRequests {
		key = k
		_ = json.Unmarshal(v, &ir)
	}
	if ir.Method != "elicitation/create" || !strings.Contains(ir.Params.Message, "Which unit?") {
		t.Fatalf("input request = %+v", ir)
	}
	// A wrong answer is refused, an unknown key ignored, the right one taken.
	bad := b.call("tasks/update", map[string]any{"taskId": ask.TaskID, "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"unit": "K"}}}})
	if bad.Error == nil || bad.Error.Code != -32602 || strings.Contains(bad.Error.Message, `"K"`) {
		t.Fatalf("invalid answer: %+v", bad.Error)
	}
	b.must("tasks/update", map[string]any{"taskId": ask.TaskID, "inputResponses": map[string]any{"nope": map[string]any{"action": "accept"}}}, nil)
	b.must("tasks/update", map[string]any{"taskId": ask.TaskID, "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"unit": "C"}}}}, nil)
	answered := b.until(ask.TaskID, "completed")
	if textOf(t, answered.Result) != `unit {"unit":"C"}` {
		t.Fatalf("answered = %+v", answered)
	}

	t.Logf("input round trip done after %v", time.Since(start))
	// Cancel: acknowledged, and the XMPP task settles cancelled.
	var w task26
	b.must("tools/call", map[string]any{"name": "weather.wait", "arguments": map[string]any{}}, &w)
	var ack map[string]any
	b.must("tasks/cancel", map[string]any{"taskId": w.TaskID}, &ack)
	if ack["resultType"] != "complete" {
		t.Fatalf("tasks/cancel ack = %v", ack)
	}
	if got := b.until(w.TaskID, "cancelled"); got.Status != "cancelled" {
		t.Fatal(got)
	}
	// Over streamable HTTP: a task waiting for input outlives kill -9 of
	// the front that created it; a restarted front takes the answer.
	url1, front1 := x.httpFront(t, "tok-1")
	h1 := rawHTTP(t, url1, "tok-1")
	var hask task26
	h1.must("tools/call", map[string]any{"name": "weather.ask", "arguments": map[string]any{}}, &hask)
	if hask.ResultType != "task" {
		t.Fatalf("http tools/call = %+v", hask)
	}
	h1.until(hask.TaskID, "input_required")
	_ = front1.Process.Signal(syscall.SIGKILL)
	_, _ = front1.Process.Wait()
	url2, _ := x.httpFront(t, "tok-2")
	h2 := rawHTTP(t, url2, "tok-2")
	hw := h2.until(hask.TaskID, "input_required")
	for k := range hw.InputRequests {
		h2.must("tasks/update", map[string]any{"taskId": hask.TaskID, "inputResponses": map[string]any{k: map[string]any{"action": "accept", "content": map[string]any{"unit": "F"}}}}, nil)
	}
	if got := h2.until(hask.TaskID, "completed"); textOf(t, got.Result) != `unit {"unit":"F"}` {
		t.Fatalf("http answered after kill -9 = %+v", got)
	}
	t.Logf("HTTP kill -9 round done after %v", time.Since(start))

	// Unknown ids: the same error as for 2025-11-25.
	if e := b.call("tasks/get", map[string]any{"taskId": "xmpp1.AAAA.BBBB.CCCC"}).Error; e == nil || e.Code != -32602 || strings.Contains(e.Message, "AAAA") {
		t.Fatalf("unknown id: %+v", e)
	}
}

// BenchmarkTaskEchoVsPlain: the scripted echo through `agentgw mcp` over
// stdio, as a plain tools/call and as a 2025-11-25 task (tools/call with
// params.task, then tasks/result), alternating in the same run on one
// front process. Run with -benchtime=1x; each run makes n calls per path
// and reports their percentiles in milliseconds.
func BenchmarkTaskEchoVsPlain(b *testing.B) {
	x := startTaskEnvWith(b, func(c *config.Config) {
		c.Federation.InvokePerSecond, c.Federation.InvokeBurst = 1e6, 1e6
	}, true)
	r := x.raw(b, "2025-11-25", map[string]any{})
	n := 300
	if b.N > n {
		n = b.N
	}
	args := map[string]any{"name": "weather.echo", "arguments": map[string]any{"message": "hello"}}
	plain := func() {
		var res map[string]any
		r.must("tools/call", args, &res)
		if res["isError"] == true {
			b.Fatalf("echo: %v", res)
		}
	}
	task := func() {
		var created struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		}
		r.must("tools/call", map[string]any{"name": "weather.echo", "arguments": map[string]any{"message": "hello"}, "task": map[string]any{}}, &created)
		var res map[string]any
		r.must("tasks/result", map[string]any{"taskId": created.Task.TaskID}, &res)
		if res["isError"] == true || created.Task.TaskID == "" {
			b.Fatalf("task echo: %v", res)
		}
	}
	for i := 0; i < 30; i++ {
		plain()
		task()
	}
	var tp, tt []float64
	b.ResetTimer()
	for i := 0; i < n; i++ {
		t0 := time.Now()
		plain()
		tp = append(tp, float64(time.Since(t0).Microseconds())/1000)
		t0 = time.Now()
		task()
		tt = append(tt, float64(time.Since(t0).Microseconds())/1000)
	}
	b.StopTimer()
	pct := func(v []float64, p float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s[int(p*float64(len(s)-1))]
	}
	b.ReportMetric(pct(tt, 0.5), "task-p50-ms")
	b.ReportMetric(pct(tt, 0.99), "task-p99-ms")
	b.ReportMetric(pct(tp, 0.5), "plain-p50-ms")
	b.ReportMetric(pct(tp, 0.99), "plain-p99-ms")
	b.ReportMetric(pct(tt, 0.5)/pct(tp, 0.5), "p50-ratio")
	b.ReportMetric(pct(tt, 0.99)/pct(tp, 0.99), "p99-ratio")
	b.Logf("n=%d task (tools/call+task, tasks/result) p50 %.2f ms p99 %.2f ms; plain tools/call p50 %.2f ms p99 %.2f ms",
		n, pct(tt, 0.5), pct(tt, 0.99), pct(tp, 0.5), pct(tp, 0.99))
}

// TestTasksProgressAndStatusOnStdio: a 2025-11-25 task-augmented call with
// a progress token gets the task's progress (with related-task) and
// notifications/tasks/status up to its completion, while the host polls.
func TestTasksProgressAndStatusOnStdio(t *testing.T) {
	t.Parallel()
	x := startTaskEnv(t)
	r := x.raw(t, "2025-11-25", map[string]any{})
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"task"`
	}
	r.must("tools/call", map[string]any{"name": "weather.slow", "arguments": map[string]any{},
		"task": map[string]any{"ttl": 60000}, "_meta": map[string]any{"progressToken": "p1"}}, &created)
	if created.Task.TaskID == "" || created.Task.Status != "working" {
		t.Fatalf("created = %+v", created)
	}
	seen := func(method, needle string) bool {
		for _, n := range r.notes {
			if strings.Contains(string(n), `"method":"`+method+`"`) && strings.Contains(string(n), needle) {
				return true
			}
		}
		return false
	}
	testkit.WaitFor(t, 30*time.Second, "the task's progress", func() bool {
		r.must("tasks/get", map[string]any{"taskId": created.Task.TaskID}, nil)
		return seen("notifications/progress", "held: waiting for the gate")
	})
	if !seen("notifications/progress", `"io.modelcontextprotocol/related-task":{"taskId":"`+created.Task.TaskID) {
		t.Errorf("progress without related-task: %s", r.notes)
	}
	x.open()
	testkit.WaitFor(t, 30*time.Second, "the completed status notification", func() bool {
		r.must("tasks/get", map[string]any{"taskId": created.Task.TaskID}, nil)
		return seen("notifications/tasks/status", `"status":"completed"`)
	})
	var res map[string]any
	r.must("tasks/result", map[string]any{"taskId": created.Task.TaskID}, &res)
	if textOf(t, res) != "slow done" {
		t.Fatalf("result = %v", res)
	}
}
