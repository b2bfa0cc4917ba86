package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
)

const (
	legacy  = "2025-11-25"
	current = "" // the SDK's newest, 2026-07-28 (multi round-trip)
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func tool(name, input string) agentclient.ManifestTool {
	return agentclient.ManifestTool{Name: name, InputSchema: json.RawMessage(input)}
}

const objSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`

// echoRun completes with the arguments as text and as structured content.
func echoRun(t *fakeTask) {
	t.status("running")
	var a struct{ Text string }
	json.Unmarshal(t.args, &a)
	res, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": "echo: " + a.Text}},
		"structuredContent": map[string]any{"text": a.Text},
		"_meta":             map[string]any{"x": 1},
	})
	t.complete(string(res))
}

func newFront(t *testing.T, fa *fakeAgents, opts Options) *Front {
	t.Helper()
	opts.Logger = quiet()
	if opts.Refresh == 0 {
		opts.Refresh = -1
	}
	if opts.CancelWait == 0 {
		opts.CancelWait = 5 * time.Second
	}
	f := New(fa, opts)
	if _, err := f.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	return f
}

func connect(t *testing.T, f *Front, copts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := f.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if copts == nil {
		copts = &mcp.ClientOptions{}
	}
	copts.Logger = quiet()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, copts)
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

func listNames(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	out := map[string]*mcp.Tool{}
	for tl, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out[tl.Name] = tl
	}
	return out
}

func TestToolsListedWithPinsAndPages(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	fc := tool("forecast.get", objSchema)
	fc.Title = "Get Forecast"
	fc.Description = "Gets a forecast."
	fc.Annotations = json.RawMessage(`{"readOnlyHint":true,"destructiveHint":false}`)
	fc.Execution = json.RawMessage(`{"taskSupport":"optional"}`)
	fc.Meta = json.RawMessage(`{"vendor/x":"y"}`)
	fc.OutputSchema = json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"}}}`)
	fa.addEndpoint("agents.example.test", "weather@agents.example.test", &fakeEP{version: "1.4.0", tools: []agentclient.ManifestTool{fc, tool("echo", objSchema)}, run: echoRun})
	fa.addEndpoint("agents.other.test", "weather@agents.other.test", &fakeEP{version: "2", tools: []agentclient.ManifestTool{tool("forecast.get", objSchema)}, run: echoRun})
	// Not presentable: array root.
	fa.addEndpoint("agents.other.test", "odd@agents.other.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("list", `{"type":"array"}`)}, run: echoRun})

	f := newFront(t, fa, Options{ListPageSize: 2})
	cs := connect(t, f, nil, legacy)

	first, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Tools) != 2 || first.NextCursor == "" {
		t.Fatalf("first page: %d tools, cursor %q; want 2 and a cursor", len(first.Tools), first.NextCursor)
	}
	got := listNames(t, cs)
	if len(got) != 3 {
		t.Fatalf("tools = %v, want 3", slices.Sorted(mapKeys(got)))
	}
	echo := got["weather.echo"]
	if echo == nil {
		t.Fatalf("no weather.echo in %v", slices.Sorted(mapKeys(got)))
	}
	var collided []*mcp.Tool
	for name, tl := range got {
		if strings.HasPrefix(name, "weather.forecast.get-") {
			collided = append(collided, tl)
		}
		if !validName(name, NamesMCP) {
			t.Errorf("invalid MCP name %q", name)
		}
	}
	if len(collided) != 2 {
		t.Fatalf("both forecast.get tools should carry a suffix, got %v", slices.Sorted(mapKeys(got)))
	}
	var w *mcp.Tool
	for _, tl := range collided {
		if m := tl.Meta[MetaTool].(map[string]any); m["endpoint"] == "weather@agents.example.test" {
			w = tl
		}
	}
	if w == nil {
		t.Fatal("no tool pinned to weather@agents.example.test")
	}
	m := w.Meta[MetaTool].(map[string]any)
	if m["version"] != "1.4.0" || m["manifestHash"] != "hash-1.4.0" || m["tool"] != "forecast.get" {
		t.Errorf("pins in _meta = %v", m)
	}
	if ex, _ := json.Marshal(m["execution"]); string(ex) != `{"taskSupport":"optional"}` {
		t.Errorf("execution kept in _meta = %s", ex)
	}
	if w.Meta["vendor/x"] != "y" {
		t.Errorf("tool _meta not preserved: %v", w.Meta)
	}
	if w.Title != "Get Forecast" || w.Description != "Gets a forecast." {
		t.Errorf("title/description = %q / %q", w.Title, w.Description)
	}
	if w.Annotations == nil || !w.Annotations.ReadOnlyHint || w.Annotations.DestructiveHint == nil || *w.Annotations.DestructiveHint {
		t.Errorf("annotations = %+v", w.Annotations)
	}
	if !sameJSON(t, w.InputSchema, objSchema) {
		t.Errorf("inputSchema = %v", w.InputSchema)
	}
	if w.OutputSchema == nil {
		t.Error("outputSchema dropped")
	}
}

