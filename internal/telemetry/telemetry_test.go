package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func record(t testing.TB) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { Use(nil) })
	return rec
}

var traceparent = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)

// The W3C trace context reaches a real HTTP peer, naming the span of the
// request's context as the parent.
func TestTransportPropagatesTraceContext(t *testing.T) {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
	}))
	defer srv.Close()
	c := &http.Client{Transport: Transport(nil)}
	send := func(ctx context.Context) string {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-got
	}
	if h := send(context.Background()); h != "" {
		t.Fatalf("traceparent sent with tracing off: %q", h)
	}
	record(t)
	ctx, sp := Start(context.Background(), Backend)
	defer sp.End()
	h := send(ctx)
	m := traceparent.FindStringSubmatch(h)
	sc := sp.s.SpanContext()
	if m == nil || m[1] != sc.TraceID().String() || m[2] != sc.SpanID().String() {
		t.Fatalf("traceparent %q, want trace %s parent %s", h, sc.TraceID(), sc.SpanID())
	}
}

// A task's later stages are children of the span bound to it.
func TestTaskStagesAreChildrenOfTheBoundSpan(t *testing.T) {
	rec := record(t)
	ctx, root := Start(context.Background(), Stanza)
	Bind(ctx, "task-1")
	_, d := StartTask(context.Background(), "task-1", Dispatch)
	d.End()
	Forget("task-1")
	_, orphan := StartTask(context.Background(), "task-1", EventSend)
	orphan.End()
	root.End()
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	if spans[0].Name() != Dispatch || spans[0].Parent().SpanID() != root.s.SpanContext().SpanID() {
		t.Fatalf("dispatch span %s has parent %s, want %s", spans[0].Name(), spans[0].Parent().SpanID(), root.s.SpanContext().SpanID())
	}
	if spans[1].Parent().IsValid() {
		t.Fatal("a forgotten task's stage still has a parent")
	}
}

func TestOffAllocatesNothing(t *testing.T) {
	Use(nil)
	ctx := context.Background()
	n := testing.AllocsPerRun(1000, func() {
		c, sp := Start(ctx, Transition)
		sp.Str(AttrState, "running")
		_, s2 := StartTask(c, "task-1", EventSend)
		Bind(c, "task-1")
		s2.End()
		sp.End()
		Forget("task-1")
	})
	if n != 0 {
		t.Fatalf("%v allocations per stage with tracing off", n)
	}
}

// sink keeps the compiler from removing the measured work.
var sink int

// work is a stand-in for a stage's own work, the same in both loops (not
// inlined, so the compiler cannot treat the two loops differently).
//
//go:noinline
func work(ctx context.Context) int {
	n := 0
	for i := range 64 {
		n += i ^ len(Transition)
	}
	if ctx == nil {
		n++
	}
	return n
}

// BenchmarkStageOffVsBare times a stage instrumented with tracing off
// against the same stage without instrumentation, alternating in the same
// loop; off-x-bare is the cost of the instrumentation when off.
func BenchmarkStageOffVsBare(b *testing.B) {
	Use(nil)
	ctx := context.Background()
	const n = 1000
	var bare, off time.Duration
	b.ReportAllocs()
	bareLoop := func() time.Duration {
		t0 := time.Now()
		for range n {
			sink += work(ctx)
		}
		return time.Since(t0)
	}
	offLoop := func() time.Duration {
		t0 := time.Now()
		for range n {
			c, sp := Start(ctx, Transition)
			sink += work(c)
			sp.End()
		}
		return time.Since(t0)
	}
	i := 0
	for b.Loop() {
		// Alternate which goes first, so neither always runs warm.
		if i++; i%2 == 0 {
			bare += bareLoop()
			off += offLoop()
		} else {
			off += offLoop()
			bare += bareLoop()
		}
	}
	per := float64(b.N) * n
	b.ReportMetric(float64(bare.Nanoseconds())/per, "bare-ns/stage")
	b.ReportMetric(float64(off.Nanoseconds())/per, "off-ns/stage")
	b.ReportMetric(float64(off)/float64(bare), "off-x-bare")
}

// BenchmarkStageOn is the same stage recorded (for scale).
func BenchmarkStageOn(b *testing.B) {
	record(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, sp := Start(ctx, Transition)
		sink += work(c)
		sp.End()
	}
}

// Setup exports spans over OTLP/HTTP to a real HTTP receiver, and its
// shutdown flushes them and turns tracing off.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	shutdown, err := Setup(context.Background(), Options{Endpoint: srv.URL, ServiceName: "agentgw-test", SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !Enabled() {
		t.Fatal("Setup did not turn tracing on")
	}
	_, sp := Start(context.Background(), Stanza)
	sp.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if Enabled() {
		t.Fatal("tracing still on after shutdown")
	}
	select {
	case r := <-got:
		if r != "POST /v1/traces application/x-protobuf" {
			t.Fatalf("collector received %q", r)
		}
	default:
		t.Fatal("no export reached the collector")
	}
	if _, err := Setup(context.Background(), Options{}); err == nil {
		t.Fatal("Setup without an endpoint succeeded")
	}
}
