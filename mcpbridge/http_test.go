package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
)

const tokenHeader = "X-Agentgw-Test-Token"

// httpServer runs a go-sdk streamable HTTP MCP server on a free loopback
// port that refuses requests without the expected header.
func httpServer(t *testing.T, token string, stateless bool) (url string, rejected *atomic.Int64) {
	return httpServerAt(t, token, stateless, "127.0.0.1:0")
}

func httpServerAt(t *testing.T, token string, stateless bool, addr string) (url string, rejected *atomic.Int64) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "http-test-server", Version: "0.1.0", Title: "HTTP Test"}, nil)
	type echoIn struct {
		Message string `json:"message"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes."}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Message}}}, nil, nil
	})
	srv.AddTool(&mcp.Tool{Name: "count", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)}); err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted"}}}, nil
	})
	// ask needs input: under MCP 2026-07-28 it returns an input request
	// (multi round-trip) and reads the answer from the retried call.
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["color"].(*mcp.ElicitResult); ok {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %v", r.Action, r.Content["color"])}}}, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"color": &mcp.ElicitParams{
			Message:         "Favourite colour?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}, "required": []any{"color"}},
		}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: stateless})
	rejected = &atomic.Int64{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(tokenHeader) != token {
			rejected.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
	addr = serveHTTP(t, addr, handler)
	return "http://" + addr + "/mcp", rejected
}

// serveHTTP serves h on addr until the test ends; it returns the address.
func serveHTTP(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	servers.Store(ln.Addr().String(), hs)
	return ln.Addr().String()
}

// servers lets a test stop the HTTP server on an address.
var servers sync.Map

func TestHTTPBridge(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		version   string
	}{{"stateful", false, "2025-11-25"}, {"stateless", true, "2026-07-28"}} {
		t.Run(tc.name, func(t *testing.T) { testHTTPBridge(t, tc.stateless, tc.version) })
	}
}

func testHTTPBridge(t *testing.T, stateless bool, version string) {
	token := ids.New("tok-")
	t.Setenv("MCPBRIDGE_TEST_TOKEN", token)
	url, rejected := httpServer(t, token, stateless)
	agent := httpAgent(url)
	s := start(t, agent, nil)

	doc := checkManifestValid(t, s.pub.all()[0])
	if doc.Agent.Name != "http-test-server" || doc.Agent.Title != "HTTP Test" || len(doc.Tools) != 3 {
		t.Errorf("manifest: %+v, %d tools", doc.Agent, len(doc.Tools))
	}
	if doc.MCPProtocolVersion != version {
		t.Errorf("mcpProtocolVersion %q, want %q", doc.MCPProtocolVersion, version)
	}

	if got := textOf(t, s.exec(t, "echo", `{"message":"over http"}`, nil).Result); got != "echo: over http" {
		t.Errorf("echo = %q", got)
	}
	r := s.exec(t, "count", `{}`, nil)
	if got := textOf(t, r.Result); got != "counted" || len(r.Updates) != 3 || *r.Updates[2].Percent != 100 || r.Updates[0].Message != "step 1" {
		t.Errorf("count = %q, progress %+v", got, r.Updates)
	}
	ask := newFakeRun()
	ask.Answer = func(req tasks.InputRequest) (json.RawMessage, error) {
		if req.Question != "Favourite colour?" {
			return nil, errAnswer
		}
		return json.RawMessage(`{"color":"teal"}`), nil
	}
	s.exec(t, "ask", `{}`, ask)
	if got := textOf(t, ask.Result); got != "accept teal" {
		t.Errorf("ask = %q (%s)", got, ask.Outcome())
	}
	if rejected.Load() != 0 {
		t.Errorf("%d requests without the header", rejected.Load())
	}
	if strings.Contains(s.logs.String(), token) {
		t.Error("header value in the log")
	}
}

func TestHTTPWrongHeader(t *testing.T) {
	token := ids.New("tok-")
	url, rejected := httpServer(t, token, false)
	t.Setenv("MCPBRIDGE_TEST_TOKEN", token+"-wrong")
	log, _ := testLogger(t)
	b, err := New(func() Options { o := httpAgent(url); o.Logger = log; return o }())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = b.Initialize(ctx)
	if err == nil {
		t.Fatal("initialize succeeded with the wrong header")
	}
	if strings.Contains(err.Error(), token) || rejected.Load() == 0 {
		t.Errorf("err = %v, rejected %d", err, rejected.Load())
	}
	t.Setenv("MCPBRIDGE_TEST_TOKEN", "")
	if err := b.Initialize(ctx); err == nil || !strings.Contains(err.Error(), "MCPBRIDGE_TEST_TOKEN") {
		t.Errorf("missing header variable: %v", err)
	}
}

// Under MCP 2026-07-28 an input request arrives inside its own tools/call,
// so concurrent calls each get their own question.
func TestHTTPConcurrentInputAttributed(t *testing.T) {
	token := ids.New("tok-")
	t.Setenv("MCPBRIDGE_TEST_TOKEN", token)
	url, _ := httpServer(t, token, true)
	s := start(t, httpAgent(url), nil)
	runs := []*fakeRun{newFakeRun(), newFakeRun()}
	release := make(chan struct{})
	for i, color := range []string{"red", "blue"} {
		runs[i].Answer = func(tasks.InputRequest) (json.RawMessage, error) {
			<-release // both questions are open at once
			return json.RawMessage(`{"color":"` + color + `"}`), nil
		}
		go s.b.Execute(context.Background(), tasks.Call{TaskID: color, Tool: "ask", Arguments: json.RawMessage(`{}`)}, runs[i])
	}
	for _, r := range runs {
		select {
		case <-r.InputCh:
		case <-time.After(10 * time.Second):
			t.Fatal("input request not attributed")
		}
	}
	close(release)
	for i, want := range []string{"accept red", "accept blue"} {
		runs[i].Wait(t, 10*time.Second)
		if got := textOf(t, runs[i].Result); got != want {
			t.Errorf("run %d: %q, want %q", i, got, want)
		}
	}
}

// Before 2026-07-28 an elicitation carries nothing tying it to a call. Two
// calls in flight at once each run alone on their own MCP session (the
// pool), so both get their own question while both are open, each answer
// reaches its own call, and nothing is refused as unattributed. (Until
// issue 27 the second call's question was refused.)
func TestHTTPLegacyConcurrentInputAttributed(t *testing.T) {
	token := ids.New("tok-")
	t.Setenv("MCPBRIDGE_TEST_TOKEN", token)
	url, _ := httpServer(t, token, false)
	s := start(t, httpAgent(url), nil)
	runs := []*fakeRun{newFakeRun(), newFakeRun()}
	release := make(chan struct{})
	for i, color := range []string{"green", "purple"} {
		runs[i].Answer = func(tasks.InputRequest) (json.RawMessage, error) {
			select { // both questions are open at once
			case <-release:
			case <-time.After(30 * time.Second):
			}
			return json.RawMessage(`{"color":"` + color + `"}`), nil
		}
		go s.b.Execute(context.Background(), tasks.Call{TaskID: color, Tool: "ask", Arguments: json.RawMessage(`{}`)}, runs[i])
	}
	for i, r := range runs {
		select {
		case <-r.InputCh:
		case <-time.After(20 * time.Second):
			close(release)
			t.Fatalf("call %d: no input request while the other's is open", i)
		}
	}
	close(release)
	for i, want := range []string{"accept green", "accept purple"} {
		runs[i].Wait(t, 20*time.Second)
		if got := textOf(t, runs[i].Result); got != want || len(runs[i].Inputs) != 1 {
			t.Errorf("run %d: %q after %d input requests, want %q after 1", i, got, len(runs[i].Inputs), want)
		}
	}
	if slices.Contains(s.b.SemanticLosses(), agentproto.CodeUnattributedElicitation) {
		t.Errorf("losses %v", s.b.SemanticLosses())
	}
}

// An HTTP server that goes away is noticed by the health pings; when it is
// back the bridge reconnects.
func TestHTTPServerDownAndBack(t *testing.T) {
	token := ids.New("tok-")
	t.Setenv("MCPBRIDGE_TEST_TOKEN", token)
	url, _ := httpServer(t, token, false)
	s := start(t, httpAgent(url),
		func(o *Options) { o.HealthInterval = 100 * time.Millisecond })
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	hs, _ := servers.Load(addr)
	hs.(*http.Server).Close()
	select {
	case up := <-s.avail.ch:
		if up {
			t.Fatal("up, want down")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server loss not noticed")
	}
	r := s.exec(t, "echo", `{"message":"x"}`, nil)
	if r.Failure == nil || r.Failure.Code != agentproto.CodeUnavailable || !r.Failure.Retryable {
		t.Errorf("call while down: %s", r.Outcome())
	}
	httpServerAt(t, token, false, addr)
	s.waitUp(t, 30*time.Second)
	if got := textOf(t, s.exec(t, "echo", `{"message":"back"}`, nil).Result); got != "echo: back" {
		t.Errorf("echo = %q", got)
	}
}
