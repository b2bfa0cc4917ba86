package cluster

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
	"github.com/agentgw/agentgw/testkit/porttest"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// Issue 29 §1: ejabberd hands every stanza for the component domain,
// the results of a member's own IQs included, to a random session. These
// tests hold the members to "every IQ answer reaches the member that
// asked": the keepalive's pings and XEP-0363 upload slots.

// reconnectLine is what a member logs each time its stream is lost.
const reconnectLine = "component: no stream to the server; reconnecting"

// idleDuration is how long TestClusterIdleKeepalive keeps the members
// idle: CLUSTER_IDLE (a Go duration; the issue asks for 10m), else 90 s,
// long enough that the old keepalive (about 2 pings in 3 answered to
// another member) reconnects every member several times.
func idleDuration(t *testing.T) time.Duration {
	s := os.Getenv("CLUSTER_IDLE")
	if s == "" {
		return 90 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("CLUSTER_IDLE=%q: want a positive Go duration such as 10m", s)
	}
	return d
}

// idleMember is one `agentgw serve` of a minimal cluster: no agents, a
// keepalive ping after pingSeconds without traffic.
func idleMemberConfig(e *e2e.Env, srv *xmppharness.Server, dsnFile, name string, pingSeconds int, extra string) string {
	return fmt.Sprintf(`[xmpp]
component_domain = %q
server = %q
secret_file = "component.secret"
local_domains = []
ping_interval_seconds = %d
iq_timeout_seconds = 10

[store]
driver = "postgres"
dsn_file = %q

[cluster]
instance = %q
lease_seconds = %d
%s
[log]
level = "info"
`, e.Domain, srv.ComponentAddr, pingSeconds, dsnFile, name, clusterLease, extra)
}

// iqAnswerMetrics reads agentgw_component_iq_answers_total by path from a
// member's /metrics.
func iqAnswerMetrics(t *testing.T, addr string) (forwarded, relayed, dropped float64) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "agentgw_component_iq_answers_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.Contains(line, `path="forwarded"`):
			forwarded = v
		case strings.Contains(line, `path="relayed"`):
			relayed = v
		case strings.Contains(line, `path="dropped"`):
			dropped = v
		}
	}
	return forwarded, relayed, dropped
}

// idleCluster is three `agentgw serve` members of one component domain on
// ejabberd and one PostgreSQL, pinging after 5 s without traffic.
type idleCluster struct {
	e       *e2e.Env
	procs   map[string]*e2e.Proc
	configs map[string]string
	metrics map[string]string // member -> its /metrics address
}

