package bench

// Scale and end-to-end benchmarks for `make bench` (scripts/bench.sh, which
// turns their metrics into docs/benchmarks.md through tools/benchreport).
// Each one does a bounded amount of work inside a single run: run them with
// -benchtime=1x. AGENTGW_BENCH_SECONDS sets how long each timed phase of the
// echo benchmarks lasts (default 8). Metric names are read by benchreport:
// keep them stable.

import (
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// benchPhase is how long each timed phase of the echo benchmarks runs.
func benchPhase() time.Duration {
	if s, err := strconv.ParseFloat(os.Getenv("AGENTGW_BENCH_SECONDS"), 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	return 8 * time.Second
}

// benchUnlimited lifts the per-JID rate limits and the task caps and quotas, so the
// benchmarks measure the gateway, not its admission policy.
func benchUnlimited(c *config.Config) {
	f := &c.Federation
	f.InvokePerSecond, f.InvokeBurst = 1e6, 1e6
	f.DiscoveryPerSecond, f.DiscoveryBurst = 1e6, 1e6
	f.SchemaPerSecond, f.SchemaBurst = 1e6, 1e6
	f.InputPerSecond, f.InputBurst = 1e6, 1e6
	c.Tasks.MaxActive = 1 << 20
	c.Tasks.MaxActivePerPrincipal, c.Tasks.MaxActivePerDomain = 1<<20, 1<<20
	c.Tasks.MaxRunningPerBackend, c.Tasks.RetainedBytesPerPrincipal = 1<<20, 1<<50
}

func benchUserNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// dialAll logs every user in (quiet logging, no invoke retries: a lost IQ
// is a failure here, not something to hide).
func dialAll(b *testing.B, e *e2e.Env, users []string) []*agentclient.Client {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := make([]*agentclient.Client, 0, len(users))
	for _, u := range users {
		c, _, err := e.TryDial(ctx, u)
		if err != nil {
			b.Fatalf("login %s: %v", u, err)
		}
		c.Retries = 0
		out = append(out, c)
	}
	return out
}

// latSample is a sorted sample.
type latSample []time.Duration

func (l latSample) q(p float64) float64 {
	if len(l) == 0 {
		return 0
	}
	return float64(l[min(len(l)-1, int(p*float64(len(l))))]) / float64(time.Millisecond)
}

func (l latSample) mean() float64 {
	if len(l) == 0 {
		return 0
	}
	var s time.Duration
	for _, d := range l {
		s += d
	}
	return float64(s) / float64(len(l)) / float64(time.Millisecond)
}

// drive runs callers concurrent loops of call for d (after warm-up calls
// that are not timed) and returns the sorted latSample and the elapsed
// time. The first error stops every loop.
func driveCalls(callers int, d time.Duration, call func(ctx context.Context, worker int) error) (latSample, time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	fail := func(err error) {
		if first.CompareAndSwap(nil, &err) {
			cancel()
		}
	}
	for w := range callers { // warm-up: one call per caller
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := call(ctx, w); err != nil {
				fail(fmt.Errorf("warm-up: %w", err))
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return nil, 0, *p
	}
	var mu sync.Mutex
	var all latSample
	start := time.Now()
	deadline := start.Add(d)
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine latSample
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				if err := call(ctx, w); err != nil {
					fail(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if p := first.Load(); p != nil {
		return nil, 0, *p
	}
	slices.Sort(all)
	return all, elapsed, nil
}

// invokeAndFollow is one call through XMPP: invoke, then follow the
// lifecycle events to the terminal one.
func invokeAndFollow(ctx context.Context, c *agentclient.Client, ep jid.JID, p *agentclient.Pinned, tool, args string) error {
	return callAndFollow(ctx, c, ep, &agentclient.InvokeRequest{Tool: tool, Version: p.Manifest.Version,
		ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(args)})
}

// callAndFollow invokes req and follows the task to completed.
func callAndFollow(ctx context.Context, c *agentclient.Client, ep jid.JID, req *agentclient.InvokeRequest) error {
	acc, err := c.Invoke(ctx, ep, req)
	if err != nil {
		return fmt.Errorf("invoke: %w", err)
	}
	out, err := c.Follow(ctx, ep, acc, agentclient.CallOptions{RecoverAfter: 2 * time.Second})
	if err != nil {
		return fmt.Errorf("follow: %w", err)
	}
	if out.State != "completed" {
		return fmt.Errorf("task %s ended %s: %s", acc.TaskID, out.State, out.Payload)
	}
	return nil
}

// pinWhenReady waits until the endpoint offers tool and pins it.
func pinWhenReady(b *testing.B, c *agentclient.Client, ep jid.JID, tool string) *agentclient.Pinned {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		p, err := c.Pin(ctx, ep, tool)
		if err == nil {
			return p
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%s never offered %s: %v", ep, tool, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// BenchmarkMCPEcho calls server-everything's echo end to end through XMPP
// (client → Prosody → gateway → MCP stdio → server-everything, and the
// completed event back), with 1 and with 32 concurrent callers, against
// the same calls made directly with the go-sdk client on its own
// server-everything process. Both paths run in the same benchmark, so
// their ratio is what to read on a noisy machine.
func BenchmarkMCPEcho(b *testing.B) {
	users := benchUserNames("mcp", 8)
	e := e2e.Start(b, e2e.Options{Users: users, TOML: e2e.EverythingTOML(b, "everything", "agents.example.test"), Mutate: benchUnlimited})
	clients := dialAll(b, e, users)
	ep := e.Endpoint("everything")
	pinned := pinWhenReady(b, clients[0], ep, "echo")

	root, err := xmppharness.ModuleRoot()
	if err != nil {
		b.Fatal(err)
	}
	node, _ := exec.LookPath("node")
	entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	mc := mcp.NewClient(&mcp.Implementation{Name: "agentgw-bench", Version: "1"}, nil)
	cmd := exec.Command(node, entry, "stdio")
	cs, err := mc.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("direct MCP session: %v", err)
	}
	b.Cleanup(func() { cs.Close() })

	for _, callers := range []int{1, 32} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			// Alternate short slices of both paths, so that a noisy spell
			// on the machine hits both alike.
			const rounds = 4
			var direct, through latSample
			var dEl, tEl time.Duration
			for range rounds {
				l, el, err := driveCalls(callers, benchPhase()/rounds, func(ctx context.Context, _ int) error {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}})
					if err == nil && res.IsError {
						err = errors.New("echo returned isError")
					}
					return err
				})
				if err != nil {
					b.Fatalf("direct: %v", err)
				}
				direct, dEl = append(direct, l...), dEl+el
				l, el, err = driveCalls(callers, benchPhase()/rounds, func(ctx context.Context, w int) error {
					return invokeAndFollow(ctx, clients[w%len(clients)], ep, pinned, "echo", `{"message":"hello"}`)
				})
				if err != nil {
					b.Fatalf("through XMPP: %v", err)
				}
				through, tEl = append(through, l...), tEl+el
			}
			slices.Sort(direct)
			slices.Sort(through)
			rate, dRate := float64(len(through))/tEl.Seconds(), float64(len(direct))/dEl.Seconds()
			b.ReportMetric(rate, "calls/s")
			b.ReportMetric(through.q(0.50), "p50-ms")
			b.ReportMetric(through.q(0.99), "p99-ms")
			b.ReportMetric(dRate, "direct-calls/s")
			b.ReportMetric(direct.q(0.50), "direct-p50-ms")
			b.ReportMetric(direct.q(0.99), "direct-p99-ms")
			b.ReportMetric(100*rate/dRate, "%-of-direct")
			b.ReportMetric(through.q(0.50)/direct.q(0.50), "p50-x-direct")
		})
	}
}

