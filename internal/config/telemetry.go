package config

import (
	"errors"
	"net/url"
)

// Telemetry is OpenTelemetry tracing (docs/telemetry.md); off by default.
type Telemetry struct {
	// Traces is "off" (the default) or "otlp": spans exported over
	// OTLP/HTTP to OTLPEndpoint.
	Traces string `toml:"traces"`
	// OTLPEndpoint is the collector's OTLP/HTTP URL, e.g.
	// "http://localhost:4318" (no path: /v1/traces is added; a URL with a path is used as it is).
	OTLPEndpoint string `toml:"otlp_endpoint"`
	// ServiceName is the service.name resource attribute. Default "agentgw".
	ServiceName string `toml:"service_name"`
	// SampleRatio is the share of calls traced, in (0, 1]. Default 1.
	SampleRatio float64 `toml:"sample_ratio"`
}

// Trace modes.
const (
	TracesOff  = "off"
	TracesOTLP = "otlp"
)

func (t *Telemetry) applyDefaults() {
	if t.Traces == "" {
		t.Traces = TracesOff
	}
	if t.ServiceName == "" {
		t.ServiceName = "agentgw"
	}
	if t.SampleRatio == 0 {
		t.SampleRatio = 1
	}
}

func (t Telemetry) validate() []error {
	var errs []error
	switch t.Traces {
	case "", TracesOff:
		if t.OTLPEndpoint != "" {
			errs = append(errs, errors.New(`[telemetry] otlp_endpoint is set but traces is "off" (set traces = "otlp")`))
		}
	case TracesOTLP:
		u, err := url.Parse(t.OTLPEndpoint)
		switch {
		case t.OTLPEndpoint == "":
			errs = append(errs, errors.New(`[telemetry] traces = "otlp" needs otlp_endpoint (e.g. "http://localhost:4318")`))
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			errs = append(errs, errors.New(`[telemetry] otlp_endpoint must be an http:// or https:// URL with a host`))
		case u.User != nil:
			errs = append(errs, errors.New(`[telemetry] otlp_endpoint must not carry credentials`))
		}
	default:
		errs = append(errs, errors.New(`[telemetry] traces must be "off" or "otlp"`))
	}
	if t.SampleRatio < 0 || t.SampleRatio > 1 || t.SampleRatio != t.SampleRatio {
		errs = append(errs, errors.New(`[telemetry] sample_ratio must be between 0 and 1 (0: the default 1)`))
	}
	if len(t.ServiceName) > 255 {
		errs = append(errs, errors.New(`[telemetry] service_name is longer than 255 bytes`))
	}
	return errs
}
