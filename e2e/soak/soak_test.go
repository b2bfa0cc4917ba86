package soak

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // count the rows the purge keeps

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// Soak parameters. The task engine purges every minute (tasks.Config
// PurgeInterval, not configurable) whatever is past retention and replay;
// both are set to soakRetention so that the store reaches its steady state
// within soakRetention+soakPurgeEvery.
const (
	soakClients    = 4
	soakStatic     = 6 // static-manifest agents, for directory paging and search
	soakRetention  = 10 * time.Second
	soakPurgeEvery = time.Minute
	soakOpTimeout  = 60 * time.Second
)

// Slope limits per minute, over the samples of the second half of the work
// (from the first sample at which half of the run's tasks had been
// created; at least the last four samples); the first half is warm-up.
// The half is counted in tasks rather than minutes because the caches
// below fill by count: on a shared machine the rate dips, and a half
// counted in minutes then still holds warm-up. At the 1000-2000 tasks a
// minute this workload runs, the long-run limits are crossed by a leak of
// half a kilobyte of heap per task, one goroutine per 500 tasks or one
// descriptor per 1000; samples are taken with the workload paused and
// nothing in flight, so their noise stays well below.
type soakLimits struct {
	RSSMBPerMin     float64
	HeapMBPerMin    float64
	GoroutinePerMin float64
	FDPerMin        float64
	DBMBPerMin      float64
}

// Several caches are bounded by count rather than time and fill at the
// workload's pace for the first three to four minutes (the event notifier
// remembers 20000 sent events, the metrics up to 100000 admission times,
// SQLite's page caches and the WAL grow to their high-water marks, the
// latter at the largest purge; with no journal_size_limit the WAL file
// never shrinks, and its high-water mark creeps up by a fifth of a
// megabyte every few minutes as checkpoints now and then meet a reader).
// A 2-minute smoke run is inside that
// warm-up, so its memory and store limits only catch gross leaks (10 KB
// per task and more); its goroutine and descriptor limits stay tight, and
// the purge bound on the tasks table is checked exactly in both.
var (
	soakLimitsLong  = soakLimits{RSSMBPerMin: 1, HeapMBPerMin: 0.5, GoroutinePerMin: 2, FDPerMin: 1, DBMBPerMin: 0.5}
	soakLimitsSmoke = soakLimits{RSSMBPerMin: 16, HeapMBPerMin: 8, GoroutinePerMin: 10, FDPerMin: 4, DBMBPerMin: 8}
)

// soakSample is one measurement of the gateway process.
type soakSample struct {
	Elapsed    time.Duration
	RSSMB      float64 // VmRSS
	HeapMB     float64 // live heap at the last GC: next_gc / (1 + GOGC/100)
	Goroutines float64 // go_goroutines
	FDs        int     // entries of /proc/<pid>/fd
	DBMB       float64 // agentgw.db + agentgw.db-wal
	WALMB      float64 // agentgw.db-wal alone
	FreeMB     float64 // free pages inside agentgw.db
	TaskRows   int64   // rows of the tasks table
	EventRows  int64   // rows of task_events
	Created    int64   // tasks the workload had created
	Ops        int64
	Errors     int64
}