// BenchmarkMCPEchoXMPPCeiling makes BenchmarkMCPEcho's calls, with the same
// 8 connections and 1 or 32 callers, against a trivial component instead
// of the gateway: it answers each invoke with a canned <accepted/> and then
// sends the two lifecycle messages of an echo task (status running,
// completed with a fixed result). No validation, persistence or MCP: the
// figure is what the XMPP path alone allows for that exchange on this
// machine, the ceiling of any gateway behind this Prosody.
func BenchmarkMCPEchoXMPPCeiling(b *testing.B) {
	_, clients, ep := startTrivialTarget(b, benchUserNames("mcp", 8), true)
	for _, callers := range []int{1, 32} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			l, el, err := driveCalls(callers, benchPhase(), func(ctx context.Context, w int) error {
				return callAndFollow(ctx, clients[w%len(clients)], ep, trivialInvoke())
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(l))/el.Seconds(), "calls/s")
			b.ReportMetric(l.q(0.50), "p50-ms")
			b.ReportMetric(l.q(0.99), "p99-ms")
		})
	}
}

const (
	benchConnectorKey = "bench-conn-key-SECRET-0c7e1d"
	benchFormToken    = "bench-form-token-SECRET-4a2b"
)

// BenchmarkConnectorEcho calls the reference xAgent connector's echo end to
// end through XMPP (client → Prosody → gateway → connector WebSocket), with
// 1 and 32 concurrent callers. connectorbridge's BenchmarkEcho/direct is
// the same call made directly on the connector's WebSocket.
func BenchmarkConnectorEcho(b *testing.B) {
	srv, err := connectortest.Start(connectortest.Options{APIKey: benchConnectorKey, FormToken: benchFormToken})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	b.Setenv("AGENTGW_BENCH_CONNECTOR_KEY", benchConnectorKey)
	b.Setenv("AGENTGW_BENCH_FORM_TOKEN", benchFormToken)
	users := benchUserNames("conn", 8)
	e := e2e.Start(b, e2e.Options{Users: users, Mutate: benchUnlimited, TOML: fmt.Sprintf(`
[[agents]]
jid = "im@agents.example.test"
[agents.connector]
base_url = %q
api_key_env = "AGENTGW_BENCH_CONNECTOR_KEY"
`, srv.URL())})
	clients := dialAll(b, e, users)
	ep := e.Endpoint("im")
	e.Agentgw(0, "connector", "auth", "--config", e.ConfigPath, "--flow", "token_form",
		"--field", "account=bench", "--field-env", "token=AGENTGW_BENCH_FORM_TOKEN", ep.String())
	pinned := pinWhenReady(b, clients[0], ep, "echo")

	for _, callers := range []int{1, 32} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			lat, el, err := driveCalls(callers, benchPhase(), func(ctx context.Context, w int) error {
				return invokeAndFollow(ctx, clients[w%len(clients)], ep, pinned, "echo", `{"text":"hello"}`)
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(lat))/el.Seconds(), "calls/s")
			b.ReportMetric(lat.mean(), "mean-ms")
			b.ReportMetric(lat.q(0.50), "p50-ms")
			b.ReportMetric(lat.q(0.99), "p99-ms")
		})
	}
}

