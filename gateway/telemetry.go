package gateway

import (
	"context"
	"time"

	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/telemetry"
)

// startTelemetry turns on OTLP tracing when [telemetry] traces = "otlp";
// the returned stop flushes the spans still buffered (bounded) at the end
// of Run. Nil when tracing is off: the process-wide tracer is left alone.
func (g *Gateway) startTelemetry(ctx context.Context) func() {
	t := g.cfg.Telemetry
	if t.Traces != config.TracesOTLP {
		return nil
	}
	shutdown, err := telemetry.Setup(ctx, telemetry.Options{Endpoint: t.OTLPEndpoint, ServiceName: t.ServiceName, SampleRatio: t.SampleRatio})
	if err != nil {
		// Tracing is diagnostics: the gateway serves without it.
		g.log.Warn("tracing not started", "err", err)
		return nil
	}
	g.log.Info("tracing to OTLP", "endpoint", t.OTLPEndpoint, "sample_ratio", t.SampleRatio)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			g.log.Warn("flushing spans failed", "err", err)
		}
	}
}