// sameJSON compares a decoded value with JSON text, ignoring key order.
func sameJSON(t *testing.T, v any, want string) bool {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(v)
	b, _ := json.Marshal(w)
	return string(a) == string(b)
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestListChangedOnlyOnChange(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	fa.addEndpoint("agents.example.test", "weather@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("echo", objSchema)}, run: echoRun})
	f := newFront(t, fa, Options{})
	notes := make(chan struct{}, 10)
	cs := connect(t, f, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { notes <- struct{}{} }}, legacy)
	listNames(t, cs)

	changed, err := f.Refresh(t.Context())
	if err != nil || changed {
		t.Fatalf("Refresh without change: changed=%v err=%v", changed, err)
	}
	// An unchanged endpoint is not fetched again.
	if n := countPrefix(fa.log(), "manifest "); n != 1 {
		t.Errorf("manifest fetched %d times, want 1", n)
	}

	fa.setVersion("weather@agents.example.test", "2", nil)
	changed, err = f.Refresh(t.Context())
	if err != nil || !changed {
		t.Fatalf("Refresh after activation: changed=%v err=%v", changed, err)
	}
	waitNote(t, notes)
	tl := listNames(t, cs)["weather.echo"]
	if tl == nil || tl.Meta[MetaTool].(map[string]any)["version"] != "2" {
		t.Fatalf("after activation the tool is %+v", tl)
	}
	// Exactly one notification for the one change: nothing else is queued
	// once a later change's notification arrives.
	fa.mu.Lock()
	fa.eps["weather@agents.example.test"].hidden = true
	fa.mu.Unlock()
	if changed, _ := f.Refresh(t.Context()); !changed {
		t.Fatal("hiding the endpoint did not change the tool set")
	}
	waitNote(t, notes)
	if len(notes) != 0 {
		t.Errorf("%d extra list_changed notifications", len(notes))
	}
	if got := listNames(t, cs); len(got) != 0 {
		t.Errorf("hidden endpoint still listed: %v", slices.Sorted(mapKeys(got)))
	}
}

func countPrefix(ops []string, p string) int {
	n := 0
	for _, o := range ops {
		if strings.HasPrefix(o, p) {
			n++
		}
	}
	return n
}

func waitNote(t *testing.T, ch chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed")
	}
}

func TestUnreachableGatewayKeepsTools(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	fa.addEndpoint("agents.example.test", "weather@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("echo", objSchema)}, run: echoRun})
	f := newFront(t, fa, Options{})
	fa.mu.Lock()
	fa.listErr = errors.New("timeout")
	fa.mu.Unlock()
	changed, err := f.Refresh(t.Context())
	if err == nil || changed {
		t.Fatalf("Refresh with a failing listing: changed=%v err=%v", changed, err)
	}
	if got := f.Tools(); !slices.Equal(got, []string{"weather.echo"}) {
		t.Errorf("tools after a failed listing = %v", got)
	}
}

func callTool(t *testing.T, cs *mcp.ClientSession, ctx context.Context, name string, args any, token any) (*mcp.CallToolResult, error) {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		p.Meta = mcp.Meta{"progressToken": token}
	}
	return cs.CallTool(ctx, p)
}