// benchProcKB reads a "Vm...:" line of /proc/<pid>/status in kB, or -1.
func benchProcKB(pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return -1
}

func kbToMB(kb float64) float64 { return kb / 1024 }

// seedDirectory registers and activates n endpoints with DefaultManifest
// (five tools each) in the gateway's store while no gateway runs. Each
// endpoint goes through the directory store's own Register and Activate;
// only fsync is turned off for the seeding connection, so that 2n
// transactions take seconds, not minutes.
func seedDirectory(b *testing.B, path, domain string, n int) {
	b.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Write.Exec("PRAGMA synchronous=OFF"); err != nil {
		b.Fatal(err)
	}
	st := sqlite.NewDirectory(db)
	for i := range n {
		m, err := directory.ParseManifest([]byte(e2e.DefaultManifest(fmt.Sprintf("agent%05d@%s", i, domain))))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Register(ctx, m.Endpoint, m.Version, m.Hash, m.Canonical); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Activate(ctx, m.Endpoint, m.Version, m.Hash); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Write.Exec("PRAGMA synchronous=FULL"); err != nil {
		b.Fatal(err)
	}
}

// benchKeep holds the registry registryHeap loaded until the process ends
// when a heap profile is being taken, so that its inuse_space shows what
// the index retains.
var benchKeep *directory.Registry

func memProfiling() bool {
	f := flag.Lookup("test.memprofile")
	return f != nil && f.Value.String() != ""
}

// registryHeap loads the directory index from the store at path in this
// process and returns the live heap it added, in MB.
func registryHeap(b *testing.B, path string) float64 {
	b.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	reg, err := directory.NewRegistry(ctx, sqlite.NewDirectory(db), nil)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if memProfiling() {
		benchKeep = reg
	}
	runtime.KeepAlive(reg)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
}

// BenchmarkDirectory10k runs `agentgw serve` as a subprocess over a store
// holding 10,000 active endpoints (five tools each) and measures, through
// Prosody, directory pages of 50 (disco#items with RSM) and searches
// (jabber:iq:search) returning a page of 50, and the gateway process's RSS.
// The same gateway with no endpoints gives the baseline RSS.
func BenchmarkDirectory10k(b *testing.B) { directoryScale(b, 10000, seedDirectory) }

// BenchmarkDirectory100k is BenchmarkDirectory10k at 100,000 endpoints
// (issue 23's directory-scale row), seeded in bulk; it also reports the
// RSS and in-process heap per endpoint and the empty gateway's start time
// from the same run.
func BenchmarkDirectory100k(b *testing.B) { directoryScale(b, 100000, bulkSeedDirectory) }

// directoryScale is the body of the directory benchmarks: n endpoints put
// into the store by seed, the gateway over an empty store as the baseline.
func directoryScale(b *testing.B, n int, seed func(b *testing.B, path, domain string, n int)) {
	// The subprocess reads its limits from the file, not from Mutate.
	e := e2e.Prepare(b, e2e.Options{Users: []string{"alice"}, TOML: `
[federation]
discovery_per_second = 1000000
discovery_burst = 1000000
`})
	e2e.Binary(b) // build before any timing

	t0 := time.Now()
	empty := e.Serve("empty")
	emptyReady := time.Since(t0)
	time.Sleep(time.Second)
	emptyRSS := benchProcKB(empty.PID(), "VmRSS")
	empty.Stop()

	t0 = time.Now()
	seed(b, filepath.Join(e.Dir, "agentgw.db"), e.Domain, n)
	b.Logf("seeded %d endpoints in %v", n, time.Since(t0))

	regHeap := registryHeap(b, filepath.Join(e.Dir, "agentgw.db"))

	t0 = time.Now()
	gw := e.Serve("full")
	ready := time.Since(t0)
	time.Sleep(time.Second)
	idleRSS := benchProcKB(gw.PID(), "VmRSS")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		b.Fatal(err)
	}
	gwJID := e.GatewayJID()
	middle := fmt.Sprintf("agent%05d@%s", n/2, e.Domain)
	// An endpoint's description needs its manifest, which a large
	// directory loads on demand: show it still answers.
	if _, err := c.Info(ctx, jid.MustParse(middle), ""); err != nil {
		b.Fatalf("disco#info of %s: %v", middle, err)
	}
	var pages, searches latSample
	const rounds = 200
	for i := range rounds {
		after := ""
		if i%2 == 1 {
			after = middle
		}
		t := time.Now()
		p, err := c.Items(ctx, gwJID, ns.Directory, 50, after)
		d := time.Since(t)
		if err != nil {
			b.Fatalf("directory page: %v", err)
		}
		if len(p.Items) != 50 || (p.Count >= 0 && p.Count != n) {
			b.Fatalf("directory page has %d items, count %d; want 50 of %d", len(p.Items), p.Count, n)
		}
		pages = append(pages, d)

		t = time.Now()
		s, err := c.SearchPage(ctx, gwJID, fmt.Sprintf("agent0%02d", i%100), 50, "")
		d = time.Since(t)
		if err != nil {
			b.Fatalf("search: %v", err)
		}
		if len(s.Items) != 50 {
			b.Fatalf("search page has %d items, want 50", len(s.Items))
		}
		searches = append(searches, d)
	}
	slices.Sort(pages)
	slices.Sort(searches)
	rss := benchProcKB(gw.PID(), "VmRSS")
	hwm := benchProcKB(gw.PID(), "VmHWM")
	b.ReportMetric(float64(n), "endpoints")
	b.ReportMetric(ready.Seconds(), "ready-s")
	b.ReportMetric(emptyReady.Seconds(), "empty-ready-s")
	b.ReportMetric(kbToMB(emptyRSS), "empty-rss-MB")
	b.ReportMetric(float64(hwm-emptyRSS)*1024/float64(n), "peak-rss-growth-B/endpoint")
	b.ReportMetric(regHeap*(1<<20)/float64(n), "registry-heap-B/endpoint")
	b.ReportMetric(kbToMB(idleRSS), "idle-rss-MB")
	b.ReportMetric(kbToMB(rss), "rss-MB")
	b.ReportMetric(kbToMB(hwm), "peak-rss-MB")
	b.ReportMetric(kbToMB(rss-emptyRSS), "rss-growth-MB")
	b.ReportMetric(regHeap, "registry-heap-MB")
	b.ReportMetric(pages.q(0.50), "page-p50-ms")
	b.ReportMetric(pages.q(0.99), "page-p99-ms")
	b.ReportMetric(searches.q(0.50), "search-p50-ms")
	b.ReportMetric(searches.q(0.99), "search-p99-ms")
}

