package mcpfront_test

// End-to-end proof of the MCP front with real parts only: the official
// TypeScript SDK client (testdata/mcpfront/client.mjs) and the MCP
// Inspector CLI talk to a built `agentgw mcp`, which logs into a private
// Prosody and calls a running agentgw gateway (testkit/e2e), whose
// agents are scripted or backed by server-everything over MCP.

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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	gatewaytest "github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

const pwEnv = "MCPFRONT_TEST_PASSWORD"

type e2e struct {
	env    *gatewaytest.Env
	bin    string
	node   string
	root   string
	script string
}

// nodeTools finds node and the npm packages; a missing one skips the test,
// or fails it under CI=true.
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
	for _, p := range []string{"@modelcontextprotocol/sdk", "@modelcontextprotocol/server-everything", "@modelcontextprotocol/inspector-cli"} {
		if _, err := os.Stat(filepath.Join(root, "node_modules", p, "package.json")); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		testkit.Unavailable(tb, "missing %v (npm ci at the module root)", missing)
	}
	return node, root
}

func everythingTOML(root, domain string) string {
	entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	node, _ := exec.LookPath("node")
	return fmt.Sprintf("[[agents]]\njid = %q\n[agents.mcp]\ncommand = [%q, %q, \"stdio\"]\n", "everything@"+domain, node, entry)
}

func startE2E(tb testing.TB, everything bool) *e2e {
	return startE2EWith(tb, everything, false, nil)
}

// startE2EWith optionally turns Nagle's algorithm off in Prosody
// (network_settings = { nagle = false }); Prosody 0.12 leaves it on, which
// with delayed ACKs costs about 40 ms per call on loopback.
func startE2EWith(tb testing.TB, everything, noNagle bool, mutate func(*config.Config)) *e2e {
	tb.Helper()
	node, root := nodeTools(tb)
	// The scripted "slow" tool pauses after its progress: TS SDK clients
	// run notification handlers a microtask later than response handlers,
	// so progress read in the same chunk as the result is dropped there.
	x0 := gatewaytest.DefaultExecutor()
	x0.Script("slow",
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(25), Stage: "one", Message: "quarter"}},
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(50), Stage: "two", Message: "half"}},
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(75), Stage: "three", Message: "most"}},
		taskstest.Step{Do: func(ctx context.Context, _ tasks.Call, _ tasks.Run) error {
			select {
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		}},
		taskstest.Step{Complete: taskstest.Text("slow done")},
	)
	// "ask" honours cancellation: without an answer it settles cancelled.
	x0.Script("ask", taskstest.Step{Do: func(ctx context.Context, _ tasks.Call, run tasks.Run) error {
		ans, err := run.RequestInput(ctx, tasks.InputRequest{Question: "Which unit?",
			Schema: json.RawMessage(`{"type":"object","properties":{"unit":{"enum":["C","F"]}},"required":["unit"]}`)})
		if err != nil {
			return run.Cancelled("no input")
		}
		b, _ := json.Marshal("unit " + string(ans))
		return run.Complete(tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":` + string(b) + `}]`)})
	}})
	opts := gatewaytest.Options{Agents: []gatewaytest.Agent{{Localpart: "weather", Executor: x0}}, Users: []string{"alice"}, Mutate: mutate}
	x := &e2e{node: node, root: root, script: filepath.Join(root, "testdata", "mcpfront", "client.mjs")}
	if everything || noNagle {
		srv := xmppharness.StartProsody(tb, xmppharness.ProsodyOptions{})
		if noNagle {
			cfg, err := os.ReadFile(srv.ConfigPath)
			if err != nil {
				tb.Fatal(err)
			}
			// Global settings must precede the host sections.
			cfg = append([]byte("network_settings = { nagle = false }\n"), cfg...)
			if err := os.WriteFile(srv.ConfigPath, cfg, 0o600); err != nil {
				tb.Fatal(err)
			}
			if err := srv.Restart(context.Background()); err != nil {
				tb.Fatal(err)
			}
		}
		opts.Server = srv
		if everything {
			opts.TOML = everythingTOML(root, srv.ComponentDomain)
		}
	}
	x.env = gatewaytest.Start(tb, opts)
	x.bin = gatewaytest.Binary(tb)
	return x
}

