package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// Options configure the OTLP exporter ([telemetry] in the config).
type Options struct {
	// Endpoint is the collector's OTLP/HTTP base URL, e.g.
	// "http://localhost:4318" (a URL without a path gets /v1/traces) or
	// a full URL such as "https://collector.example/otlp/v1/traces".
	Endpoint string
	// ServiceName is the service.name resource attribute.
	ServiceName string
	// SampleRatio is the share of calls traced, 0 < r ≤ 1; child stages
	// follow their call's decision.
	SampleRatio float64
}

// Setup installs an OTLP/HTTP exporter with a batching span processor and
// turns tracing on. The returned shutdown flushes pending spans and turns
// tracing off again.
func Setup(ctx context.Context, o Options) (shutdown func(context.Context) error, err error) {
	if o.Endpoint == "" {
		return nil, errors.New("telemetry: otlp_endpoint is required")
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || u.Host == "" {
		return nil, errors.New("telemetry: otlp_endpoint is not a URL with a host")
	}
	if u.Path == "" || u.Path == "/" {
		// A collector's base URL: the traces path of OTLP/HTTP.
		u.Path = "/v1/traces"
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	ratio := o.SampleRatio
	if ratio <= 0 || ratio > 1 {
		ratio = 1
	}
	name := o.ServiceName
	if name == "" {
		name = "agentgw"
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(name))),
	)
	Use(tp)
	return func(ctx context.Context) error {
		Use(nil)
		return tp.Shutdown(ctx)
	}, nil
}
