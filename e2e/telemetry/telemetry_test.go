// The tests of this area run one at a time (no t.Parallel): tracing is
// process-wide (telemetry.Use, telemetry.Enabled), and a gateway that
// starts or stops in a parallel test would switch it under another.

package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/telemetry"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// recordSpans sends the process's spans to an in-memory recorder for the
// rest of the test.
func recordSpans(t testing.TB) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	telemetry.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { telemetry.Use(nil) })
	return rec
}

// spanArg is the echo argument that no span may carry.
const spanArg = "span-arg-Z7Q4"

var traceparentRe = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

// One real invoke through Prosody to an MCP server over streamable HTTP:
// every stage of the call is a span of one trace, the later stages are
// children of the IQ's span, and the MCP server receives the W3C trace
// context of the backend-call span on its tools/call request.
func TestTelemetrySpansOfOneInvoke(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "traced", Version: "1"}, nil)
	type echoIn struct {
		Message string `json:"message"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes."}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mu sync.Mutex
	var callParents []string // traceparent of each request carrying tools/call
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tp := r.Header.Get("traceparent"); tp != "" {
			mu.Lock()
			callParents = append(callParents, tp)
			mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	e, c, _, ep := e2e.AccStart(t, "traced", func(d string) string {
		return fmt.Sprintf("\n[[agents]]\njid = \"traced@%s\"\n[agents.mcp]\nurl = %q\n", d, "http://"+ln.Addr().String()+"/mcp")
	})
	if e.Config.Telemetry.Traces != "off" {
		t.Fatalf("tracing is not off by default: %q", e.Config.Telemetry.Traces)
	}
	mu.Lock()
	if len(callParents) != 0 {
		t.Fatalf("trace context sent with tracing off: %q", callParents)
	}
	mu.Unlock()
	rec := recordSpans(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"`+spanArg+`"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" {
		t.Fatalf("call: %v %+v", err, out)
	}
	// The completed event's span ends just after the message is queued.
	var spans []sdktrace.ReadOnlySpan
	testkit.WaitFor(t, 10*time.Second, "the event-send span of the completed event", func() bool {
		spans = rec.Ended()
		for _, s := range spans {
			for _, a := range s.Attributes() {
				if a.Key == telemetry.AttrEvent && a.Value.AsString() == "completed" {
					return true
				}
			}
		}
		return false
	})

	// Spans carry identifiers, never the call's arguments or result.
	for _, sp := range spans {
		for _, a := range sp.Attributes() {
			if strings.Contains(a.Value.Emit(), spanArg) {
				t.Errorf("span %s attribute %s carries the argument", sp.Name(), a.Key)
			}
		}
		if strings.Contains(sp.Status().Description, spanArg) || strings.Contains(sp.Name(), spanArg) {
			t.Errorf("span %s carries the argument", sp.Name())
		}
	}
	// The invoke's own stanza span is the one the admission hangs from.
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == telemetry.AdmitCommit {
			for _, p := range spans {
				if p.SpanContext().SpanID() == s.Parent().SpanID() {
					root = p
				}
			}
		}
	}
	if root == nil || root.Name() != telemetry.Stanza || root.Parent().IsValid() {
		t.Fatalf("the admission commit has no root stanza span (spans: %v)", names(spans))
	}
	trace := root.SpanContext().TraceID()
	count := map[string]int{}
	var backend sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID() != trace {
			continue // other stanzas: presence, disco, the manifest fetch
		}
		count[s.Name()]++
		if s.Name() != telemetry.Stanza && s.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("span %s is not a child of the invoke's stanza span", s.Name())
		}
		if s.Name() == telemetry.Backend {
			backend = s
		}
		for _, a := range s.Attributes() {
			if a.Key == telemetry.AttrTask && a.Value.AsString() != out.Accepted.TaskID {
				t.Errorf("span %s names task %s, want %s", s.Name(), a.Value.AsString(), out.Accepted.TaskID)
			}
		}
	}
	// accepted → running and running → completed are the two transitions,
	// each with its event.
	want := map[string]int{telemetry.Stanza: 1, telemetry.Decode: 1, telemetry.Authorize: 1, telemetry.AdmitCommit: 1,
		telemetry.Dispatch: 1, telemetry.Backend: 1, telemetry.Transition: 2, telemetry.EventSend: 2}
	for name, n := range want {
		if count[name] != n {
			t.Errorf("%d spans %s in the invoke's trace, want %d (all: %v)", count[name], name, n, count)
		}
	}
	if backend == nil {
		t.Fatal("no backend span")
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, tp := range callParents {
		m := traceparentRe.FindStringSubmatch(tp)
		if m == nil {
			t.Errorf("malformed traceparent %q", tp)
			continue
		}
		if m[1] == trace.String() && m[2] == backend.SpanContext().SpanID().String() {
			found = true
		}
	}
	if !found {
		t.Errorf("the MCP server never received the backend span's trace context (got %q, want trace %s parent %s)",
			callParents, trace, backend.SpanContext().SpanID())
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name())
	}
	return n
}

// An A2A backend (the official JS SDK's server) receives the W3C trace
// context of the backend-call span of a real invoke through Prosody.
func TestTelemetryTraceContextToA2A(t *testing.T) {
	agent := e2e.StartA2AAgent(t, `{}`)
	_, c, _, ep := e2e.AccStart(t, "remote", func(d string) string { return e2e.A2ATOML(d, agent.URL+"/.well-known/agent-card.json") })
	rec := recordSpans(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"text":"hello"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" {
		t.Fatalf("call: %v %+v", err, out)
	}
	var backend sdktrace.ReadOnlySpan
	testkit.WaitFor(t, 10*time.Second, "the backend span", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == telemetry.Backend {
				backend = s
				return true
			}
		}
		return false
	})
	want := backend.SpanContext()
	agent.Mu.Lock()
	got := append([]string(nil), agent.Traceparents...)
	agent.Mu.Unlock()
	for _, tp := range got {
		if m := traceparentRe.FindStringSubmatch(tp); m != nil && m[1] == want.TraceID().String() && m[2] == want.SpanID().String() {
			return
		}
	}
	t.Fatalf("the A2A agent received %q, want trace %s parent %s", got, want.TraceID(), want.SpanID())
}

// [telemetry] traces = "otlp" in the config: the gateway exports the spans
// of a real call to an OTLP/HTTP receiver, and flushes them when it stops.
func TestTelemetryOTLPFromConfig(t *testing.T) {
	var mu sync.Mutex
	var posts []string
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts = append(posts, r.Method+" "+r.URL.Path)
		mu.Unlock()
	}))
	defer col.Close()
	t.Cleanup(func() { telemetry.Use(nil) })
	e := e2e.Start(t, e2e.Options{Users: []string{"alice"}, TOML: e2e.EverythingTOML(t, "everything", "agents.example.test"),
		Mutate: func(c *config.Config) {
			c.Telemetry.Traces, c.Telemetry.OTLPEndpoint = config.TracesOTLP, col.URL
		}})
	c := e.Dial("alice")
	ep := e.Endpoint("everything")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testkit.WaitFor(t, 60*time.Second, "the echo tool", func() bool { _, err := c.Pin(ctx, ep, "echo"); return err == nil })
	if !telemetry.Enabled() {
		t.Fatal("tracing is not on")
	}
	out, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"hello"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" {
		t.Fatalf("call: %v %+v", err, out)
	}
	e.StopGateway()
	if telemetry.Enabled() {
		t.Error("tracing still on after the gateway stopped")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) == 0 || posts[0] != "POST /v1/traces" {
		t.Fatalf("the collector received %q", posts)
	}
}
