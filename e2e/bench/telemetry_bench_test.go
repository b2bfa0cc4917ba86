package bench

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentgw/agentgw/internal/telemetry"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// stageRecorder is an in-process span processor that keeps, per stage,
// the durations of the spans that ended. Transitions and events are told
// apart by the state or event type they carry.
type stageRecorder struct {
	mu  sync.Mutex
	dur map[string]latSample
	// Per trace, the admission commit's span and the running transition's,
	// to tell whether the move to running shared the admission's
	// transaction (its span inside the admission commit's).
	admit, running map[trace.TraceID]span
}

type span struct{ start, end time.Time }

// runningInAdmission is the share of running transitions, in %, whose span
// lies inside their call's admission commit span.
func (r *stageRecorder) runningInAdmission() float64 {
	in, n := 0, 0
	for id, run := range r.running {
		n++
		if a, ok := r.admit[id]; ok && !run.start.Before(a.start) && !run.end.After(a.end) {
			in++
		}
	}
	if n == 0 {
		return 0
	}
	return 100 * float64(in) / float64(n)
}

func (r *stageRecorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (r *stageRecorder) Shutdown(context.Context) error                  { return nil }
func (r *stageRecorder) ForceFlush(context.Context) error                { return nil }

func (r *stageRecorder) OnEnd(s sdktrace.ReadOnlySpan) {
	key := stageKey(s)
	if key == "" {
		return
	}
	r.mu.Lock()
	r.dur[key] = append(r.dur[key], s.EndTime().Sub(s.StartTime()))
	sp := span{s.StartTime(), s.EndTime()}
	switch key {
	case "admission-commit":
		r.admit[s.SpanContext().TraceID()] = sp
	case "transition-running":
		r.running[s.SpanContext().TraceID()] = sp
	}
	r.mu.Unlock()
}

// stageKey names a span's row in the breakdown; "" for spans of stanzas
// other than IQs (presence, messages).
func stageKey(s sdktrace.ReadOnlySpan) string {
	attr := func(k string) string {
		for _, a := range s.Attributes() {
			if string(a.Key) == k {
				return a.Value.AsString()
			}
		}
		return ""
	}
	switch s.Name() {
	case telemetry.Stanza:
		if attr(string(telemetry.AttrStanza)) != "iq" {
			return ""
		}
		return "stanza"
	case telemetry.Decode:
		return "decode"
	case telemetry.Authorize:
		return "authorize"
	case telemetry.AdmitCommit:
		return "admission-commit"
	case telemetry.Dispatch:
		return "dispatch"
	case telemetry.Backend:
		return "backend"
	case telemetry.Transition:
		return "transition-" + attr(string(telemetry.AttrState))
	case telemetry.EventSend:
		return "event-" + attr(string(telemetry.AttrEvent))
	}
	return ""
}

// stageOrder is the order of the rows: the stages of one echo call.
var stageOrder = []string{"decode", "stanza", "authorize", "admission-commit", "dispatch", "transition-running",
	"backend", "transition-completed", "event-status", "event-completed"}

// BenchmarkMCPEchoStages is BenchmarkMCPEcho's call (server-everything's
// echo through Prosody and the gateway, 1 caller) with tracing on and an
// in-process span recorder: it reports the p50 and p99 of every stage
// ("<stage>-p50-ms"), from the spans, where the time of one call goes.
// The same calls with tracing off alternate with the traced ones, so
// "traced-x-off" is the cost of recording spans in the same run (the
// end-to-end p50 with tracing on over that with it off).
func BenchmarkMCPEchoStages(b *testing.B) {
	users := benchUserNames("stg", 2)
	e := e2e.Start(b, e2e.Options{Users: users, TOML: e2e.EverythingTOML(b, "everything", "agents.example.test"), Mutate: benchUnlimited})
	clients := dialAll(b, e, users)
	ep := e.Endpoint("everything")
	pinned := pinWhenReady(b, clients[0], ep, "echo")
	rec := &stageRecorder{dur: map[string]latSample{}, admit: map[trace.TraceID]span{}, running: map[trace.TraceID]span{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	b.Cleanup(func() { telemetry.Use(nil) })

	call := func(ctx context.Context, w int) error {
		return invokeAndFollow(ctx, clients[w%len(clients)], ep, pinned, "echo", `{"message":"hello"}`)
	}
	const rounds = 4
	var off, on latSample
	for range rounds {
		telemetry.Use(nil)
		l, _, err := driveCalls(1, benchPhase()/(2*rounds), call)
		if err != nil {
			b.Fatalf("untraced: %v", err)
		}
		off = append(off, l...)
		telemetry.Use(tp)
		l, _, err = driveCalls(1, benchPhase()/(2*rounds), call)
		if err != nil {
			b.Fatalf("traced: %v", err)
		}
		on = append(on, l...)
	}
	telemetry.Use(nil)
	time.Sleep(100 * time.Millisecond) // the last events' spans end after the caller saw them
	slices.Sort(off)
	slices.Sort(on)
	b.ReportMetric(off.q(0.50), "p50-ms")
	b.ReportMetric(on.q(0.50), "traced-p50-ms")
	b.ReportMetric(on.q(0.50)/off.q(0.50), "traced-x-off")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	b.ReportMetric(rec.runningInAdmission(), "running-in-admission-%")
	for _, k := range stageOrder {
		d := rec.dur[k]
		if len(d) == 0 {
			b.Fatalf("no %s spans recorded", k)
		}
		slices.Sort(d)
		b.ReportMetric(d.q(0.50), k+"-p50-ms")
		b.ReportMetric(d.q(0.99), k+"-p99-ms")
	}
}