// TestSoak runs a bounded mixed workload (discovery, calls, progress,
// input, cancels and replays) from several connections against `agentgw
// serve` as a subprocess, with the real MCP server-everything and the
// reference xAgent connector behind it, samples the process's RSS, heap,
// goroutines, descriptors and store size, and fails on sustained growth or
// on any unexpected outcome. It runs only when SOAK_DURATION sets the
// length (make soak; SOAK_DURATION=2m for the short smoke run), so make
// test does not spend minutes on it; SOAK_OUT names a CSV file for the
// samples and SOAK_REPORT a Markdown report.
func TestSoak(t *testing.T) {
	v := os.Getenv("SOAK_DURATION")
	if v == "" {
		t.Skip("soak: runs only with SOAK_DURATION set (make soak)")
	}
	if testing.Short() {
		t.Skip("soak: skipped under -short")
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 30*time.Second {
		t.Fatalf("SOAK_DURATION=%q: want a Go duration of at least 30s", v)
	}
	dur := d
	smoke := dur < 5*time.Minute
	interval, limits := time.Minute, soakLimitsLong
	if smoke {
		interval, limits = 10*time.Second, soakLimitsSmoke
	}
	if v := os.Getenv("SOAK_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("SOAK_INTERVAL=%q: want a Go duration of at least 1s", v)
		}
		interval = d
	}
	e2e.Binary(t)

	key, form := "soak-key-"+ids.New(""), "soak-form-"+ids.New("")
	conn, err := connectortest.Start(connectortest.Options{APIKey: key, FormToken: form})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	t.Setenv("AGENTGW_SOAK_CONNECTOR_KEY", key)
	t.Setenv("AGENTGW_SOAK_FORM_TOKEN", form)

	var agents []e2e.Agent
	for i := 0; i < soakStatic; i++ {
		agents = append(agents, e2e.Agent{Localpart: fmt.Sprintf("static%d", i), NoBackend: true})
	}
	var users []string
	for i := 0; i < soakClients; i++ {
		users = append(users, fmt.Sprintf("soak%d", i))
	}
	metricsAddr := e2e.FreeAddr(t)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	// A second server-everything answers the elicitations alone: an MCP
	// server before 2026-07-28 sends elicitation/create without naming its
	// tool call, so the bridge refuses to guess whenever another call is in
	// flight at the same server (agentgw:unattributed-elicitation). The
	// workload runs one input call at a time there.
	toml := e2e.EverythingTOML(t, "everything", srv.ComponentDomain) + e2e.EverythingTOML(t, "asker", srv.ComponentDomain) + fmt.Sprintf(`
[[agents]]
jid = "im@%s"
[agents.connector]
base_url = %q
api_key_env = "AGENTGW_SOAK_CONNECTOR_KEY"

[tasks]
retention_seconds = %d
replay_seconds = %d

[metrics]
listen = %q

[federation]
invoke_per_second = 100000
invoke_burst = 100000
input_per_second = 100000
input_burst = 100000
discovery_per_second = 100000
discovery_burst = 100000
schema_per_second = 100000
schema_burst = 100000
`, srv.ComponentDomain, conn.URL(), int(soakRetention/time.Second), int(soakRetention/time.Second), metricsAddr)
	e := e2e.Prepare(t, e2e.Options{Server: srv, Agents: agents, Users: users, TOML: toml})
	// Info level: a debug log of a 20 minute run is gigabytes.
	cfg, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.ConfigPath, []byte(strings.Replace(string(cfg), `level = "debug"`, `level = "info"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}

	gw := e.Serve("soak")
	pid := gw.PID()
	ctx, cancel := context.WithTimeout(context.Background(), dur+5*time.Minute)
	defer cancel()

	clients := make([]*agentclient.Client, soakClients)
	for i, u := range users {
		clients[i] = e.Dial(u)
		clients[i].IQTimeout = 20 * time.Second
	}
	mcpEP, askEP, imEP := e.Endpoint("everything"), e.Endpoint("asker"), e.Endpoint("im")
	e2e.WaitPinned(t, ctx, clients[0], mcpEP, "trigger-long-running-operation")
	e2e.WaitPinned(t, ctx, clients[0], askEP, "trigger-elicitation-request")
	out := e.Agentgw(0, "connector", "auth", "--config", e.ConfigPath, "--flow", "token_form",
		"--field", "account=soak", "--field-env", "token=AGENTGW_SOAK_FORM_TOKEN", imEP.String())
	if strings.Contains(out, form) || strings.Contains(out, key) {
		t.Fatalf("connector auth output leaks a secret")
	}
	e2e.WaitPinned(t, ctx, clients[0], imEP, "slow_count")

	w := &soakWorkload{
		gw: e.GatewayJID(), mcp: mcpEP, ask: askEP, im: imEP, endpoints: soakStatic + 3,
		errs: map[string][]string{}, ops: map[string]*atomic.Int64{}, fails: map[string]*atomic.Int64{},
	}
	for i := 0; i < soakStatic; i++ {
		w.static = append(w.static, e.Endpoint(fmt.Sprintf("static%d", i)))
	}
	for _, k := range soakKinds {
		w.ops[k.name], w.fails[k.name] = &atomic.Int64{}, &atomic.Int64{}
	}

	db, err := sql.Open("sqlite3", "file:"+filepath.Join(e.Dir, "agentgw.db")+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	start := time.Now()
	sample := func() soakSample {
		s := soakSample{Elapsed: time.Since(start).Round(time.Second), Created: w.created.Load(), Ops: w.total.Load(), Errors: w.failed.Load()}
		var err error
		if s.RSSMB, err = soakRSS(pid); err != nil {
			t.Fatalf("gateway process: %v\n%s", err, e2e.Tail(gw.Log(), 3000))
		}
		if s.FDs, err = soakFDs(pid); err != nil {
			t.Fatal(err)
		}
		m, err := soakScrape(metricsAddr)
		if err != nil {
			t.Fatal(err)
		}
		// The heap goal is set from the marked live heap at the end of each
		// GC, so unlike heap_inuse it does not swing with garbage.
		gogc := 100.0
		if v, ok := m["go_gc_gogc_percent"]; ok && v > 0 {
			gogc = v
		}
		s.Goroutines, s.HeapMB = m["go_goroutines"], m["go_memstats_next_gc_bytes"]/(1+gogc/100)/(1<<20)
		for _, f := range []string{"agentgw.db", "agentgw.db-wal"} {
			if fi, err := os.Stat(filepath.Join(e.Dir, f)); err == nil {
				s.DBMB += float64(fi.Size()) / (1 << 20)
				if f == "agentgw.db-wal" {
					s.WALMB = float64(fi.Size()) / (1 << 20)
				}
			}
		}
		var free, pageSize int64
		if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM task_events), (SELECT freelist_count FROM pragma_freelist_count), (SELECT page_size FROM pragma_page_size)`).Scan(&s.TaskRows, &s.EventRows, &free, &pageSize); err != nil {
			t.Fatalf("count tasks: %v", err)
		}
		s.FreeMB = float64(free*pageSize) / (1 << 20)
		return s
	}

	// Workers hold gate for reading during each operation; the sampler
	// takes it for writing, so every sample sees nothing in flight.
	var gate sync.RWMutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func(i int, c *agentclient.Client) {
			defer wg.Done()
			for n := i; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				gate.RLock()
				w.run(ctx, c, soakKinds[n%len(soakKinds)])
				gate.RUnlock()
			}
		}(i, c)
	}
	quiet := func() soakSample {
		gate.Lock()
		defer gate.Unlock()
		time.Sleep(500 * time.Millisecond) // event sends and bridge cleanup finish
		return sample()
	}

	samples := []soakSample{quiet()}
	t.Logf("soak: %v with %d connections, a sample every %v (pid %d)", dur, soakClients, interval, pid)
	tick := time.NewTicker(interval)
	deadline := time.After(dur)