func TestCallCompleted(t *testing.T) {
	t.Parallel()
	for _, v := range []string{legacy, current} {
		t.Run("protocol="+v, func(t *testing.T) {
			fa := newFake(t)
			fa.addEndpoint("agents.example.test", "echo@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("echo", objSchema)}, run: echoRun})
			f := newFront(t, fa, Options{})
			cs := connect(t, f, nil, v)
			res, err := callTool(t, cs, t.Context(), "echo.echo", map[string]any{"text": "hi"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "echo: hi" {
				t.Fatalf("result = %+v", res)
			}
			sc, _ := json.Marshal(res.StructuredContent)
			if string(sc) != `{"text":"hi"}` {
				t.Errorf("structuredContent = %s", sc)
			}
			if res.Meta["x"] != float64(1) {
				t.Errorf("result _meta not passed through: %v", res.Meta)
			}
			task := res.Meta[MetaTask].(map[string]any)
			if task["state"] != "completed" || !strings.HasPrefix(task["taskId"].(string), "task-") || task["endpoint"] != "echo@agents.example.test" {
				t.Errorf("task meta = %v", task)
			}
		})
	}
}

func TestCallInvalidArgumentsIsToolError(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	fa.addEndpoint("agents.example.test", "echo@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("echo", objSchema)}, run: echoRun})
	f := newFront(t, fa, Options{})
	cs := connect(t, f, nil, legacy)
	res, err := callTool(t, cs, t.Context(), "echo.echo", map[string]any{"txt": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "input schema") {
		t.Fatalf("result = %+v", res)
	}
	if n := countPrefix(fa.log(), "invoke "); n != 0 {
		t.Errorf("invalid arguments were sent (%d invokes)", n)
	}
}

func TestCallStaleVersionRefreshes(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	fa.addEndpoint("agents.example.test", "echo@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("echo", objSchema)}, run: echoRun})
	f := New(fa, Options{Logger: quiet(), Refresh: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f.initial(ctx)
	go f.poll(ctx)
	cs := connect(t, f, nil, legacy)
	fa.setVersion("echo@agents.example.test", "2", nil)
	_, err := callTool(t, cs, t.Context(), "echo.echo", map[string]any{"text": "x"}, nil)
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != CodeAgentUnavailable {
		t.Fatalf("stale pin: err = %v, want code %d", err, CodeAgentUnavailable)
	}
	// The failure kicked a refresh: the tool is pinned to version 2.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if tl := listNames(t, cs)["echo.echo"]; tl != nil && tl.Meta[MetaTool].(map[string]any)["version"] == "2" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the tool was not re-pinned after item-not-found")
}

func TestProgressReachesHost(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	fa.addEndpoint("agents.example.test", "slow@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("work", `{"type":"object"}`)}, run: func(t *fakeTask) {
		t.status("running")
		t.progress(10, "ten")
		t.progress(5, "backwards") // XMPP percent may not go down; MCP progress must not
		t.progress(60, "sixty")
		t.complete(`{"content":[]}`)
	}})
	f := newFront(t, fa, Options{})
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cs := connect(t, f, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, r.Params)
		mu.Unlock()
	}}, legacy)
	if _, err := callTool(t, cs, t.Context(), "slow.work", map[string]any{}, "tok-1"); err != nil {
		t.Fatal(err)
	}
	// Notifications are asynchronous to the result; wait for all five.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 5 {
		t.Fatalf("got %d progress notifications, want 5 (accepted, running, 3 progress)", len(got))
	}
	last := -1.0
	var msgs []string
	for _, p := range got {
		if p.ProgressToken != "tok-1" {
			t.Errorf("token = %v", p.ProgressToken)
		}
		if p.Progress <= last {
			t.Errorf("progress went from %v to %v", last, p.Progress)
		}
		last = p.Progress
		msgs = append(msgs, p.Message)
		if tm, _ := p.Meta[MetaTask].(map[string]any); tm == nil || tm["taskId"] == "" {
			t.Errorf("progress without task meta: %v", p.Meta)
		}
	}
	if got[2].Progress != 10 || got[2].Total != 100 || got[4].Progress != 60 {
		t.Errorf("percent not carried: %v %v %v", got[2].Progress, got[2].Total, got[4].Progress)
	}
	if !strings.Contains(strings.Join(msgs, "|"), "backwards") {
		t.Errorf("messages = %q", msgs)
	}
}

const unitSchema = `{"type":"object","properties":{"unit":{"enum":["C","F"]},"code":{"type":"string","pattern":"^[A-Z]{3}$"}},"required":["unit"]}`

// askRun asks for a unit and completes with the answer.
func askRun(t *fakeTask) {
	t.status("running")
	v, ok := t.ask("Which unit?", unitSchema)
	if !ok {
		t.emit("cancelled", map[string]any{"reason": "cancelled by caller"})
		return
	}
	t.complete(`{"content":[{"type":"text","text":` + strconvQuote(string(v)) + `}]}`)
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestElicitationRoundTrip(t *testing.T) {
	t.Parallel()
	for _, v := range []string{legacy, current} {
		t.Run("protocol="+v, func(t *testing.T) {
			fa := newFake(t)
			fa.addEndpoint("agents.example.test", "weather@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("ask", `{"type":"object"}`)}, run: askRun})
			f := newFront(t, fa, Options{})
			var mu sync.Mutex
			var asked []*mcp.ElicitParams
			// The first answer fits the form but not the XMPP schema's
			// pattern, which the form cannot express.
			answers := []map[string]any{{"unit": "C", "code": "abc"}, {"unit": "C", "code": "ABC"}}
			cs := connect(t, f, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, r.Params)
				a := answers[0]
				answers = answers[1:]
				return &mcp.ElicitResult{Action: "accept", Content: a}, nil
			}}, v)
			res, err := callTool(t, cs, t.Context(), "weather.ask", map[string]any{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || res.Content[0].(*mcp.TextContent).Text != `{"code":"ABC","unit":"C"}` {
				t.Fatalf("result = %+v", res)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 2 {
				t.Fatalf("asked %d times, want 2 (one refused answer)", len(asked))
			}
			if !strings.Contains(asked[0].Message, "weather@agents.example.test") || !strings.Contains(asked[0].Message, "Which unit?") {
				t.Errorf("message = %q", asked[0].Message)
			}
			if !strings.Contains(asked[1].Message, "not accepted") {
				t.Errorf("second message does not say why: %q", asked[1].Message)
			}
			if !sameJSON(t, asked[0].RequestedSchema, `{"type":"object","properties":{"unit":{"type":"string","enum":["C","F"]},"code":{"type":"string"}},"required":["unit"]}`) {
				t.Errorf("requestedSchema = %v", asked[0].RequestedSchema)
			}
			if ops := fa.log(); countPrefix(ops, `input {"code":"ABC","unit":"C"}`) != 1 || countPrefix(ops, "input ") != 1 {
				t.Errorf("ops = %q", ops)
			}
		})
	}
}

func rpcCode(err error) int64 {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

func TestInputWithoutElicitationCancels(t *testing.T) {
	t.Parallel()
	for _, v := range []string{legacy, current} {
		t.Run("protocol="+v, func(t *testing.T) {
			fa := newFake(t)
			fa.addEndpoint("agents.example.test", "weather@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("ask", `{"type":"object"}`)}, run: askRun})
			f := newFront(t, fa, Options{})
			cs := connect(t, f, nil, v)
			_, err := callTool(t, cs, t.Context(), "weather.ask", map[string]any{}, nil)
			if rpcCode(err) != CodeInputUnavailable || !strings.Contains(err.Error(), "cannot answer elicitation") {
				t.Fatalf("err = %v", err)
			}
			if countPrefix(fa.log(), "cancel ask") != 1 {
				t.Errorf("ops = %q", fa.log())
			}
		})
	}
}

func TestDeclineCancels(t *testing.T) {
	t.Parallel()
	for _, v := range []string{legacy, current} {
		t.Run("protocol="+v, func(t *testing.T) {
			fa := newFake(t)
			fa.addEndpoint("agents.example.test", "weather@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("ask", `{"type":"object"}`)}, run: askRun})
			f := newFront(t, fa, Options{})
			cs := connect(t, f, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}}, v)
			_, err := callTool(t, cs, t.Context(), "weather.ask", map[string]any{}, nil)
			if rpcCode(err) != CodeInputUnavailable || !strings.Contains(err.Error(), "declined") {
				t.Fatalf("err = %v", err)
			}
			var te *jsonrpc.Error
			errors.As(err, &te)
			var data map[string]taskMeta
			json.Unmarshal(te.Data, &data)
			if data[MetaTask].State != "cancelled" {
				t.Errorf("error data = %s", te.Data)
			}
		})
	}
}

func TestHostCancellationCancelsTask(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	var task *fakeTask
	started := make(chan struct{})
	fa.addEndpoint("agents.example.test", "slow@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("wait", `{"type":"object"}`)}, run: func(t *fakeTask) {
		task = t
		t.status("running")
		t.progress(1, "started")
		close(started)
		<-t.cancelled
		t.emit("cancelled", map[string]any{"reason": "asked"})
	}})
	f := newFront(t, fa, Options{})
	cs := connect(t, f, nil, legacy)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := callTool(t, cs, ctx, "slow.wait", map[string]any{}, nil)
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("cancelled call returned no error")
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, _ := fa.State(t.Context(), jid.MustParse("slow@agents.example.test"), task.id)
		if st.State == "cancelled" {
			if countPrefix(fa.log(), "cancel wait") != 1 {
				t.Errorf("ops = %q", fa.log())
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the XMPP task did not end cancelled after the host cancelled")
}

func TestFailedAndAgentCancelled(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	fa.addEndpoint("agents.example.test", "x@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("fail", `{"type":"object"}`), tool("drop", `{"type":"object"}`)}, run: func(t *fakeTask) {
		if t.tool == "fail" {
			t.fail("com.example:quota", "Quota\nexceeded")
			return
		}
		t.emit("cancelled", map[string]any{"reason": "shutting down"})
	}})
	f := newFront(t, fa, Options{})
	cs := connect(t, f, nil, legacy)
	res, err := callTool(t, cs, t.Context(), "x.fail", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Content[0].(*mcp.TextContent).Text != "The XMPP task failed: com.example:quota: Quota exceeded" {
		t.Errorf("failed result = %+v", res.Content[0])
	}
	_, err = callTool(t, cs, t.Context(), "x.drop", map[string]any{}, nil)
	if rpcCode(err) != CodeTaskCancelled || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("agent-cancelled err = %v", err)
	}
}

func TestWrappedElicitation(t *testing.T) {
	t.Parallel()
	const nested = `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"integer"}},"required":["b"]}},"required":["a"]}`
	fa := newFake(t)
	fa.addEndpoint("agents.example.test", "x@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("nest", `{"type":"object"}`)}, run: func(t *fakeTask) {
		v, ok := t.ask("Nested?", nested)
		if !ok {
			t.emit("cancelled", map[string]any{})
			return
		}
		t.complete(`{"content":[{"type":"text","text":` + strconvQuote(string(v)) + `}]}`)
	}})
	f := newFront(t, fa, Options{})
	cs := connect(t, f, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"json": ` {"a":{"b":7}} `}}, nil
	}}, legacy)
	res, err := callTool(t, cs, t.Context(), "x.nest", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != `{"a":{"b":7}}` {
		t.Errorf("provided input = %s", got)
	}
}

// Cancellation is advisory in XMPP: an agent that completes after the
// cancel was accepted wins, and the host gets that result.
func TestCancelRaceCompletedWins(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	fa.addEndpoint("agents.example.test", "x@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("stubborn", `{"type":"object"}`)}, run: func(t *fakeTask) {
		if _, ok := t.ask("Anything?", `{"type":"object"}`); !ok {
			t.complete(`{"content":[{"type":"text","text":"done anyway"}]}`)
		}
	}})
	f := newFront(t, fa, Options{})
	cs := connect(t, f, nil, legacy) // no elicitation: the front cancels
	res, err := callTool(t, cs, t.Context(), "x.stubborn", map[string]any{}, nil)
	if err != nil {
		t.Fatalf("err = %v, want the completed result", err)
	}
	if res.Content[0].(*mcp.TextContent).Text != "done anyway" || countPrefix(fa.log(), "cancel stubborn") != 1 {
		t.Errorf("result = %+v, ops = %q", res.Content[0], fa.log())
	}
}
