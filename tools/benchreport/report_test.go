package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/agentgw/agentgw/e2e/bench
cpu: AMD EPYC
BenchmarkAdmissionBaseline-2   	   10000	   1924637 ns/op	       500.0 admissions/s	        16.02 p50-ms	      1860 p99-ms
BenchmarkAdmissionBaselineEvents-2   	    1000	   2788099 ns/op	       240.0 admissions/s	        16.02 p50-ms	      1860 p99-ms
BenchmarkAdmission-2           	    1632	   2788099 ns/op	        68.68 %-of-baseline	       200.0 admissions/s	        56.67 p50-ms	      1583 p99-ms
BenchmarkMCPEcho/callers=32-2        	       1	13763894303 ns/op	         1.259 %-of-direct	        22.07 calls/s	      1752 direct-calls/s	         3.729 direct-p50-ms	       128.3 direct-p99-ms	      1032 p50-ms	       276.7 p50-x-direct	      3464 p99-ms
BenchmarkConcurrentTasks1000-2   	       1	8617787487 ns/op	         0 lost-revisions	 0 undelivered-events
--- FAIL: BenchmarkRecovery
PASS
pkg: github.com/agentgw/agentgw/directory
=== RUN   TestMemory10000Endpoints
    scale_test.go:125: 10000 endpoints (21.3 MB canonical): live heap +38.2 MB, heap in use +40.0 MB, RSS +60.1 MB (now 80.0 MB), load 1.2s
BenchmarkList50Of10000/after-middle-2   	  100	     12000 ns/op
BenchmarkList50Of10000/after-middle-2   	  100	     14000 ns/op
BenchmarkList50Of10000/after-middle-2   	  100	     99000 ns/op
`

func TestParseAndEvaluate(t *testing.T) {
	res, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := res.Get("e2e/bench", "BenchmarkAdmission", "admissions/s"); !ok || v != 200 {
		t.Fatalf("admissions/s = %v %v", v, ok)
	}
	if v, _ := res.Get("directory", "BenchmarkList50Of10000/after-middle", "ns/op"); v != 14000 {
		t.Fatalf("median of repeated runs = %v, want 14000", v)
	}
	if len(res.Failed) != 1 || res.Failed[0] != "e2e/bench BenchmarkRecovery" {
		t.Fatalf("failed = %v", res.Failed)
	}
	byID := map[string]Outcome{}
	for _, r := range Rows() {
		byID[r.ID] = r.evaluate(res)
	}
	adm := byID["admission-rate"]
	if !adm.HasRatio || adm.Ratio != 0.4 || adm.Met == nil || *adm.Met || adm.primary() {
		t.Fatalf("admission: ratio %v met %v, want 0.4 and missed, as a superseded target", adm.Ratio, adm.Met)
	}
	if g := byID["admission-vs-events"]; !g.primary() || g.Met == nil || *g.Met {
		t.Fatalf("admission goal (200/240 against ≥ 90 %%) should be missed: %+v", g.Met)
	}
	if got := adm.ratioText(); got != "40.0 %" {
		t.Fatalf("ratio text %q", got)
	}
	mcp := byID["mcp32-rate"]
	if mcp.Met == nil || *mcp.Met || mcp.primary() {
		t.Fatalf("mcp32-rate should be missed, as a superseded target: %+v", mcp)
	}
	lost := byID["conc-lost"]
	if lost.Met == nil || !*lost.Met {
		t.Fatalf("zero lost revisions should meet the target: %+v", lost)
	}
	if rec := byID["rec-ready"]; rec.HasFig || rec.Met != nil {
		t.Fatalf("a failed benchmark must read as not measured: %+v", rec)
	}
	if h := byID["dir-heap-3tools"]; !h.HasFig || h.Fig != 38.2 {
		t.Fatalf("log metric = %+v", h)
	}
	if v := byID["dir-index"]; v.Fig != 14 || v.Figure.unit() != "µs" {
		t.Fatalf("converted figure = %v %s", v.Fig, v.Figure.unit())
	}
}

func TestReportNamesMissedTargetsAndProfiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bench.txt"), []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	prof := `File: gatewaytest.test
Type: cpu
Duration: 5.1s, Total samples = 3.2s (62.7%)
Showing nodes accounting for 3s, 93.75% of 3.2s total
      flat  flat%   sum%        cum   cum%
     0.01s  0.31%  0.31%      2.50s 78.12%  runtime.goexit
         0     0%  0.31%      1.20s 37.50%  github.com/agentgw/agentgw/tasks.(*Engine).runBatch
         0     0%  0.31%      1.00s 31.25%  github.com/agentgw/agentgw/agentclient.(*Client).Invoke
     0.90s 28.12% 28.43%      0.90s 28.12%  syscall.Syscall
