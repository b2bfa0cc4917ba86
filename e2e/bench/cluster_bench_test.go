package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// BenchmarkClusterMCPEcho calls server-everything's echo end to end through
// XMPP, as BenchmarkMCPEcho does, against a cluster of `agentgw serve`
// processes on one durable PostgreSQL behind ejabberd (its listener is
// deploy/cluster/ejabberd-listener.yml), in one run: a timed phase with
// one member, then a second member joins and the phase runs again, then a
// third. Every member runs its own server-everything; ejabberd spreads the
// invokes over the members at random. It reports calls/s for 1, 2 and 3
// members and the ratios to one member, with 16 callers. Run with
// -benchtime 1x; AGENTGW_BENCH_SECONDS sets each phase (8 s).
func BenchmarkClusterMCPEcho(b *testing.B) {
	users := benchUserNames("mcp", 8)
	pgs := pgharness.Start(b, pgharness.Options{Durable: true})
	srv := xmppharness.StartEjabberd(b, xmppharness.EjabberdOptions{Snippet: "deploy/cluster/ejabberd-listener.yml"})
	e := e2e.Prepare(b, e2e.Options{Server: srv, Users: users})
	if err := os.WriteFile(filepath.Join(e.Dir, "cluster.dsn"), []byte(pgs.NewDatabase(b)+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	everything := e2e.EverythingTOML(b, "everything", e.Domain)
	member := func(name string) string {
		// The keepalive is off: idle members' pings answered to another
		// session are issue 29 §1 (lane iq), not what this measures.
		cfg := fmt.Sprintf(`[xmpp]
component_domain = %q
server = %q
secret_file = "component.secret"
local_domains = [%q]
ping_interval_seconds = 3600
iq_timeout_seconds = 10

[store]
driver = "postgres"
dsn_file = "cluster.dsn"

[cluster]
instance = %q

[tasks]
max_active = 1048576
max_active_per_principal = 1048576
max_active_per_domain = 1048576
max_running_per_backend = 1048576

[federation.local]
invoke_per_second = 1000000.0
invoke_burst = 1000000
discovery_per_second = 1000000.0
discovery_burst = 1000000

[log]
level = "info"
%s`, e.Domain, srv.ComponentAddr, srv.Domain, name, everything)
		path := filepath.Join(e.Dir, name+".toml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			b.Fatal(err)
		}
		return path
	}
	const callers = 16
	ep := e.Endpoint("everything")
	var rates []float64
	var clients []*agentclient.Client
	for range b.N {
		rates = rates[:0]
		for n := 1; n <= 3; n++ {
			name := fmt.Sprintf("gw-%d", n)
			proc := e.ServeConfig(name, member(name))
			if clients == nil {
				clients = dialAll(b, e, users)
			}
			p := pinWhenReady(b, clients[0], ep, "echo")
			call := func(ctx context.Context, w int) error {
				return invokeAndFollow(ctx, clients[w%len(clients)], ep, p, "echo", `{"message":"hello"}`)
			}
			// Until every member's MCP server answers: a few rounds of
			// calls spread at random over the members.
			warm := time.Now().Add(90 * time.Second)
			for {
				if _, _, err := driveCalls(callers, time.Second, call); err == nil {
					break
				} else if time.Now().After(warm) {
					b.Fatalf("%d members: warm-up: %v\n%s", n, err, e2e.Tail(proc.Log(), 3000))
				}
			}
			l, el, err := driveCalls(callers, benchPhase(), call)
			if err != nil {
				b.Fatalf("%d members: %v", n, err)
			}
			rates = append(rates, float64(len(l))/el.Seconds())
		}
	}
	for i, r := range rates {
		b.ReportMetric(r, fmt.Sprintf("members=%d-calls/s", i+1))
	}
	b.ReportMetric(rates[1]/rates[0], "2/1")
	b.ReportMetric(rates[2]/rates[0], "3/1")
}
