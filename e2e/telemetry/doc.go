// Package telemetry tests tracing and metrics end to end: spans, trace context, OTLP, /metrics.
package telemetry