loop:
	for {
		select {
		case <-tick.C:
			if time.Since(start) >= dur {
				break loop
			}
			s := quiet()
			samples = append(samples, s)
			t.Logf("soak: %s", s.row())
			if len(samples) > 1 && s.Ops == samples[len(samples)-2].Ops {
				t.Errorf("no operation completed in the last interval")
				break loop
			}
		case <-deadline:
			break loop
		case <-gw.Exited():
			t.Errorf("the gateway exited during the soak:\n%s", e2e.Tail(gw.Log(), 4000))
			break loop
		}
	}
	tick.Stop()
	close(stop)
	wg.Wait()
	if len(samples) == 0 || samples[len(samples)-1].Elapsed < dur-interval/2 {
		samples = append(samples, quiet())
	}

	// Report.
	var table strings.Builder
	table.WriteString(soakHeader + "\n")
	for _, s := range samples {
		table.WriteString(s.row() + "\n")
	}
	t.Logf("soak samples:\n%s", table.String())
	kinds := w.summary()
	t.Logf("soak operations:\n%s", kinds)

	last := samples[len(samples)-1]
	from := 0
	for i, s := range samples {
		if 2*s.Created >= last.Created {
			from = i
			break
		}
	}
	from = max(0, min(from, len(samples)-4))
	half := samples[from:]
	type check struct {
		name  string
		unit  string
		slope float64
		limit float64
	}
	checks := []check{
		{"RSS", "MB/min", soakSlope(half, func(s soakSample) float64 { return s.RSSMB }), limits.RSSMBPerMin},
		{"Go live heap", "MB/min", soakSlope(half, func(s soakSample) float64 { return s.HeapMB }), limits.HeapMBPerMin},
		{"goroutines", "/min", soakSlope(half, func(s soakSample) float64 { return s.Goroutines }), limits.GoroutinePerMin},
		{"open fds", "/min", soakSlope(half, func(s soakSample) float64 { return float64(s.FDs) }), limits.FDPerMin},
		{"DB + WAL", "MB/min", soakSlope(half, func(s soakSample) float64 { return s.DBMB }), limits.DBMBPerMin},
	}
	var slopes strings.Builder
	fmt.Fprintf(&slopes, "| metric | slope over the second half of the work (%d samples from %v, %d of %d tasks created) | limit | |\n|---|---|---|---|\n", len(half), half[0].Elapsed, half[0].Created, last.Created)
	for _, c := range checks {
		verdict := "ok"
		if c.slope >= c.limit {
			verdict = "FAIL"
			t.Errorf("%s grows %.3f %s over the second half of the work, limit %.3f %s", c.name, c.slope, c.unit, c.limit, c.unit)
		}
		fmt.Fprintf(&slopes, "| %s | %+.3f %s | < %.2f %s | %s |\n", c.name, c.slope, c.unit, c.limit, c.unit, verdict)
	}
	t.Logf("soak slopes:\n%s", slopes.String())

	// The purge bounds the store: at every sample after the first purge
	// the tasks table holds no more than the tasks created within
	// retention + purge period (+ slack for the sampling grid).
	window := soakRetention + soakPurgeEvery + 15*time.Second
	for i, s := range samples {
		if s.Elapsed < window {
			continue
		}
		older := samples[0]
		for _, p := range samples[:i] {
			if p.Elapsed <= s.Elapsed-window {
				older = p
			}
		}
		if bound := s.Created - older.Created; s.TaskRows > bound {
			t.Errorf("at %v the store holds %d tasks, more than the %d created in the last %v: the purge does not keep up",
				s.Elapsed, s.TaskRows, bound, s.Elapsed-older.Elapsed)
		} else if s.EventRows > 10*bound {
			// No task here has more than about six events.
			t.Errorf("at %v the store holds %d events for at most %d tasks: events outlive their tasks", s.Elapsed, s.EventRows, bound)
		}
	}
	if dur >= window && last.TaskRows >= last.Created {
		t.Errorf("the store holds %d tasks of %d created: nothing was purged", last.TaskRows, last.Created)
	}

	// Every operation must have had the expected outcome.
	if n := w.failed.Load(); n > 0 {
		t.Errorf("%d of %d operations had an unexpected outcome; first of each kind:\n%s", n, w.total.Load(), w.firstErrors())
	}
	for _, k := range soakKinds {
		if w.ops[k.name].Load() == 0 {
			t.Errorf("no %s operation ran", k.name)
		}
	}
	progressCalls := w.ops["progress-connector"].Load() + w.ops["progress-mcp"].Load()
	progressPerCall := float64(w.progress.Load()) / float64(max(progressCalls, 1))
	t.Logf("progress: %d events over %d calls (%.2f per call, 3 sent)", w.progress.Load(), progressCalls, progressPerCall)
	if progressPerCall < 1 {
		t.Errorf("progress calls saw %.2f progress events each on average, want at least 1 of the 3 sent", progressPerCall)
	}

	// The gateway stops cleanly and logged no errors.
	gw.Stop()
	if st := gw.Cmd.ProcessState; st == nil || st.ExitCode() != 0 {
		t.Errorf("gateway exit: %v", st)
	}
	log := gw.Log()
	errLines := regexp.MustCompile(`(?m)^.*level=ERROR.*$`).FindAllString(log, -1)
	warnLines := regexp.MustCompile(`(?m)^.*level=WARN.*$`).FindAllString(log, -1)
	t.Logf("gateway log: %d bytes, %d ERROR lines, %d WARN lines", len(log), len(errLines), len(warnLines))
	for i, l := range warnLines {
		if i == 5 {
			break
		}
		t.Logf("  warn: %s", l)
	}
	if len(errLines) > 0 {
		t.Errorf("the gateway logged %d errors, first: %s", len(errLines), errLines[0])
	}

	if p := os.Getenv("SOAK_OUT"); p != "" {
		if err := soakWriteCSV(p, samples); err != nil {
			t.Errorf("SOAK_OUT: %v", err)
		}
	}
	if p := os.Getenv("SOAK_REPORT"); p != "" {
		var r strings.Builder
		fmt.Fprintf(&r, "Duration %v, %d client connections, a sample every %v (workload paused, nothing in flight); retention and replay %v; purge every %v.\n\n",
			dur, soakClients, interval, soakRetention, soakPurgeEvery)
		r.WriteString("| elapsed | RSS MB | live heap MB | goroutines | fds | DB+WAL MB | of which WAL | free in DB | task rows | event rows | tasks created | operations | unexpected |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range samples {
			fmt.Fprintf(&r, "| %v | %.1f | %.1f | %.0f | %d | %.2f | %.2f | %.2f | %d | %d | %d | %d | %d |\n", s.Elapsed, s.RSSMB, s.HeapMB, s.Goroutines, s.FDs, s.DBMB, s.WALMB, s.FreeMB, s.TaskRows, s.EventRows, s.Created, s.Ops, s.Errors)
		}
		r.WriteString("\n" + slopes.String() + "\n")
		r.WriteString("| operation | count | unexpected |\n|---|---|---|\n" + kinds)
		fmt.Fprintf(&r, "\nProgress calls saw %.2f of their 3 progress events on average (progress is advisory).\n", progressPerCall)
		fmt.Fprintf(&r, "\nGateway log: %d ERROR lines, %d WARN lines. Result: ", len(errLines), len(warnLines))
		if t.Failed() {
			r.WriteString("FAIL\n")
		} else {
			r.WriteString("pass\n")
		}
		if err := os.WriteFile(p, []byte(r.String()), 0o644); err != nil {
			t.Errorf("SOAK_REPORT: %v", err)
		}
	}
}

