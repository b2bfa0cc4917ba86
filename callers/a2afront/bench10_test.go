package a2afront_test

import (
	"testing"

	"github.com/agentgw/agentgw/internal/config"
)

// BenchmarkA2AEcho10Vs03 measures the scripted echo through `agentgw a2a`
// from the JS SDK 1.3.0 in the same run: its 1.0 Client over JSON-RPC and
// over HTTP+JSON against its 0.3 JSON-RPC transport (JS client → agentgw
// a2a → Prosody → gateway → the echo). Run with -benchtime=1x; each path
// makes n blocking sends inside node, one path after the other, and
// reports percentiles in milliseconds.
func BenchmarkA2AEcho10Vs03(b *testing.B) {
	x := startWith(b, false, func(c *config.Config) {
		c.Federation.InvokePerSecond, c.Federation.InvokeBurst = 1e6, 1e6
	})
	weather := "weather@" + x.env.Domain
	n := 300
	if b.N > n {
		n = b.N
	}
	b.ResetTimer()
	res := map[string]step{}
	for _, proto := range []string{"0.3", "1.0-jsonrpc", "1.0-rest"} {
		s := x.runProto(b, proto, nil, map[string]any{"op": "bench", "jid": weather, "skill": "echo", "data": map[string]any{"message": "hello"}, "n": n, "warmup": 30})[0]
		if s.Error != nil || s.N == 0 {
			b.Fatalf("%s bench: %+v", proto, s)
		}
		res[proto] = s
	}
	b.StopTimer()
	o, j, r := res["0.3"], res["1.0-jsonrpc"], res["1.0-rest"]
	b.ReportMetric(o.P50, "v03-p50-ms")
	b.ReportMetric(o.P99, "v03-p99-ms")
	b.ReportMetric(j.P50, "v10-jsonrpc-p50-ms")
	b.ReportMetric(j.P99, "v10-jsonrpc-p99-ms")
	b.ReportMetric(r.P50, "v10-rest-p50-ms")
	b.ReportMetric(r.P99, "v10-rest-p99-ms")
	b.ReportMetric(j.P50/o.P50, "jsonrpc-p50-ratio")
	b.ReportMetric(r.P50/o.P50, "rest-p50-ratio")
	b.Logf("n=%d 0.3 p50 %.2f p99 %.2f ms; 1.0 JSON-RPC p50 %.2f p99 %.2f ms; 1.0 HTTP+JSON p50 %.2f p99 %.2f ms",
		o.N, o.P50, o.P99, j.P50, j.P99, r.P50, r.P99)
}