`
	if err := os.WriteFile(filepath.Join(dir, "pprof-admission-vs-events.txt"), []byte(prof), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "benchmarks.md")
	if err := run(dir, out, false); err != nil {
		t.Fatal(err)
	}
	doc, _ := os.ReadFile(out)
	for _, want := range []string{
		"| Admission: durable invokes accepted/s through Prosody (64 in flight; the echo tasks then run to completion) | 200 admissions/s | 500 admissions/s",
		"| 40.0 % | ≥ 50 % of baseline (wave 2) | no (superseded) |",
		"## Goals (issue 34)",
		"| 83.3 % | ≥ 90 % of the XMPP path's limit | **missed** — this run has no breakdown of it",
		"## Missed targets",
		"`tasks.(*Engine).runBatch` — 37.5 % cumulative",
		"| Admission, against the XMPP path's own limit for the same stanzas | 200 admissions/s | 240 admissions/s",
		"## Machine",
		"- CPUs (nproc): ",
		"Failed benchmarks: e2e/bench BenchmarkRecovery.",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(string(doc), "agentclient.(*Client).Invoke` —") {
		t.Error("a caller-side function is named as a suspect")
	}
}

func TestStageBreakdown(t *testing.T) {
	res, err := Parse(strings.NewReader("pkg: github.com/agentgw/agentgw/e2e/bench\n" +
		"BenchmarkMCPEchoStages-2   	       1	5992065775 ns/op	         1.593 admission-commit-p50-ms	        16.43 admission-commit-p99-ms	  4.492 backend-p50-ms	        26.33 backend-p99-ms	 2.0 p50-ms	 2.2 traced-p50-ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	out := renderStages(res)
	for _, want := range []string{"## Latency breakdown (issue 23)", "| admission commit: the task and its replay record, durable (group commit, fsync) | 1.59 ms | 16.4 ms |",
		"backend call: the MCP `tools/call` over stdio to server-everything, including the wait for its result's commit | 4.49 ms | 26.3 ms |", "| stanza decode", "not measured"} {
		if !strings.Contains(out, want) {
			t.Errorf("breakdown lacks %q:\n%s", want, out)
		}
	}
	for _, r := range Rows() {
		if r.ID == "stages-traced" {
			if o := r.evaluate(res); !o.HasRatio || o.Ratio != 1.1 {
				t.Errorf("traced/off ratio %v", o.Ratio)
			}
		}
	}
}

// goalSample has every goal's benchmarks but the 100,000-endpoint one:
// CPU per task misses at 32 callers (6.3×) and meets at 1 (3.7×), Prosody
// misses at 1 caller (1.69×) and meets at 32 (1.09×), admission misses
// (85 %) with CPU figures, MCP 32 callers meets (90 %), MCP 1 caller
// misses (3×) with a stages breakdown, the event lag misses (129 ms, 3.2×
// the XMPP path alone's 40 ms), the 10k directory meets.
const goalSample = `pkg: github.com/agentgw/agentgw/e2e/bench
BenchmarkAdmissionBaseline-2   	  1000	  1 ns/op	 2000 admissions/s	 40 gotest-cpu-%	 90 server-cpu-%
BenchmarkAdmissionBaselineEvents-2   	  1000	  1 ns/op	 1000 admissions/s	 50 gotest-cpu-%	 98 server-cpu-%
BenchmarkAdmission-2   	  1000	  1 ns/op	 850 admissions/s	 100 gotest-cpu-%	 80 server-cpu-%
BenchmarkMCPEcho/callers=1-2   	 1	 1 ns/op	 300 calls/s	 3000 direct-calls/s	 3.0 p50-ms	 0.1 direct-p50-ms
BenchmarkMCPEcho/callers=32-2   	 1	 1 ns/op	 900 calls/s	 9000 direct-calls/s	 20 p50-ms	 1 direct-p50-ms
BenchmarkMCPEchoXMPPCeiling/callers=1-2   	 1	 1 ns/op	 1000 calls/s	 1.0 p50-ms
BenchmarkMCPEchoXMPPCeiling/callers=32-2   	 1	 1 ns/op	 1000 calls/s	 10 p50-ms
BenchmarkMCPEchoStages-2   	 1	 1 ns/op	 0.1 decode-p50-ms	 1.5 stanza-p50-ms	 0.05 authorize-p50-ms	 1.0 admission-commit-p50-ms	 0.9 dispatch-p50-ms	 0.8 transition-running-p50-ms	 1.2 backend-p50-ms	 0.7 transition-completed-p50-ms	 0.05 event-status-p50-ms	 0.05 event-completed-p50-ms	 3.0 p50-ms	 3.2 traced-p50-ms
BenchmarkConcurrentTasks1000-2   	 1	 1 ns/op	 0 lost-revisions	 42 lag-p50-ms	 129 lag-p99-ms	 26 commit-p50-ms	 66 commit-p99-ms	 20 deliver-p50-ms	 64 deliver-p99-ms	 300 gotest-cpu-us/event	 120 server-cpu-us/event
BenchmarkConcurrentTasks1000XMPPCeiling-2   	 1	 1 ns/op	 12 lag-p50-ms	 40 lag-p99-ms	 100 gotest-cpu-us/event	 110 server-cpu-us/event
BenchmarkDirectory10k-2   	 1	 1 ns/op	 45 peak-rss-MB	 24 empty-rss-MB	 12 registry-heap-MB
BenchmarkEchoCPU/callers=1-2   	 1	 1 ns/op	 600 gw-cpu-µs/task	 162 ceiling-cpu-µs/task	 700 backend-cpu-µs/task	 728 gw-server-cpu-µs/task	 430 ceiling-server-cpu-µs/task	 2.74 gw-server-wakeups/task	 1.99 ceiling-server-wakeups/task
BenchmarkEchoCPU/callers=32-2   	 1	 1 ns/op	 555 gw-cpu-µs/task	 88 ceiling-cpu-µs/task	 1275 backend-cpu-µs/task	 380 gw-server-cpu-µs/task	 349 ceiling-server-cpu-µs/task	 1.2 gw-server-wakeups/task	 0.9 ceiling-server-wakeups/task
pkg: github.com/agentgw/agentgw/tasks
BenchmarkProgressWave-2   	 1	 1 ns/op	 30 commit-p99-ms
`

func TestGoalRows(t *testing.T) {
	res, err := Parse(strings.NewReader(goalSample))
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []Outcome
	for _, r := range Rows() {
		outcomes = append(outcomes, r.evaluate(res))
	}
	want := map[string]string{
		"cpu32-gateway":       "missed: largest measured cost: the gateway's own work, 467 µs of CPU per task above the trivial component's 88.0 µs for the same stanzas (engine commits, the MCP client, encode and decode; BenchmarkEchoCPU/callers=32); server-everything spends another 1275 µs per task, not counted; Prosody 380 µs against 349 µs",
		"cpu1-gateway":        "met",
		"cpu1-prosody":        "missed: largest measured cost: Prosody woke 2.74 times per task serving the gateway against 1.99 for the trivial component",
		"cpu32-prosody":       "met",
		"cpu32-prosody-busy":  "missed: largest measured cost: the rate, not extra stanzas: Prosody was busy throughout (0.063 and 0.0007 wake-ups per task), and served the gateway at 805 calls/s against the trivial component's 1926, so fewer stanzas shared each of its loop iterations; 439 µs of its CPU per task above the trivial component's 527 µs",
		"admission-vs-events": "missed: largest measured cost: CPU in the gateway's process, 1176 µs per admission against 500 µs with the trivial component (+676 µs, the gateway's own), with that process at 100 % of a core and Prosody at 80.0 % (98.0 % in the baseline); in the echo call's breakdown the largest part is the three commits",
		"mcp32-vs-ceiling":    "met",
		// Commits 1.0+0.8+0.7 = 2.5 ms of the traced 3.2 ms.
		"mcp1-vs-ceiling": "missed: largest measured cost: the three commits (admission, → running, → completed; each an fsync), p50 2.50 ms = 78.1 % of the echo call's p50 (3.20 ms",
		"conc-lag-p99":    "missed: largest measured cost: the commit (the executor's Run call, until its revision is durable), p99 66.0 ms, p50 26.0 ms; then the delivery after the commit",
		"dir-rss":         "met",
		"dir100k-rss":     "not measured",
		"dir100k-ready":   "not measured",
		"conc-lost":       "met",
	}
	gs := goals(outcomes)
	if len(gs) != len(goalOrder) {
		t.Fatalf("%d goals, want %d (superseded targets must not count)", len(gs), len(goalOrder))
	}
	for i, o := range gs {
		if o.ID != goalOrder[i] {
			t.Errorf("goal %d is %s, want %s", i, o.ID, goalOrder[i])
		}
		if v := o.verdict(res); !strings.HasPrefix(v, want[o.ID]) {
			t.Errorf("%s: verdict %q, want prefix %q", o.ID, v, want[o.ID])
		}
	}
	byID := map[string]Outcome{}
	for _, o := range outcomes {
		byID[o.ID] = o
	}
	if v := byID["mcp1-vs-ceiling"].verdict(res); !strings.Contains(v, "the gateway adds 2.00 ms to the ceiling's p50 of 1.00 ms") {
		t.Errorf("mcp1 verdict lacks the gateway's own addition: %q", v)
	}
	if v := byID["conc-lag-p99"].verdict(res); !strings.Contains(v, "the engine alone commits the same waves (tasks BenchmarkProgressWave, no XMPP) with p99 30.0 ms; the XMPP path alone delivers the same waves with p99 40.0 ms; CPU per event: 300 µs in the gateway's process against 100 µs in the trivial component's (+200 µs, the gateway's own), Prosody 120 µs against 110 µs; Prosody runs on one thread, so routing one wave of 1000 events costs it at least 110 ms even with no gateway") {
		t.Errorf("lag verdict lacks the engine and the XMPP path alone: %q", v)
	}

	// Only missed goals are profiled: the superseded admission-rate and
	// mcp32-p50 (missed too) are not, and rows sharing a profile once.
	var ids []string
	for _, l := range missedProfiles(outcomes) {
		ids = append(ids, strings.SplitN(l, "\t", 2)[0])
	}
	if got := strings.Join(ids, " "); got != "admission-vs-events mcp1-vs-ceiling conc-lag-p99" {
		t.Errorf("profiles to take: %q", got)
	}

	// A busy Prosody (hardly any wake-ups) is explained by the rate.
	busy, err := Parse(strings.NewReader("pkg: github.com/agentgw/agentgw/e2e/bench\n" +
		"BenchmarkEchoCPU/callers=32-2   	 1	 1 ns/op	 966 gw-server-cpu-µs/task	 527 ceiling-server-cpu-µs/task	 0.063 gw-server-wakeups/task	 0.0007 ceiling-server-wakeups/task	 805 gw-calls/s	 1926 ceiling-calls/s\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Rows() {
		if r.ID == "cpu32-prosody" {
			if v := r.evaluate(busy).verdict(busy); !strings.HasPrefix(v, want["cpu32-prosody-busy"]) {
				t.Errorf("busy Prosody verdict %q, want prefix %q", v, want["cpu32-prosody-busy"])
			}
		}
	}

	// The ceiling verdict of a figure target (no production row has one
	// since the lag goal became a ratio) is judged on the ceiling's figure.
	outcomes = append(outcomes, Row{ID: "lag-abs", Scenario: "lag against an absolute target",
		Figure: m(gwt, "BenchmarkConcurrentTasks1000", "lag-p99-ms"), Target: &Target{Op: "<", Value: 50, Text: "< 50 ms"},
		Ceiling: "conc-ceiling-lag-p99", Cost: lagCost}.evaluate(res))
	doc := render(outcomes, res, t.TempDir(), Machine{})
	for _, w := range []string{
		"| 1,000 concurrent long tasks, event lag p99, against the XMPP path alone | 129 ms | 40.0 ms (trivial component sending the same events in the same waves, no persistence) | 3.23× | at or below the XMPP path alone | **missed** — largest measured cost: the commit",
		"| CPU per MCP echo task, 32 callers (BenchmarkEchoCPU), against the trivial component | 555 µs/task | 88.0 µs/task (trivial component process, same stanzas, 32 callers, same run) | 6.31× | ≤ 2.5× the trivial component | **missed** — largest measured cost: the gateway's own work",
		"| Prosody's CPU per MCP echo task, 1 caller, against Prosody serving the trivial component | 728 µs/task | 430 µs/task (Prosody serving the trivial component, same run) | 1.69× | ≤ 1.1× Prosody serving the trivial component | **missed** — largest measured cost: Prosody woke 2.74 times",
		"| 1,000 concurrent tasks: event lag, p99 (the retired absolute goal) | 129 ms | — | — | < 50 ms (wave 3, retired by issue 34) | no (superseded) |",
		"| MCP echo calls/s, 32 callers, against the XMPP ceiling (BenchmarkMCPEchoXMPPCeiling) | 900 calls/s | 1000 calls/s (trivial component, same Prosody setup and callers) | 90.0 % | ≥ 85 % of the XMPP ceiling | **met** |",
		"| directory, 100,000 endpoints × 5 tools, peak RSS | not measured | not measured (the same gateway with no endpoints) | not measured | < 250 MB | not measured |",
		// The ceiling of a figure target is judged on its figure.
		"reaches 40.0 ms against the same target, so the target is within what the path allows",
		"Largest measured cost: the commit (the executor's Run call",
		"| ≤ 5× direct (wave 2) | no (superseded) |",
	} {
		if !strings.Contains(doc, w) {
			t.Errorf("report lacks %q", w)
		}
	}
	missedSection := doc[strings.Index(doc, "## Missed targets"):]
	missedSection = missedSection[:strings.Index(missedSection, "## How each scenario")]
	if strings.Contains(missedSection, "### MCP echo end to end, 32 concurrent callers, p50") {
		t.Error("a superseded target is listed under Missed targets")
	}
}

func TestDirCosts(t *testing.T) {
	res, err := Parse(strings.NewReader("pkg: github.com/agentgw/agentgw/e2e/bench\n" +
		"BenchmarkDirectory100k-2   	 1	 1 ns/op	 300 peak-rss-MB	 24 empty-rss-MB	 2.5 empty-ready-s	 4 ready-s	 150 registry-heap-MB\n"))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Outcome{}
	for _, r := range Rows() {
		byID[r.ID] = r.evaluate(res)
	}
	if v := byID["dir100k-rss"].verdict(res); v != "missed: largest measured cost: what the endpoints add over the empty gateway, 276 MB of the peak 300 MB; then the empty gateway itself, 24.0 MB; the loaded index's live heap is 150 MB" {
		t.Errorf("rss verdict %q", v)
	}
	if v := byID["dir100k-ready"].verdict(res); v != "missed: largest measured cost: the empty gateway's own start, 2.50 s of the 4.00 s (loading the endpoints adds 1.50 s)" {
		t.Errorf("ready verdict %q", v)
	}
}

// When the move to running committed inside the admission's transaction
// (lane 3a), its span lies within the admission commit's and the report must
// not count that fsync twice.
func TestStageGroupsSharedCommit(t *testing.T) {
	shared := strings.Replace(goalSample, " 3.0 p50-ms	 3.2 traced-p50-ms\n", " 3.0 p50-ms	 3.2 traced-p50-ms	 100 running-in-admission-%\n", 1)
	if shared == goalSample {
		t.Fatal("the sample's stages line changed; update this test")
	}
	res, err := Parse(strings.NewReader(shared))
	if err != nil {
		t.Fatal(err)
	}
	gs, ok := stageGroups(res)
	if !ok {
		t.Fatal("no stage groups")
	}
	// Admission 1.0 + completed 0.7, not + running 0.8.
	if !strings.HasPrefix(gs[0].name, "the two commits") || gs[0].ms != 1.7 {
		t.Fatalf("largest group %q %.2f ms, want the two commits at 1.70 ms", gs[0].name, gs[0].ms)
	}
}
