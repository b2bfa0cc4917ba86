package bench

import (
	"context"
	"slices"
	"testing"

	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/testkit/e2e"
	"mellium.im/xmpp/jid"
)

// BenchmarkHostedEcho calls server-everything's echo at a hosted endpoint
// (client → Prosody → `agentgw host` over C2S → MCP stdio, events back the
// same way) beside the same tool behind the gateway (client → Prosody →
// component → MCP stdio), with one caller, alternating short slices of
// both in the same run. hosted-x-gateway is the ratio of their median
// round trips.
func BenchmarkHostedEcho(b *testing.B) {
	users := []string{"alice", "bot"}
	e := e2e.Start(b, e2e.Options{Users: users, TOML: e2e.EverythingTOML(b, "everything", "agents.example.test"), Mutate: func(c *config.Config) {
		benchUnlimited(c)
		c.XMPP.SelfRegisterDomains = c.XMPP.LocalDomains
	}})
	e2e.StartHost(b, e, "host", "bot", "host: registered at the gateway")
	c := e.Dial("alice")
	gwEP := e.Endpoint("everything")
	hostedEP := jid.MustParse(e.JID("bot") + "/agent")
	gwPin := pinWhenReady(b, c, gwEP, "echo")
	hostedPin := pinWhenReady(b, c, hostedEP, "echo")

	const rounds = 4
	var viaGateway, hosted latSample
	for range rounds {
		l, _, err := driveCalls(1, benchPhase()/rounds, func(ctx context.Context, _ int) error {
			return invokeAndFollow(ctx, c, gwEP, gwPin, "echo", `{"message":"hello"}`)
		})
		if err != nil {
			b.Fatalf("behind the gateway: %v", err)
		}
		viaGateway = append(viaGateway, l...)
		l, _, err = driveCalls(1, benchPhase()/rounds, func(ctx context.Context, _ int) error {
			return invokeAndFollow(ctx, c, hostedEP, hostedPin, "echo", `{"message":"hello"}`)
		})
		if err != nil {
			b.Fatalf("hosted: %v", err)
		}
		hosted = append(hosted, l...)
	}
	slices.Sort(viaGateway)
	slices.Sort(hosted)
	b.ReportMetric(hosted.q(0.50), "hosted-p50-ms")
	b.ReportMetric(hosted.q(0.99), "hosted-p99-ms")
	b.ReportMetric(viaGateway.q(0.50), "gateway-p50-ms")
	b.ReportMetric(viaGateway.q(0.99), "gateway-p99-ms")
	b.ReportMetric(hosted.q(0.50)/viaGateway.q(0.50), "hosted-x-gateway")
	b.ReportMetric(float64(len(hosted)), "hosted-calls")
	b.ReportMetric(float64(len(viaGateway)), "gateway-calls")
}