const soakHeader = "elapsed   RSS_MB  heap_MB  goroutines  fds  db+wal_MB  wal_MB  free_MB  task_rows  event_rows  created     ops  unexpected"

func (s soakSample) row() string {
	return fmt.Sprintf("%7v  %7.1f  %7.1f  %10.0f  %3d  %9.2f  %6.2f  %7.2f  %9d  %10d  %7d  %6d  %10d",
		s.Elapsed, s.RSSMB, s.HeapMB, s.Goroutines, s.FDs, s.DBMB, s.WALMB, s.FreeMB, s.TaskRows, s.EventRows, s.Created, s.Ops, s.Errors)
}

func soakWriteCSV(path string, samples []soakSample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"elapsed_s", "rss_mb", "live_heap_mb", "goroutines", "fds", "db_wal_mb", "wal_mb", "free_mb", "task_rows", "event_rows", "tasks_created", "ops", "unexpected"})
	for _, s := range samples {
		w.Write([]string{
			strconv.Itoa(int(s.Elapsed.Seconds())), fmt.Sprintf("%.2f", s.RSSMB), fmt.Sprintf("%.2f", s.HeapMB),
			fmt.Sprintf("%.0f", s.Goroutines), strconv.Itoa(s.FDs), fmt.Sprintf("%.3f", s.DBMB), fmt.Sprintf("%.3f", s.WALMB), fmt.Sprintf("%.3f", s.FreeMB),
			strconv.FormatInt(s.TaskRows, 10), strconv.FormatInt(s.EventRows, 10), strconv.FormatInt(s.Created, 10), strconv.FormatInt(s.Ops, 10), strconv.FormatInt(s.Errors, 10),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// soakSlope is the least-squares slope of f over the samples, per minute.
func soakSlope(samples []soakSample, f func(soakSample) float64) float64 {
	n := float64(len(samples))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range samples {
		x, y := s.Elapsed.Minutes(), f(s)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

func soakRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseFloat(f[0], 64)
				return kb / 1024, err
			}
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

func soakFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// soakScrape reads the unlabelled series of the gateway's /metrics.
func soakScrape(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(body), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || strings.HasPrefix(l, "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	for _, k := range []string{"go_goroutines", "go_memstats_next_gc_bytes"} {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("/metrics has no %s", k)
		}
	}
	return out, nil
}

// soakWorkload is the mixed workload and its accounting.
type soakWorkload struct {
	gw, mcp, ask, im jid.JID
	static           []jid.JID
	askMu            sync.Mutex // one call at a time at ask
	endpoints        int        // directory size

	total, failed, created atomic.Int64
	progress               atomic.Int64 // progress events seen by the progress calls
	ops, fails             map[string]*atomic.Int64
	mu                     sync.Mutex
	errs                   map[string][]string
}

type soakKind struct {
	name string
	run  func(w *soakWorkload, ctx context.Context, c *agentclient.Client) error
}

var soakKinds = []soakKind{
	{"discovery", (*soakWorkload).discovery},
	{"echo-connector", (*soakWorkload).echoConnector},
	{"echo-mcp", (*soakWorkload).echoMCP},
	{"progress-connector", (*soakWorkload).progressConnector},
	{"progress-mcp", (*soakWorkload).progressMCP},
	{"input-mcp", (*soakWorkload).input},
	{"cancel-mcp", (*soakWorkload).cancel},
	{"replay-connector", (*soakWorkload).replay},
}

func (w *soakWorkload) run(ctx context.Context, c *agentclient.Client, k soakKind) {
	ctx, cancel := context.WithTimeout(ctx, soakOpTimeout)
	defer cancel()
	err := k.run(w, ctx, c)
	w.total.Add(1)
	w.ops[k.name].Add(1)
	if err != nil {
		w.failed.Add(1)
		w.fails[k.name].Add(1)
		w.mu.Lock()
		if len(w.errs[k.name]) < 3 {
			w.errs[k.name] = append(w.errs[k.name], err.Error())
		}
		w.mu.Unlock()
	}
}

func (w *soakWorkload) summary() string {
	var b strings.Builder
	for _, k := range soakKinds {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", k.name, w.ops[k.name].Load(), w.fails[k.name].Load())
	}
	return b.String()
}

func (w *soakWorkload) firstErrors() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var names []string
	for k := range w.errs {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		for _, e := range w.errs[k] {
			fmt.Fprintf(&b, "  %s: %s\n", k, e)
		}
	}
	return b.String()
}

// discovery walks the directory in pages of 3, reads one static
// endpoint's information, manifest, tool items and schema, and searches.
func (w *soakWorkload) discovery(ctx context.Context, c *agentclient.Client) error {
	info, err := c.Info(ctx, w.gw, "")
	if err != nil {
		return fmt.Errorf("gateway info: %w", err)
	}
	if !info.Features[ns.Directory] {
		return errors.New("gateway info lacks the directory feature")
	}
	items, err := c.AllItems(ctx, w.gw, ns.Directory, 3)
	if err != nil {
		return fmt.Errorf("directory: %w", err)
	}
	if len(items) != w.endpoints {
		return fmt.Errorf("directory lists %d endpoints, want %d", len(items), w.endpoints)
	}
	ep := w.static[int(w.total.Load())%len(w.static)]
	ei, err := c.Endpoint(ctx, ep)
	if err != nil || !ei.IsEndpoint {
		return fmt.Errorf("endpoint info %s: %+v %v", ep, ei, err)
	}
	m, err := c.GetManifest(ctx, ep, "")
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if m.Hash != ei.ManifestHash {
		return errors.New("manifest hash differs from the advertised one")
	}
	tools, err := c.ToolItems(ctx, ep, m.Version)
	if err != nil || len(tools) != 5 {
		return fmt.Errorf("tool items: %d %v", len(tools), err)
	}
	s, err := c.GetSchema(ctx, ep, "echo", m.Version, "input", m.Hash)
	if err != nil || agentclient.HashOf(s.JSON) != s.SchemaHash {
		return fmt.Errorf("schema: %v", err)
	}
	res, err := c.SearchPage(ctx, w.gw, "STATIC", 10, "")
	if err != nil || len(res.Items) != len(w.static) {
		return fmt.Errorf("search: %+v %v", res, err)
	}
	return nil
}

func (w *soakWorkload) call(ctx context.Context, c *agentclient.Client, ep jid.JID, tool, args string, opts agentclient.CallOptions) (*agentclient.Outcome, error) {
	opts.OnAccepted = func(*agentclient.Accepted) { w.created.Add(1) }
	if opts.RecoverAfter == 0 {
		opts.RecoverAfter = 2 * time.Second
	}
	return c.Call(ctx, ep, tool, json.RawMessage(args), opts)
}

func soakCompleted(out *agentclient.Outcome, err error, marker string) error {
	if err != nil {
		return err
	}
	if out.State != "completed" {
		return fmt.Errorf("state %s: %.300s", out.State, out.Payload)
	}
	if marker != "" && !strings.Contains(string(out.Payload), marker) {
		return fmt.Errorf("result lacks %q: %.300s", marker, out.Payload)
	}
	return nil
}

func (w *soakWorkload) echoConnector(ctx context.Context, c *agentclient.Client) error {
	m := ids.New("m-")
	out, err := w.call(ctx, c, w.im, "echo", `{"text":"`+m+`"}`, agentclient.CallOptions{})
	return soakCompleted(out, err, m)
}

func (w *soakWorkload) echoMCP(ctx context.Context, c *agentclient.Client) error {
	m := ids.New("m-")
	out, err := w.call(ctx, c, w.mcp, "echo", `{"message":"`+m+`"}`, agentclient.CallOptions{})
	return soakCompleted(out, err, m)
}

// Progress is advisory (the bridges drop intermediate steps when the
// engine is busy), so a call with fewer than its three steps is not an
// error; the run checks the average instead.
func (w *soakWorkload) progressConnector(ctx context.Context, c *agentclient.Client) error {
	out, err := w.call(ctx, c, w.im, "slow_count", `{"steps":3,"delay_ms":40}`, agentclient.CallOptions{OnProgress: func(agentclient.Progress) { w.progress.Add(1) }})
	return soakCompleted(out, err, "")
}

func (w *soakWorkload) progressMCP(ctx context.Context, c *agentclient.Client) error {
	out, err := w.call(ctx, c, w.mcp, "trigger-long-running-operation", `{"duration":0.6,"steps":3}`, agentclient.CallOptions{OnProgress: func(agentclient.Progress) { w.progress.Add(1) }})
	return soakCompleted(out, err, "")
}

func (w *soakWorkload) input(ctx context.Context, c *agentclient.Client) error {
	m := ids.New("n-")
	asked := 0
	w.askMu.Lock()
	defer w.askMu.Unlock()
	out, err := w.call(ctx, c, w.ask, "trigger-elicitation-request", `{}`, agentclient.CallOptions{
		OnInput: func(context.Context, agentclient.InputRequest) (json.RawMessage, error) {
			asked++
			return json.RawMessage(`{"name":"` + m + `","check":true}`), nil
		},
	})
	if err := soakCompleted(out, err, m); err != nil {
		return err
	}
	if asked != 1 {
		return fmt.Errorf("asked %d times", asked)
	}
	return nil
}

// cancel starts a long operation, waits until it runs, cancels it and
// expects the cancelled state.
func (w *soakWorkload) cancel(ctx context.Context, c *agentclient.Client) error {
	p, err := c.Pin(ctx, w.mcp, "trigger-long-running-operation")
	if err != nil {
		return err
	}
	acc, err := c.Invoke(ctx, w.mcp, &agentclient.InvokeRequest{Tool: p.Tool.Name, Version: p.Manifest.Version,
		ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{"duration":30,"steps":30}`)})
	if err != nil {
		return err
	}
	w.created.Add(1)
	reason := "soak cancel"
	for attempt := 0; ; attempt++ {
		st, err := c.State(ctx, w.mcp, acc.TaskID)
		if err != nil {
			return fmt.Errorf("state: %w", err)
		}
		if st.Terminal() {
			return fmt.Errorf("settled %s before the cancel", st.State)
		}
		if st.State != "running" {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		_, err = c.Cancel(ctx, w.mcp, acc.TaskID, st.Revision, &reason)
		if err == nil {
			break
		}
		// A progress event may move the revision between the two IQs.
		if agentclient.Condition(err) != "conflict" || attempt > 20 {
			return fmt.Errorf("cancel: %w", err)
		}
	}
	out, err := c.Follow(ctx, w.mcp, acc, agentclient.CallOptions{RecoverAfter: 2 * time.Second})
	if err != nil {
		return err
	}
	if out.State != "cancelled" {
		return fmt.Errorf("after cancel: %s %.300s", out.State, out.Payload)
	}
	return nil
}

// replay invokes twice with one request-id, then once more after the task
// settled: all three acceptances name the same task.
func (w *soakWorkload) replay(ctx context.Context, c *agentclient.Client) error {
	p, err := c.Pin(ctx, w.im, "echo")
	if err != nil {
		return err
	}
	m := ids.New("r-")
	req := agentclient.InvokeRequest{RequestID: ids.New("req-"), Tool: "echo", Version: p.Manifest.Version,
		ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{"text":"` + m + `"}`)}
	r1, r2, r3 := req, req, req
	a1, err := c.Invoke(ctx, w.im, &r1)
	if err != nil {
		return err
	}
	w.created.Add(1)
	a2, err := c.Invoke(ctx, w.im, &r2)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	out, err := c.Follow(ctx, w.im, a1, agentclient.CallOptions{RecoverAfter: 2 * time.Second})
	if err := soakCompleted(out, err, m); err != nil {
		return err
	}
	a3, err := c.Invoke(ctx, w.im, &r3)
	if err != nil {
		return fmt.Errorf("replay after settling: %w", err)
	}
	for _, a := range []*agentclient.Accepted{a2, a3} {
		if a.TaskID != a1.TaskID || a.Created != a1.Created || a.Revision != a1.Revision {
			return fmt.Errorf("replay answered %+v, want the original %+v", *a, *a1)
		}
	}
	return nil
}
