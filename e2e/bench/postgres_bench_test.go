package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// BenchmarkMCPEchoPostgresVsSQLite calls server-everything's echo end to
// end through XMPP, as BenchmarkMCPEcho does, against two in-process
// gateways in the same run: one on the SQLite store, one on a private
// PostgreSQL (fsync on), each behind its own Prosody with the same users.
// Short slices of both alternate, so a noisy spell hits both alike; it
// reports both rates and the ratio postgres/sqlite, with 1 and 32
// callers.
func BenchmarkMCPEchoPostgresVsSQLite(b *testing.B) {
	users := benchUserNames("mcp", 8)
	pg := pgharness.Start(b, pgharness.Options{Durable: true})
	type side struct {
		name string
		env  *e2e.Env
	}
	sides := []side{
		{"sqlite", e2e.Start(b, e2e.Options{Users: users, TOML: e2e.EverythingTOML(b, "everything", "agents.example.test"), Mutate: benchUnlimited})},
		{"postgres", e2e.Start(b, e2e.Options{Users: users, PostgresDSN: pg.NewDatabase(b), TOML: e2e.EverythingTOML(b, "everything", "agents.example.test"), Mutate: benchUnlimited})},
	}
	if sides[1].env.Gateway.Store.Driver != "postgres" {
		b.Fatalf("the second gateway runs on %s", sides[1].env.Gateway.Store.Driver)
	}
	clients := make([][]*agentclient.Client, len(sides))
	for i, s := range sides {
		clients[i] = dialAll(b, s.env, users)
	}
	for _, callers := range []int{1, 32} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			const rounds = 4
			lats := make([]latSample, len(sides))
			rates := make([]float64, len(sides))
			for range rounds {
				for i, s := range sides {
					ep := s.env.Endpoint("everything")
					p := pinWhenReady(b, clients[i][0], ep, "echo")
					l, el, err := driveCalls(callers, benchPhase()/rounds, func(ctx context.Context, w int) error {
						return invokeAndFollow(ctx, clients[i][w%len(clients[i])], ep, p, "echo", `{"message":"hello"}`)
					})
					if err != nil {
						b.Fatalf("%s: %v", s.name, err)
					}
					lats[i] = append(lats[i], l...)
					rates[i] += float64(len(l)) / el.Seconds() / rounds
				}
			}
			for i, s := range sides {
				slices.Sort(lats[i])
				b.ReportMetric(rates[i], s.name+"-calls/s")
				b.ReportMetric(lats[i].q(0.50), s.name+"-p50-ms")
				b.ReportMetric(lats[i].q(0.99), s.name+"-p99-ms")
			}
			b.ReportMetric(rates[1]/rates[0], "postgres/sqlite")
		})
	}
}