func startIdleCluster(t *testing.T) *idleCluster {
	pg := pgharness.Shared(t)
	srv := xmppharness.SharedEjabberd(t, xmppharness.EjabberdOptions{Snippet: "deploy/cluster/ejabberd-listener.yml"})
	e := e2e.Prepare(t, e2e.Options{Server: srv})
	if err := os.WriteFile(filepath.Join(e.Dir, "dsn"), []byte(pg.NewDatabase(t)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &idleCluster{e: e, procs: map[string]*e2e.Proc{}, configs: map[string]string{}, metrics: map[string]string{}}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("gw-%d", i)
		path := filepath.Join(e.Dir, name+".toml")
		addr, err := porttest.Addr("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		c.metrics[name] = addr
		extra := fmt.Sprintf("allow_multiple = true\n\n[metrics]\nlisten = %q\n", addr)
		if err := os.WriteFile(path, []byte(idleMemberConfig(e, srv, "dsn", name, 5, extra)), 0o600); err != nil {
			t.Fatal(err)
		}
		c.configs[name] = path
		c.procs[name] = e.ServeConfig(name, path)
	}
	return c
}

// TestClusterIdleKeepalive: three idle members on one component domain,
// pinging after 5 s without traffic, must never drop their streams.
func TestClusterIdleKeepalive(t *testing.T) {
	t.Parallel()
	idle := idleDuration(t)
	c := startIdleCluster(t)
	procs, metricsAddr := c.procs, c.metrics
	start := time.Now()
	t.Logf("three members connected; idle for %v with a 5 s ping", idle)
	// Idle is the point: nothing to wait for but time. The members log
	// every lost stream; read them at the end (and every minute, so a
	// long run shows its progress).
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	deadline := time.NewTimer(idle)
	defer deadline.Stop()
	count := func() (map[string]int, int) {
		per, total := map[string]int{}, 0
		for name, p := range procs {
			n := strings.Count(p.Log(), reconnectLine)
			per[name] = n
			total += n
		}
		return per, total
	}
wait:
	for {
		select {
		case <-tick.C:
			per, total := count()
			t.Logf("after %v: %d reconnects %v", time.Since(start).Round(time.Second), total, per)
		case <-deadline.C:
			break wait
		}
	}
	per, total := count()
	t.Logf("idle %v, 3 members, 5 s ping: %d reconnects %v", time.Since(start).Round(time.Second), total, per)
	// The keepalive held because the pings' answers reached the members
	// that sent them, about two in three forwarded by another member.
	relayed := 0.0
	for name, addr := range metricsAddr {
		f, r, d := iqAnswerMetrics(t, addr)
		t.Logf("%s: IQ answers forwarded %v, relayed in %v, dropped %v", name, f, r, d)
		relayed += r
	}
	if relayed == 0 {
		t.Errorf("no keepalive answer was relayed between members: the test did not exercise the relay")
	}
	if total != 0 {
		for name, p := range procs {
			if per[name] > 0 {
				t.Errorf("%s lost its stream %d times while idle:\n%s", name, per[name], e2e.Tail(p.Log(), 3000))
			}
		}
	}
}

// TestClusterKeepaliveMemberKilled: a member killed with SIGKILL takes
// its stream and its bus subscription with it. The survivors keep their
// streams (answers for the dead member's pings are dropped, never
// forwarded in a loop), and the member restarted under its name gets its
// answers forwarded again.
func TestClusterKeepaliveMemberKilled(t *testing.T) {
	t.Parallel()
	c := startIdleCluster(t)
	relayedTo := func(name string) func() bool {
		return func() bool { _, r, _ := iqAnswerMetrics(t, c.metrics[name]); return r > 0 }
	}
	for name := range c.procs {
		testkit.WaitFor(t, 90*time.Second, name+" gets a ping answer forwarded by another member", relayedTo(name))
	}
	c.procs["gw-3"].Kill()
	// Survivors keep pinging through the death: wait for three more
	// forwarded answers each (three ping rounds at least), then require
	// that they never reconnected.
	before := map[string]float64{}
	for _, name := range []string{"gw-1", "gw-2"} {
		_, before[name], _ = iqAnswerMetrics(t, c.metrics[name])
	}
	for _, name := range []string{"gw-1", "gw-2"} {
		testkit.WaitFor(t, 120*time.Second, name+" gets three more answers forwarded after the kill", func() bool {
			_, r, _ := iqAnswerMetrics(t, c.metrics[name])
			return r >= before[name]+3
		})
	}
	for _, name := range []string{"gw-1", "gw-2"} {
		if n := strings.Count(c.procs[name].Log(), reconnectLine); n != 0 {
			t.Errorf("%s lost its stream %d times after gw-3 died:\n%s", name, n, e2e.Tail(c.procs[name].Log(), 3000))
		}
		f, r, d := iqAnswerMetrics(t, c.metrics[name])
		t.Logf("%s: forwarded %v, relayed in %v, dropped %v", name, f, r, d)
	}
	c.procs["gw-3"] = c.e.ServeConfig("gw-3-again", c.configs["gw-3"])
	testkit.WaitFor(t, 90*time.Second, "the restarted gw-3 gets a ping answer forwarded", relayedTo("gw-3"))
	for _, name := range []string{"gw-1", "gw-2"} {
		if n := strings.Count(c.procs[name].Log(), reconnectLine); n != 0 {
			t.Errorf("%s lost its stream %d times", name, n)
		}
	}
}

// TestClusterDoctorPing: `agentgw doctor` run beside three live members
// opens a session of its own on their domain; the answer to its ping lands
// on any of the four sessions, and the members forward it to doctor over
// the bus. Without that, about three runs in four would report that the
// server did not answer.
func TestClusterDoctorPing(t *testing.T) {
	t.Parallel()
	c := startIdleCluster(t)
	for run := range 4 {
		out, err := exec.Command(e2e.Binary(t), "doctor", "--config", c.configs["gw-1"]).CombinedOutput()
		_ = err // other checks may fail on this minimal config; the ping is the point
		line := ""
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "xmpp ping") {
				line = l
			}
		}
		if !strings.HasPrefix(line, "ok") {
			t.Fatalf("doctor run %d beside three members: %q\n%s", run, line, out)
		}
	}
}