// mcpArgs is the `agentgw mcp` command line for alice.
func (x *e2e) mcpArgs(extra ...string) []string {
	s := x.env.Server
	args := []string{"mcp", "--jid", x.env.JID("alice"), "--password-env", pwEnv, "--server", s.C2SAddr, "--ca-file", s.CAFile}
	return append(args, extra...)
}

func (x *e2e) mcpEnv() map[string]string {
	return map[string]string{pwEnv: gatewaytest.Password + "alice"}
}

// clientOut is what client.mjs prints.
type clientOut struct {
	Steps []struct {
		Op       string           `json:"op"`
		Tool     string           `json:"tool"`
		Tools    []map[string]any `json:"tools"`
		Progress []map[string]any `json:"progress"`
		Result   *struct {
			Content           []map[string]any `json:"content"`
			StructuredContent map[string]any   `json:"structuredContent"`
			IsError           bool             `json:"isError"`
			Meta              map[string]any   `json:"_meta"`
		} `json:"result"`
		Error *struct {
			Message string         `json:"message"`
			Code    int64          `json:"code"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
		Cancelled bool    `json:"cancelled"`
		N         int     `json:"n"`
		P50       float64 `json:"p50"`
		P99       float64 `json:"p99"`
	} `json:"steps"`
	Elicitations []struct {
		Message         string         `json:"message"`
		RequestedSchema map[string]any `json:"requestedSchema"`
	} `json:"elicitations"`
	Fatal *struct {
		Message string `json:"message"`
	} `json:"fatal"`
}

// runClient runs client.mjs with plan and decodes its output.
func (x *e2e) runClient(tb testing.TB, timeout time.Duration, plan map[string]any) *clientOut {
	tb.Helper()
	p, _ := json.Marshal(plan)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, x.node, x.script, string(p))
	cmd.Dir = x.root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	var out clientOut
	if jerr := json.Unmarshal(stdout, &out); jerr != nil {
		tb.Fatalf("client.mjs: %v; output %q\nstderr:\n%s", err, stdout, tail(stderr.String()))
	}
	if os.Getenv("MCPFRONT_DEBUG") != "" {
		tb.Logf("client.mjs stderr:\n%s", tail(stderr.String()))
	}
	if out.Fatal != nil {
		tb.Fatalf("client.mjs failed: %s\nstderr:\n%s", out.Fatal.Message, tail(stderr.String()))
	}
	return &out
}

func tail(s string) string {
	if len(s) > 6000 {
		return s[len(s)-6000:]
	}
	return s
}

func text(r map[string]any) string { s, _ := r["text"].(string); return s }

func taskOf(tb testing.TB, meta map[string]any) (endpoint, taskID string) {
	tb.Helper()
	tm, _ := meta["agentgw/task"].(map[string]any)
	endpoint, _ = tm["endpoint"].(string)
	taskID, _ = tm["taskId"].(string)
	if endpoint == "" || taskID == "" {
		tb.Fatalf("no agentgw/task in _meta %v", meta)
	}
	return endpoint, taskID
}

// waitState polls task-state as alice until the task reaches want.
func (x *e2e) waitState(tb testing.TB, endpoint, taskID, want string) {
	tb.Helper()
	c := x.env.Dial("alice")
	ep := jid.MustParse(endpoint)
	last := ""
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := c.State(ctx, ep, taskID)
		cancel()
		if err != nil {
			last = err.Error()
			continue
		}
		if last = string(st.State); last == want {
			return
		}
	}
	tb.Fatalf("task %s at %s is %q, want %q", taskID, endpoint, last, want)
}

func TestTSClientStdioScriptedAgent(t *testing.T) {
	t.Parallel()
	x := startE2E(t, false)
	out := x.runClient(t, 3*time.Minute, map[string]any{
		"transport": "stdio", "command": x.bin, "args": x.mcpArgs(), "env": x.mcpEnv(),
		"elicit": map[string]any{"action": "accept", "content": map[string]any{"unit": "C"}},
		"steps": []any{
			map[string]any{"op": "list"},
			map[string]any{"op": "call", "tool": "weather.echo", "args": map[string]any{"message": "hi from TS"}},
			map[string]any{"op": "call", "tool": "weather.slow", "args": map[string]any{}, "progress": true},
			map[string]any{"op": "call", "tool": "weather.ask", "args": map[string]any{}},
			map[string]any{"op": "call", "tool": "weather.fail", "args": map[string]any{}},
			map[string]any{"op": "call", "tool": "weather.wait", "args": map[string]any{}, "cancelAfterProgress": 1},
		},
	})
	ep := "weather@" + x.env.Domain
	var names []string
	for _, tl := range out.Steps[0].Tools {
		names = append(names, tl["name"].(string))
		if m, _ := tl["_meta"].(map[string]any)["agentgw/xmpp"].(map[string]any); m["endpoint"] != ep || m["version"] != "1.0.0" {
			t.Errorf("tool %v pins = %v", tl["name"], m)
		}
	}
	slices.Sort(names)
	if want := []string{"weather.ask", "weather.echo", "weather.fail", "weather.slow", "weather.wait"}; !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}

	echo := out.Steps[1]
	if echo.Error != nil || echo.Result == nil || echo.Result.IsError || !strings.Contains(text(echo.Result.Content[0]), "hi from TS") {
		t.Fatalf("echo = %+v %+v", echo.Result, echo.Error)
	}
	if _, id := taskOf(t, echo.Result.Meta); id == "" {
		t.Fatal("no task id")
	}

	slow := out.Steps[2]
	if slow.Error != nil || slow.Result == nil {
		t.Fatalf("slow: %+v", slow.Error)
	}
	var percents []float64
	for _, p := range slow.Progress {
		if tot, _ := p["total"].(float64); tot == 100 {
			percents = append(percents, p["progress"].(float64))
		}
	}
	if !slices.Equal(percents, []float64{25, 50, 75}) {
		t.Errorf("progress with percent = %v (all: %v)", percents, slow.Progress)
	}

	ask := out.Steps[3]
	if ask.Error != nil || ask.Result == nil || text(ask.Result.Content[0]) != `unit {"unit":"C"}` {
		t.Fatalf("ask = %+v %+v", ask.Result, ask.Error)
	}
	if len(out.Elicitations) != 1 || !strings.Contains(out.Elicitations[0].Message, "Which unit?") {
		t.Fatalf("elicitations = %+v", out.Elicitations)
	}
	unit, _ := out.Elicitations[0].RequestedSchema["properties"].(map[string]any)["unit"].(map[string]any)
	if unit["type"] != "string" || fmt.Sprint(unit["enum"]) != "[C F]" {
		t.Errorf("requested schema = %v", out.Elicitations[0].RequestedSchema)
	}

	fail := out.Steps[4]
	if fail.Result == nil || !fail.Result.IsError || !strings.Contains(text(fail.Result.Content[0]), "com.example:broken") {
		t.Fatalf("fail = %+v %+v", fail.Result, fail.Error)
	}

	wait := out.Steps[5]
	if !wait.Cancelled || wait.Error == nil || len(wait.Progress) == 0 {
		t.Fatalf("wait was not cancelled by the client: %+v", wait)
	}
	wep, wid := taskOf(t, wait.Progress[0]["_meta"].(map[string]any))
	x.waitState(t, wep, wid, "cancelled")
}

// startHTTP runs `agentgw mcp --http 127.0.0.1:0 --bearer-env …` and
// returns its URL.
func (x *e2e) startHTTP(tb testing.TB, bearer string, extra ...string) string {
	tb.Helper()
	u, _ := x.startHTTPArgs(tb, append([]string{"--bearer-env", "MCPFRONT_TEST_BEARER"}, extra...), "MCPFRONT_TEST_BEARER="+bearer)
	return u
}

// startHTTPArgs runs `agentgw mcp --http 127.0.0.1:0` with extra arguments
// and environment; it returns the URL and a copy of stderr so far.
func (x *e2e) startHTTPArgs(tb testing.TB, extra []string, env ...string) (string, func() string) {
	tb.Helper()
	args := x.mcpArgs(append([]string{"--http", "127.0.0.1:0"}, extra...)...)
	cmd := exec.Command(x.bin, args...)
	cmd.Env = append(append(os.Environ(), pwEnv+"="+gatewaytest.Password+"alice"), env...)
	var mu sync.Mutex
	var all strings.Builder
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
			mu.Lock()
			all.WriteString(line + "\n")
			mu.Unlock()
			tb.Log("agentgw mcp: " + line)
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
	snapshot := func() string {
		mu.Lock()
		defer mu.Unlock()
		return all.String()
	}
	select {
	case u := <-urls:
		return u, snapshot
	case <-time.After(60 * time.Second):
		tb.Fatal("agentgw mcp --http printed no address")
		return "", nil
	}
}

// Without --bearer-env, --http on loopback still requires a token: a fresh
// one is written to a 0600 file whose path (never the token) is printed.
// No token → 401; the token from the file works for the real TS client.
func TestTSClientHTTPGeneratedToken(t *testing.T) {
	t.Parallel()
	x := startE2E(t, false)
	url, stderr := x.startHTTPArgs(t, []string{"--gateway", x.env.Domain, "--session-timeout", "5m"})
	out := stderr()
	i := strings.Index(out, "bearer token in ")
	if i < 0 {
		t.Fatalf("no token file announced on stderr:\n%s", out)
	}
	path := strings.Fields(out[i+len("bearer token in "):])[0]
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(data))
	if len(token) < 20 {
		t.Fatalf("token %d characters", len(token))
	}
	if strings.Contains(out, token) {
		t.Fatal("the token itself was printed")
	}

	for _, auth := range []string{"", "Bearer wrong-" + token} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("request with Authorization %q: %d, want 401", auth, resp.StatusCode)
		}
	}

	res := x.runClient(t, 2*time.Minute, map[string]any{
		"transport": "http", "url": url, "bearer": token,
		"steps": []any{
			map[string]any{"op": "list"},
			map[string]any{"op": "call", "tool": "weather.echo", "args": map[string]any{"message": "generated token"}},
		},
	})
	if len(res.Steps[0].Tools) != 5 {
		t.Fatalf("tools = %d", len(res.Steps[0].Tools))
	}
	if echo := res.Steps[1]; echo.Result == nil || !strings.Contains(text(echo.Result.Content[0]), "generated token") {
		t.Fatalf("echo = %+v %+v", echo.Result, echo.Error)
	}
}

func TestTSClientHTTPWithBearer(t *testing.T) {
	t.Parallel()
	x := startE2E(t, false)
	url := x.startHTTP(t, "tok-e2e-1", "--gateway", x.env.Domain)

	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("request without bearer: %d", resp.StatusCode)
	}

	out := x.runClient(t, 2*time.Minute, map[string]any{
		"transport": "http", "url": url, "bearer": "tok-e2e-1",
		"steps": []any{
			map[string]any{"op": "list"},
			map[string]any{"op": "call", "tool": "weather.echo", "args": map[string]any{"message": "over http"}},
			map[string]any{"op": "call", "tool": "weather.slow", "args": map[string]any{}, "progress": true},
			// No elicitation declared: the task is cancelled, clearly.
			map[string]any{"op": "call", "tool": "weather.ask", "args": map[string]any{}},
		},
	})
	if len(out.Steps[0].Tools) != 5 {
		t.Fatalf("tools over HTTP = %d", len(out.Steps[0].Tools))
	}
	echo := out.Steps[1]
	if echo.Result == nil || !strings.Contains(text(echo.Result.Content[0]), "over http") {
		t.Fatalf("echo over HTTP = %+v %+v", echo.Result, echo.Error)
	}
	if n := len(out.Steps[2].Progress); n < 4 {
		t.Errorf("progress over HTTP: %d notifications", n)
	}
	ask := out.Steps[3]
	if ask.Error == nil || ask.Error.Code != -32081 || !strings.Contains(ask.Error.Message, "cannot answer elicitation") {
		t.Fatalf("ask without elicitation = %+v %+v", ask.Result, ask.Error)
	}
	aep, aid := taskOf(t, ask.Error.Data)
	x.waitState(t, aep, aid, "cancelled")
}

func TestFullChainServerEverything(t *testing.T) {
	t.Parallel()
	x := startE2E(t, true)
	out := x.runClient(t, 4*time.Minute, map[string]any{
		"transport": "stdio", "command": x.bin, "args": x.mcpArgs(), "env": x.mcpEnv(),
		"elicit": map[string]any{"action": "accept", "content": map[string]any{
			"name": "Ada Lovelace", "check": true, "email": "ada@example.test", "integer": 7,
			"untitledSingleSelectEnum": "Rachel", "untitledMultipleSelectEnum": []any{"Piano"},
			"titledSingleSelectEnum": "hero-2", "titledMultipleSelectEnum": []any{"fish-3"}, "legacyTitledEnum": "pet-2",
		}},
		"steps": []any{
			map[string]any{"op": "list"},
			map[string]any{"op": "call", "tool": "everything.echo", "args": map[string]any{"message": "through the chain"}},
			map[string]any{"op": "call", "tool": "everything.trigger-long-running-operation", "args": map[string]any{"duration": 2, "steps": 4}, "progress": true},
			map[string]any{"op": "call", "tool": "everything.trigger-elicitation-request", "args": map[string]any{}},
			map[string]any{"op": "call", "tool": "everything.trigger-long-running-operation", "args": map[string]any{"duration": 60, "steps": 60}, "cancelAfterProgress": 4},
		},
	})
	var names []string
	for _, tl := range out.Steps[0].Tools {
		names = append(names, tl["name"].(string))
	}
	for _, want := range []string{"everything.echo", "everything.trigger-long-running-operation", "everything.trigger-elicitation-request", "weather.echo"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tool %s missing from %v", want, names)
		}
	}
	if echo := out.Steps[1]; echo.Result == nil || text(echo.Result.Content[0]) != "Echo: through the chain" {
		t.Fatalf("echo = %+v %+v", echo.Result, echo.Error)
	}

	long := out.Steps[2]
	if long.Result == nil || !strings.Contains(text(long.Result.Content[0]), "Long running operation completed") {
		t.Fatalf("long-running = %+v %+v", long.Result, long.Error)
	}
	var pct []float64
	for _, p := range long.Progress {
		if p["total"] == 100.0 {
			pct = append(pct, p["progress"].(float64))
		}
	}
	// server-everything reports 1/4..4/4; the backend makes them percents.
	if len(pct) < 3 || pct[0] != 25 {
		t.Errorf("server-everything progress at the TS client = %v (all %v)", pct, long.Progress)
	}

	el := out.Steps[3]
	if el.Result == nil || el.Error != nil {
		t.Fatalf("elicitation call = %+v %+v", el.Result, el.Error)
	}
	all := ""
	for _, c := range el.Result.Content {
		all += text(c) + "\n"
	}
	if !strings.Contains(all, "User provided the requested information") || !strings.Contains(all, "Name: Ada Lovelace") || !strings.Contains(all, "Favorite Integer: 7") {
		t.Errorf("elicitation result:\n%s", all)
	}
	if len(out.Elicitations) != 1 {
		t.Fatalf("elicitations = %d", len(out.Elicitations))
	}
	// server-everything's form survives MCP → XMPP → MCP whole: its 13
	// properties, with titled, untitled, multi-select and legacy enums.
	props, _ := out.Elicitations[0].RequestedSchema["properties"].(map[string]any)
	b, _ := json.Marshal(props)
	for _, want := range []string{
		`"enumNames":["Cats","Dogs","Birds","Fish","Reptiles"]`,
		`"oneOf":[{"const":"hero-1","title":"Superman"}`,
		`"items":{"anyOf":[{"const":"fish-1","title":"Tuna"}`,
		`"items":{"enum":["Guitar","Piano","Violin","Drums","Bass"],"type":"string"}`,
		`"format":"email"`, `"default":42`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("requested schema lacks %s", want)
		}
	}
	if len(props) != 13 {
		t.Errorf("requested schema has %d properties, want 13: %s", len(props), b)
	}

	cancel := out.Steps[4]
	if !cancel.Cancelled || cancel.Error == nil {
		t.Fatalf("long-running call was not cancelled: %+v", cancel)
	}
	ep, id := taskOf(t, cancel.Progress[0]["_meta"].(map[string]any))
	x.waitState(t, ep, id, "cancelled")
}

func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	x := startE2E(t, false)
	cfg := map[string]any{"mcpServers": map[string]any{"agentgw": map[string]any{
		"command": x.bin, "args": x.mcpArgs(), "env": x.mcpEnv(),
	}}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	cfgPath := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	inspector := filepath.Join(x.root, "node_modules", ".bin", "mcp-inspector-cli")
	run := func(args ...string) map[string]any {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, inspector, append([]string{"--cli", "--config", cfgPath, "--server", "agentgw"}, args...)...)
		// inspector-cli 1.0.3 looks for its package.json at ../package.json
		// relative to the working directory (and imports it relative to
		// itself): run it one level below a directory holding one.
		cmd.Dir = filepath.Join(x.root, "testdata")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		var v map[string]any
		if jerr := json.Unmarshal(stdout, &v); err != nil || jerr != nil {
			t.Fatalf("inspector %v: %v %v\nstdout %s\nstderr %s", args, err, jerr, stdout, tail(stderr.String()))
		}
		return v
	}
	list := run("--method", "tools/list")
	tools, _ := list["tools"].([]any)
	if len(tools) != 5 {
		t.Fatalf("inspector tools/list = %v", list)
	}
	call := run("--method", "tools/call", "--tool-name", "weather.echo", "--tool-arg", "message=from inspector")
	content, _ := call["content"].([]any)
	if len(content) == 0 || !strings.Contains(text(content[0].(map[string]any)), "from inspector") {
		t.Fatalf("inspector tools/call = %v", call)
	}

	// The same against --http with a bearer token.
	url := x.startHTTP(t, "tok-inspector")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, inspector, "--cli", url, "--transport", "http",
		"--header", "Authorization: Bearer tok-inspector", "--method", "tools/list")
	cmd.Dir = filepath.Join(x.root, "testdata")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	var v map[string]any
	if jerr := json.Unmarshal(stdout, &v); err != nil || jerr != nil || len(v["tools"].([]any)) != 5 {
		t.Fatalf("inspector over HTTP: %v %v\nstdout %s\nstderr %s", err, jerr, stdout, tail(stderr.String()))
	}
}

// BenchmarkEchoFullChainVsDirect measures server-everything's echo from the
// TS client: through agentgw mcp → Prosody → agentgw → server-everything,
// and directly over stdio, with Prosody's default settings and with Nagle
// off. Run with -benchtime=1x; each run makes n calls per path inside node
// and reports their percentiles in milliseconds.
func BenchmarkEchoFullChainVsDirect(b *testing.B) {
	for _, c := range []struct {
		name    string
		noNagle bool
	}{{"prosody-default", false}, {"prosody-nagle-off", true}} {
		b.Run(c.name, func(b *testing.B) { benchChain(b, c.noNagle) })
	}
}

func benchChain(b *testing.B, noNagle bool) {
	// The benchmark measures latency, not the gateway's invoke rate limit.
	x := startE2EWith(b, true, noNagle, func(c *config.Config) {
		c.Federation.InvokePerSecond, c.Federation.InvokeBurst = 1e6, 1e6
	})
	entry := filepath.Join(x.root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	n := 300
	if b.N > n {
		n = b.N
	}
	step := func(tool string) map[string]any {
		return map[string]any{"op": "bench", "tool": tool, "args": map[string]any{"message": "hello"}, "n": n, "warmup": 30}
	}
	b.ResetTimer()
	chain := x.runClient(b, 5*time.Minute, map[string]any{
		"transport": "stdio", "command": x.bin, "args": x.mcpArgs("--gateway", x.env.Domain), "env": x.mcpEnv(),
		"steps": []any{step("everything.echo")},
	}).Steps[0]
	direct := x.runClient(b, 5*time.Minute, map[string]any{
		"transport": "stdio", "command": x.node, "args": []string{entry, "stdio"},
		"steps": []any{step("echo")},
	}).Steps[0]
	b.StopTimer()
	b.ReportMetric(chain.P50, "chain-p50-ms")
	b.ReportMetric(chain.P99, "chain-p99-ms")
	b.ReportMetric(direct.P50, "direct-p50-ms")
	b.ReportMetric(direct.P99, "direct-p99-ms")
	b.ReportMetric(chain.P50/direct.P50, "p50-ratio")
	b.ReportMetric(chain.P99/direct.P99, "p99-ratio")
	b.Logf("n=%d chain p50 %.2f ms p99 %.2f ms; direct p50 %.2f ms p99 %.2f ms", chain.N, chain.P50, chain.P99, direct.P50, direct.P99)
}

// A lost XMPP stream ends `agentgw mcp` with an error, so the host can
// restart it.
func TestMCPExitsWhenXMPPStreamEnds(t *testing.T) {
	t.Parallel()
	x := startE2E(t, false)
	cmd := exec.Command(x.bin, x.mcpArgs()...)
	cmd.Env = append(os.Environ(), pwEnv+"="+gatewaytest.Password+"alice")
	stdin, err := cmd.StdinPipe() // held open: only the XMPP side ends
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// It answers initialize once it is logged in and has discovered.
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, `"serverInfo"`) {
		t.Fatalf("initialize: %q %v\n%s", line, err, tail(stderr.String()))
	}
	if err := x.env.Server.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(stderr.String(), "the XMPP connection ended") {
			t.Fatalf("exit = %v\n%s", err, tail(stderr.String()))
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("agentgw mcp kept running after the XMPP server stopped")
	}
}

func TestMCPUsageErrors(t *testing.T) {
	t.Parallel()
	bin := gatewaytest.Binary(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "--jid", "a@b", "--tool-names", "fancy"}, "--tool-names must be mcp or strict"},
		{[]string{"mcp", "--jid", "a@b", "--bearer-env", "X"}, "--bearer-env needs --http"},
		{[]string{"mcp", "--jid", "a@b", "--bearer-file", "x"}, "--bearer-file needs --http"},
		{[]string{"mcp", "--jid", "a@b", "--http", "127.0.0.1:0", "--bearer-env", "X", "--bearer-file", "x"}, "not both"},
		{[]string{"mcp", "--jid", "a@b", "--http", "127.0.0.1:0", "--session-timeout", "0s"}, "--session-timeout must be positive"},
		{[]string{"mcp", "--jid", "a@b", "--http", "0.0.0.0:0"}, "needs --bearer-env"},
		{[]string{"mcp", "--jid", "a@b", "extra"}, "mcp takes no arguments"},
	} {
		cmd := exec.Command(bin, c.args...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: exit %v, output %q; want status 2 and %q", c.args, err, out, c.want)
		}
	}
}

// A host that goes away (stdin closed) mid-call leaves no task running: the
// front cancels it before exiting.
func TestHostExitCancelsTask(t *testing.T) {
	t.Parallel()
	x := startE2E(t, false)
	cmd := exec.Command(x.bin, x.mcpArgs("--gateway", x.env.Domain)...)
	cmd.Env = append(os.Environ(), pwEnv+"="+gatewaytest.Password+"alice")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"weather.wait","arguments":{},"_meta":{"progressToken":"p"}}}`,
	} {
		io.WriteString(stdin, m+"\n")
	}
	rd := bufio.NewReader(stdout)
	var endpoint, taskID string
	for taskID == "" {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("no progress notification: %v\n%s", err, tail(stderr.String()))
		}
		var n struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &n) == nil && n.Method == "notifications/progress" {
			endpoint, taskID = taskOf(t, n.Params.Meta)
		}
	}
	stdin.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("agentgw mcp did not exit after stdin closed")
	}
	x.waitState(t, endpoint, taskID, "cancelled")
}
