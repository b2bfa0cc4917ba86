package config

import (
	"strings"
	"testing"
)

func TestTelemetryDefaultsOff(t *testing.T) {
	c, err := load(write(t, valid))
	if err != nil {
		t.Fatal(err)
	}
	if tl := c.Telemetry; tl.Traces != TracesOff || tl.ServiceName != "agentgw" || tl.SampleRatio != 1 || tl.OTLPEndpoint != "" {
		t.Fatalf("[telemetry] defaults: %+v", tl)
	}
	c, err = load(write(t, valid+`
[telemetry]
traces = "otlp"
otlp_endpoint = "http://collector.example:4318"
service_name = "gw-eu"
sample_ratio = 0.25
`))
	if err != nil {
		t.Fatal(err)
	}
	if tl := c.Telemetry; tl.Traces != TracesOTLP || tl.OTLPEndpoint != "http://collector.example:4318" || tl.ServiceName != "gw-eu" || tl.SampleRatio != 0.25 {
		t.Fatalf("[telemetry] not read: %+v", tl)
	}
}

func TestTelemetryValidation(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`traces = "jaeger"`, `traces must be "off" or "otlp"`},
		{`traces = "otlp"`, `needs otlp_endpoint`},
		{"traces = \"otlp\"\notlp_endpoint = \"collector:4318\"", `must be an http:// or https:// URL`},
		{"traces = \"otlp\"\notlp_endpoint = \"ftp://c.example/\"", `must be an http:// or https:// URL`},
		{"traces = \"otlp\"\notlp_endpoint = \"https://user:pw-SECRET@c.example/\"", `must not carry credentials`},
		{`otlp_endpoint = "http://c.example:4318"`, `traces is "off"`},
		{"traces = \"otlp\"\notlp_endpoint = \"http://c.example\"\nsample_ratio = 1.5", `sample_ratio must be between 0 and 1`},
		{"sample_ratio = -0.1", `sample_ratio must be between 0 and 1`},
		{"service_name = \"" + strings.Repeat("x", 300) + "\"", `service_name is longer`},
	} {
		_, err := load(write(t, valid+"\n[telemetry]\n"+tc.body+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.body, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("the error reflects the endpoint's credentials: %v", err)
		}
	}
}