// bulkSeedDirectory writes n active endpoints with DefaultManifest in one
// transaction, canonicalized without schema compilation (100,000 full
// registrations would take minutes of setup); every 1,000th is checked
// against ParseManifest so the rows are exactly what Register stores.
func bulkSeedDirectory(b *testing.B, path, domain string, n int) {
	b.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Write.Begin()
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	stmt, err := tx.Prepare(`INSERT INTO directory_versions (endpoint, version, hash, canonical, active) VALUES (?, ?, ?, ?, 1)`)
	if err != nil {
		b.Fatal(err)
	}
	defer stmt.Close()
	for i := range n {
		ep := fmt.Sprintf("agent%05d@%s", i, domain)
		raw := []byte(e2e.DefaultManifest(ep))
		v, err := ijson.Parse(raw, directory.ManifestLimits)
		if err != nil {
			b.Fatal(err)
		}
		canon, err := ijson.Canonical(v)
		if err != nil {
			b.Fatal(err)
		}
		hash := ijson.Hash(canon)
		if i%1000 == 0 {
			m, err := directory.ParseManifest(raw)
			if err != nil || m.Hash != hash || m.Version != "1.0.0" || m.Endpoint != ep {
				b.Fatalf("bulk seed of %s differs from ParseManifest: %v", ep, err)
			}
		}
		if _, err := stmt.Exec(ep, "1.0.0", hash, canon); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := tx.Exec(`UPDATE change_generation SET generation = generation + 1`); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// eventTap sees every message before the agentclient does, to time and
// count lifecycle events independently of its buffering.
type eventTap struct {
	*xmppclient.Client
	tap func(*xmltree.Element)
}

func (t eventTap) OnMessage(f func(*xmltree.Element)) {
	t.Client.OnMessage(func(el *xmltree.Element) {
		t.tap(el)
		f(el)
	})
}

type revKey struct {
	task string
	rev  int64
}

type markKey struct {
	task  string
	label string
}

// BenchmarkConcurrentTasks1000 runs 1,000 long-running tasks at once: each
// is admitted, waits until all 1,000 are running, then reports five
// progress updates 200 ms apart and completes. It reports lost revisions
// (gaps in a task's stored events, or a final revision without its
// event), events committed but never received by the caller, the lag from
// the executor's report to the caller's receipt, and the process's peak
// RSS (gateway and callers share the process).
func BenchmarkConcurrentTasks1000(b *testing.B) {
	const (
		nTasks   = 1000
		nConns   = 4
		progress = 5
		interval = 200 * time.Millisecond
	)
	var (
		marksMu sync.Mutex
		marks   = map[markKey]time.Time{} // executor side, before the Run call
		commits = map[markKey]time.Time{} // executor side, when the Run call returned
		running atomic.Int64
		gate    = make(chan struct{})
	)
	// report times one Run call: it returns once the revision is
	// committed, and the event is sent after the commit.
	report := func(task, label string, call func() error) error {
		t := time.Now()
		err := call()
		c := time.Now()
		marksMu.Lock()
		marks[markKey{task, label}], commits[markKey{task, label}] = t, c
		marksMu.Unlock()
		return err
	}
	steps := []taskstest.Step{{Do: func(context.Context, tasks.Call, tasks.Run) error {
		running.Add(1)
		return nil
	}}, {Gate: gate}}
	for k := 1; k <= progress; k++ {
		steps = append(steps, taskstest.Step{Do: func(ctx context.Context, call tasks.Call, run tasks.Run) error {
			select {
			case <-time.After(interval):
			case <-ctx.Done():
				return ctx.Err()
			}
			label := fmt.Sprintf("step %d", k)
			return report(call.TaskID, label, func() error {
				return run.Progress(tasks.Progress{Percent: taskstest.Percent(float64(100 * k / (progress + 1))), Message: label})
			})
		}})
	}
	steps = append(steps, taskstest.Step{Do: func(_ context.Context, call tasks.Call, run tasks.Run) error {
		return report(call.TaskID, "done", func() error { return run.Complete(*taskstest.Text("done")) })
	}})
	x := taskstest.New(tasks.Features{Progress: true, Cancel: true})
	x.Script("slow", steps...)

	users := benchUserNames("load", nConns)
	e := e2e.Start(b, e2e.Options{Agents: []e2e.Agent{{Localpart: "worker", Executor: x}}, Users: users, Mutate: benchUnlimited})
	ep := e.Endpoint("worker")

	var (
		recvMu sync.Mutex
		recv   = map[revKey]string{} // event type by (task, revision)
		lags   latSample             // executor's report → caller's receipt
		stLags latSample             // status updatedAt → caller's receipt
		dLags  latSample             // commit (Run call returned) → caller's receipt

		dups    int
		settled = map[string]bool{}
		// receivedAt holds receipts of events whose Run call had not
		// returned yet; they are timed after the run.
		receivedAt = map[markKey]time.Time{}
	)
	var pending []markKey // received before the Run call returned
	tap := func(el *xmltree.Element) {
		now := time.Now()
		ev := el.Child(ns.Task, "event")
		if ev == nil {
			return
		}
		rev, _ := strconv.ParseInt(ev.AttrValue("revision"), 10, 64)
		k := revKey{ev.AttrValue("task-id"), rev}
		typ := ev.AttrValue("type")
		var payload struct {
			Message   string `json:"message"`
			UpdatedAt string `json:"updatedAt"`
		}
		_ = json.Unmarshal([]byte(ev.Text), &payload)
		recvMu.Lock()
		defer recvMu.Unlock()
		if _, dup := recv[k]; dup {
			dups++
			return
		}
		recv[k] = typ
		label := ""
		switch typ {
		case "progress":
			label = payload.Message
		case "completed", "failed", "cancelled":
			label = "done"
			settled[k.task] = true
		case "status":
			if t, err := time.Parse(time.RFC3339Nano, payload.UpdatedAt); err == nil {
				stLags = append(stLags, now.Sub(t))
			}
		}
		if label != "" {
			mk := markKey{k.task, label}
			marksMu.Lock()
			t, ok := marks[mk]
			ct := commits[mk]
			marksMu.Unlock()
			if ok {
				lags = append(lags, now.Sub(t))
				dLags = append(dLags, now.Sub(ct))
			} else {
				// The event overtook the return of the Run call.
				pending = append(pending, mk)
				receivedAt[mk] = now
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var clients []*agentclient.Client
	for _, u := range users {
		conn, err := xmppclient.Dial(ctx, xmppclient.Options{
			JID: u + "@" + e.Server.Domain, Password: e2e.Password + u, Server: e.Server.C2SAddr,
			TLS: &tls.Config{InsecureSkipVerify: true}, IQTimeout: 30 * time.Second, Presence: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		c := agentclient.New(eventTap{conn, tap}, slog.New(slog.DiscardHandler))
		c.IQTimeout, c.Retries = 30*time.Second, 0
		clients = append(clients, c)
	}
	pinned := pinWhenReady(b, clients[0], ep, "slow")

	// Admit all tasks, 16 invokes in flight per connection.
	type admitted struct {
		c   *agentclient.Client
		acc *agentclient.Accepted
	}
	var (
		admMu sync.Mutex
		adm   []admitted
		wg    sync.WaitGroup
		work  = make(chan int)
		fails atomic.Int64
	)
	t0 := time.Now()
	for _, c := range clients {
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range work {
					acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: "slow", Version: pinned.Manifest.Version,
						ManifestHash: pinned.Manifest.Hash, Arguments: json.RawMessage(`{}`)})
					if err != nil {
						fails.Add(1)
						b.Errorf("invoke: %v", err)
						continue
					}
					admMu.Lock()
					adm = append(adm, admitted{c, acc})
					admMu.Unlock()
				}
			}()
		}
	}
	for i := range nTasks {
		work <- i
	}
	close(work)
	wg.Wait()
	admitTime := time.Since(t0)
	if fails.Load() > 0 {
		b.Fatalf("%d invokes failed", fails.Load())
	}
	testkit.WaitFor(b, 2*time.Minute, "all tasks running", func() bool { return running.Load() == nTasks })
	heapBefore := benchHeapInUse()

	cpu := startCPU(e.Server.PID())
	t0 = time.Now()
	close(gate)
	allSettled := func() bool {
		recvMu.Lock()
		defer recvMu.Unlock()
		return len(settled) == nTasks
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !allSettled() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	runTime := time.Since(t0)
	cpu.report(b, nTasks*(progress+1))
	peak := benchProcKB(os.Getpid(), "VmHWM")
	heapAfter := benchHeapInUse()

	recvMu.Lock()
	marksMu.Lock()
	for _, mk := range pending {
		if t, ok := marks[mk]; ok {
			lags = append(lags, receivedAt[mk].Sub(t))
			dLags = append(dLags, receivedAt[mk].Sub(commits[mk]))
		}
	}
	var reports latSample
	for mk, t := range marks {
		reports = append(reports, commits[mk].Sub(t))
	}
	marksMu.Unlock()
	recvMu.Unlock()

	// Reconcile: every task must be terminal in the store (task-state),
	// with one stored event per revision 1..final and nothing missing.
	var lost, undelivered, stored, notTerminal int
	for _, a := range adm {
		st, err := a.c.State(ctx, ep, a.acc.TaskID)
		if err != nil {
			b.Fatalf("task-state %s: %v", a.acc.TaskID, err)
		}
		if !st.Terminal() {
			notTerminal++
		}
		evs, err := e.Gateway.Engine.Events(ctx, a.acc.TaskID)
		if err != nil {
			b.Fatal(err)
		}
		have := map[int64]bool{}
		for _, ev := range evs {
			have[ev.Revision] = true
		}
		for r := int64(1); r <= st.Revision; r++ {
			if !have[r] {
				lost++
			}
		}
		stored += len(evs)
		recvMu.Lock()
		for _, ev := range evs {
			if _, ok := recv[revKey{a.acc.TaskID, ev.Revision}]; !ok {
				undelivered++
			}
		}
		recvMu.Unlock()
	}
	slices.Sort(lags)
	slices.Sort(stLags)
	slices.Sort(dLags)
	slices.Sort(reports)
	b.ReportMetric(float64(len(adm)), "tasks")
	b.ReportMetric(float64(lost), "lost-revisions")
	b.ReportMetric(float64(undelivered), "undelivered-events")
	b.ReportMetric(float64(notTerminal), "unsettled-tasks")
	b.ReportMetric(float64(stored), "stored-events")
	b.ReportMetric(float64(dups), "duplicate-events")
	b.ReportMetric(lags.q(0.50), "lag-p50-ms")
	b.ReportMetric(lags.q(0.99), "lag-p99-ms")
	b.ReportMetric(stLags.q(0.99), "status-lag-p99-ms")
	b.ReportMetric(reports.q(0.50), "commit-p50-ms")
	b.ReportMetric(reports.q(0.99), "commit-p99-ms")
	b.ReportMetric(dLags.q(0.50), "deliver-p50-ms")
	b.ReportMetric(dLags.q(0.99), "deliver-p99-ms")
	b.ReportMetric(admitTime.Seconds(), "admit-s")
	b.ReportMetric(runTime.Seconds(), "run-s")
	b.ReportMetric(kbToMB(peak), "peak-rss-MB")
	b.ReportMetric(float64(heapBefore)/(1<<20), "heap-running-MB")
	b.ReportMetric(float64(heapAfter)/(1<<20), "heap-settled-MB")
}

func benchHeapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// dbRow is one stored row, column values typed as SQLite holds them.
type dbRow struct {
	cols []string
	vals []any
}

func (r dbRow) get(col string) any {
	if i := slices.Index(r.cols, col); i >= 0 {
		return r.vals[i]
	}
	return nil
}

func (r dbRow) with(col string, v any) dbRow {
	out := dbRow{cols: r.cols, vals: slices.Clone(r.vals)}
	if i := slices.Index(r.cols, col); i >= 0 {
		out.vals[i] = v
	}
	return out
}

// benchReadRows reads whole rows generically; TEXT columns come back as
// strings so that they are written back as TEXT into STRICT tables.
func benchReadRows(b *testing.B, q *sql.DB, query string, args ...any) []dbRow {
	b.Helper()
	rs, err := q.Query(query, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	cols, _ := rs.Columns()
	types, _ := rs.ColumnTypes()
	var out []dbRow
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			b.Fatal(err)
		}
		for i, v := range vals {
			if bs, ok := v.([]byte); ok && strings.EqualFold(types[i].DatabaseTypeName(), "TEXT") {
				vals[i] = string(bs)
			}
		}
		out = append(out, dbRow{cols, vals})
	}
	if err := rs.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

func benchInsertSQL(table string, cols []string) string {
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table, strings.Join(cols, ", "),
		strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", "))
}

// benchIDPrefix is an identifier without its 22 random characters.
func benchIDPrefix(id string) string { return id[:len(id)-22] }

// BenchmarkRecovery restarts the gateway over a store holding 10,000
// non-terminal (running) and 100,000 terminal (completed) tasks, and
// measures the time until it is ready again (store open, directory loaded,
// every unsettled task recovered and committed, component handshake done)
// and task-state latency over 1,000 random tasks right afterwards.
//
// The tasks are copies of two real tasks the engine ran through Prosody
// (one completed echo, one running "wait" captured while it ran), written
// in one transaction with fresh task, request and event IDs: admitting
// 110,000 tasks one by one would take most of the time budget. The
// event-revision trigger is suspended during the copy only because
// historical events are inserted after their task's final row; every copy
// holds exactly the rows the engine wrote for its template.
func BenchmarkRecovery(b *testing.B) {
	const (
		nRunning  = 10000
		nTerminal = 100000
		nQueries  = 1000
	)
	e := e2e.Start(b, e2e.Options{Agents: []e2e.Agent{{Localpart: "echo"}}, Users: []string{"alice"}, Mutate: benchUnlimited})
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ep := e.Endpoint("echo")
	done, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"template"}`), agentclient.CallOptions{})
	if err != nil || done.State != "completed" {
		b.Fatalf("template echo: %v %+v", err, done)
	}
	p := pinWhenReady(b, c, ep, "wait")
	acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: "wait", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{}`)})
	if err != nil {
		b.Fatal(err)
	}
	testkit.WaitFor(b, 30*time.Second, "the template task running", func() bool {
		st, err := c.State(ctx, ep, acc.TaskID)
		return err == nil && st.State == "running"
	})
	rd := e.Gateway.DB.Read
	tplRun := benchReadRows(b, rd, "SELECT * FROM tasks WHERE id = ?", acc.TaskID)
	tplRunEv := benchReadRows(b, rd, "SELECT * FROM task_events WHERE task_id = ? ORDER BY revision", acc.TaskID)
	tplDone := benchReadRows(b, rd, "SELECT * FROM tasks WHERE id = ?", done.Accepted.TaskID)
	tplDoneEv := benchReadRows(b, rd, "SELECT * FROM task_events WHERE task_id = ? ORDER BY revision", done.Accepted.TaskID)
	if len(tplRun) != 1 || len(tplDone) != 1 || len(tplRunEv) == 0 || len(tplDoneEv) == 0 {
		b.Fatalf("templates: %d running rows (%d events), %d completed rows (%d events)", len(tplRun), len(tplRunEv), len(tplDone), len(tplDoneEv))
	}
	if s := tplRun[0].get("state"); s != "running" {
		b.Fatalf("running template is %v", s)
	}
	e.StopGateway()

	// Seed.
	t0 := time.Now()
	db, err := sqlite.Open(ctx, filepath.Join(e.Dir, "agentgw.db"))
	if err != nil {
		b.Fatal(err)
	}
	// A large page cache: the copies land at random places in the ID
	// indexes.
	if _, err := db.Write.Exec("PRAGMA cache_size = -262144"); err != nil {
		b.Fatal(err)
	}
	tx, err := db.Write.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	var trigger string
	if err := tx.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'task_events_at_revision'`).Scan(&trigger); err != nil {
		b.Fatalf("event trigger: %v", err)
	}
	if _, err := tx.Exec(`DROP TRIGGER task_events_at_revision`); err != nil {
		b.Fatal(err)
	}
	insTask, err := tx.Prepare(benchInsertSQL("tasks", tplRun[0].cols))
	if err != nil {
		b.Fatal(err)
	}
	insEvent, err := tx.Prepare(benchInsertSQL("task_events", tplRunEv[0].cols))
	if err != nil {
		b.Fatal(err)
	}
	taskPfx := benchIDPrefix(acc.TaskID)
	reqPfx := benchIDPrefix(tplRun[0].get("request_id").(string))
	evPfx := benchIDPrefix(tplRunEv[0].get("event_id").(string))
	var seeded []string
	copyTask := func(tpl dbRow, evs []dbRow) {
		id := ids.New(taskPfx)
		seeded = append(seeded, id)
		r := tpl.with("id", id).with("request_id", ids.New(reqPfx))
		if _, err := insTask.Exec(r.vals...); err != nil {
			b.Fatalf("insert task: %v", err)
		}
		for _, ev := range evs {
			r := ev.with("task_id", id).with("event_id", ids.New(evPfx))
			if _, err := insEvent.Exec(r.vals...); err != nil {
				b.Fatalf("insert event: %v", err)
			}
		}
	}
	for range nTerminal {
		copyTask(tplDone[0], tplDoneEv)
	}
	for range nRunning {
		copyTask(tplRun[0], tplRunEv)
	}
	if _, err := tx.Exec(trigger); err != nil {
		b.Fatalf("restoring the event trigger: %v", err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	var unsettledBefore, total int
	db.Read.QueryRow(`SELECT COUNT(*) FROM tasks WHERE result IS NULL`).Scan(&unsettledBefore)
	db.Read.QueryRow(`SELECT COUNT(*) FROM tasks`).Scan(&total)
	db.Close()
	seed := time.Since(t0)
	fi, _ := os.Stat(filepath.Join(e.Dir, "agentgw.db"))
	b.Logf("seeded %d tasks (%d unsettled) in %v", total, unsettledBefore, seed)

	t0 = time.Now()
	e.StartGateway()
	ready := time.Since(t0)
	var unsettledAfter int
	e.Gateway.DB.Read.QueryRow(`SELECT COUNT(*) FROM tasks WHERE result IS NULL`).Scan(&unsettledAfter)

	c2, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var lat latSample
	interrupted := 0
	for range nQueries {
		id := seeded[rng.IntN(len(seeded))]
		t := time.Now()
		st, err := c2.State(ctx, ep, id)
		d := time.Since(t)
		if err != nil {
			b.Fatalf("task-state: %v", err)
		}
		if st.State == "failed" {
			interrupted++
		}
		lat = append(lat, d)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(total), "tasks")
	b.ReportMetric(float64(unsettledBefore), "unsettled-before")
	b.ReportMetric(float64(unsettledAfter), "unsettled-after")
	b.ReportMetric(ready.Seconds(), "ready-s")
	b.ReportMetric(lat.q(0.50), "state-p50-ms")
	b.ReportMetric(lat.q(0.99), "state-p99-ms")
	b.ReportMetric(seed.Seconds(), "seed-s")
	if fi != nil {
		b.ReportMetric(float64(fi.Size())/(1<<20), "db-MB")
	}
	b.ReportMetric(float64(interrupted), "sampled-interrupted")
}
