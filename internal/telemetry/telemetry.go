// Package telemetry is the gateway's OpenTelemetry tracing: one span per
// stage of a call (docs/telemetry.md). Call sites are one line each:
//
//	ctx, sp := telemetry.Start(ctx, telemetry.Authorize)
//	defer sp.End()
//
// Tracing is off unless Setup installs a provider. Off, Start returns its
// context unchanged and a zero Span: one atomic load, no allocation.
//
// Spans carry stage names and a few identifiers (task ID, state, event
// type, backend kind); never arguments, results or credentials.
package telemetry

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Span names: the stages of one call, in the order they happen.
const (
	Stanza      = "agentgw.stanza"            // one IQ, from decode to reply queued
	Decode      = "agentgw.stanza.decode"     // XML to a bounded tree
	Authorize   = "agentgw.authorize"         // policy, endpoint, version, tool
	AdmitCommit = "agentgw.admission.commit"  // the task and its replay record, durable
	Dispatch    = "agentgw.dispatch"          // accepted → running, to the backend's start
	Backend     = "agentgw.backend.call"      // the backend's Execute
	Transition  = "agentgw.transition.commit" // one revision and its event, durable
	EventSend   = "agentgw.event.send"        // lifecycle message built and queued
)

// Attribute keys.
const (
	AttrTask    = attribute.Key("agentgw.task.id")
	AttrState   = attribute.Key("agentgw.task.state")
	AttrEvent   = attribute.Key("agentgw.event.type")
	AttrStanza  = attribute.Key("agentgw.stanza.kind")
	AttrPayload = attribute.Key("agentgw.payload")
)

var (
	on     atomic.Bool
	tracer atomic.Pointer[trace.Tracer]
	prop   = propagation.TraceContext{}
)

// Enabled reports whether spans are recorded.
func Enabled() bool { return on.Load() }

// Use makes spans go to tp's tracer; nil turns tracing off. Setup calls
// it; tests use it with an in-memory recorder.
func Use(tp trace.TracerProvider) {
	if tp == nil {
		on.Store(false)
		tracer.Store(nil)
		return
	}
	t := tp.Tracer("github.com/agentgw/agentgw")
	tracer.Store(&t)
	on.Store(true)
}

// Span is one stage. The zero Span (tracing off) does nothing.
type Span struct{ s trace.Span }

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// Fail marks the span failed with a fixed reason (never attacker text).
func (s Span) Fail(reason string) {
	if s.s != nil {
		s.s.SetStatus(codes.Error, reason)
	}
}

// Str sets a string attribute.
func (s Span) Str(k attribute.Key, v string) {
	if s.s != nil {
		s.s.SetAttributes(k.String(v))
	}
}

// Context returns ctx carrying s as the parent of spans started from it.
func (s Span) Context(ctx context.Context) context.Context {
	if s.s == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, s.s)
}

// Start starts a span named name as a child of ctx's span.
func Start(ctx context.Context, name string) (context.Context, Span) {
	if !on.Load() {
		return ctx, Span{}
	}
	t := tracer.Load()
	if t == nil {
		return ctx, Span{}
	}
	ctx, s := (*t).Start(ctx, name)
	return ctx, Span{s: s}
}

// The task registry: the engine's later stages of a task (dispatch,
// transitions, backend, events) run on other goroutines than the IQ that
// admitted it; Bind remembers the IQ's span for the task so those stages
// become its children. Bounded: past maxBound tasks, later ones go
// unparented rather than grow memory.
const maxBound = 100_000

var (
	regMu sync.Mutex
	reg   = map[string]trace.SpanContext{}
)

// Bind makes ctx's span the parent of the task's later stages.
func Bind(ctx context.Context, task string) {
	if !on.Load() {
		return
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	regMu.Lock()
	if len(reg) < maxBound {
		reg[task] = sc
	}
	regMu.Unlock()
}

// Forget drops the task's parent (it settled and its last event went).
func Forget(task string) {
	if !on.Load() {
		return
	}
	regMu.Lock()
	delete(reg, task)
	regMu.Unlock()
}

// StartTask starts a span for a stage of task, as a child of the span Bind
// recorded for it (a root span when there is none).
func StartTask(ctx context.Context, task, name string) (context.Context, Span) {
	if !on.Load() {
		return ctx, Span{}
	}
	regMu.Lock()
	sc, ok := reg[task]
	regMu.Unlock()
	if ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, s := Start(ctx, name)
	s.Str(AttrTask, task)
	return ctx, s
}

// Inject writes ctx's W3C trace context (traceparent, tracestate) into h.
func Inject(ctx context.Context, h http.Header) {
	if !on.Load() {
		return
	}
	prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// Transport wraps next so that every request carries the W3C trace context
// of its own context (MCP streamable HTTP, A2A).
func Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return traceTransport{next: next}
}

type traceTransport struct{ next http.RoundTripper }

func (t traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if on.Load() && trace.SpanContextFromContext(req.Context()).IsValid() {
		req = req.Clone(req.Context()) // a RoundTripper must not modify its request
		Inject(req.Context(), req.Header)
	}
	return t.next.RoundTrip(req)
}
