package main

import (
	"fmt"
	"sort"
	"strings"
)

// goalOrder is issue 34's goal table, in its order, then the event lag
// held to the XMPP path alone (its item 3), the memory goals of its "Done
// means" (issue 23's, kept), and the durability target.
var goalOrder = []string{
	"cpu32-gateway", "cpu1-gateway", "cpu1-prosody", "cpu32-prosody",
	"admission-vs-events", "mcp32-vs-ceiling", "mcp1-vs-ceiling", "conc-lag-p99",
	"dir-rss", "dir100k-rss", "dir100k-ready", "conc-lost",
}

// goals returns the outcomes with a counting target: goalOrder first, then
// any other in table order.
func goals(outcomes []Outcome) []Outcome {
	byID := map[string]Outcome{}
	for _, o := range outcomes {
		byID[o.ID] = o
	}
	var out []Outcome
	seen := map[string]bool{}
	for _, id := range goalOrder {
		if o, ok := byID[id]; ok && o.primary() {
			out = append(out, o)
			seen[id] = true
		}
	}
	for _, o := range outcomes {
		if o.primary() && !seen[o.ID] {
			out = append(out, o)
		}
	}
	return out
}

// verdict is a goal's state: met, not measured, or missed with its
// largest measured cost.
func (o Outcome) verdict(res *Results) string {
	switch {
	case o.Met == nil:
		return "not measured"
	case *o.Met:
		return "met"
	}
	return "missed: " + o.costText(res)
}

// costText names the largest measured cost of a missed figure, from the
// run's data, or says that the run has none.
func (o Outcome) costText(res *Results) string {
	if o.Cost != nil {
		if t, ok := o.Cost(o, res); ok {
			return t
		}
	}
	return "this run has no breakdown of it (see the profile under Missed targets)"
}

func get(res *Results, bench, unit string) (float64, bool) { return res.Get(gwt, bench, unit) }

// pct is a share in percent with no decimals below 10 %.
func pct(part, whole float64) string {
	if whole == 0 {
		return "—"
	}
	return num(100*part/whole) + " %"
}

// costGroup is one disjoint part of an echo call's time, from the stages
// of stages.go: each span is counted once (stages that contain others
// are reduced by them).
type costGroup struct {
	name string
	ms   float64
}

// stageGroups sums the per-stage p50s of BenchmarkMCPEchoStages into
// disjoint groups. p50s do not add up exactly; as shares they still say
// where the time goes.
func stageGroups(res *Results) ([]costGroup, bool) {
	v := func(key string) float64 {
		x, _ := res.Get(gwt, stageBench, key+"-p50-ms")
		return x
	}
	if _, ok := res.Get(gwt, stageBench, "admission-commit-p50-ms"); !ok {
		return nil, false
	}
	pos := func(x float64) float64 { return max(x, 0) }
	commits := costGroup{"the three commits (admission, → running, → completed; each an fsync)", v("admission-commit") + v("transition-running") + v("transition-completed")}
	if share, ok := res.Get(gwt, stageBench, "running-in-admission-%"); ok && share >= 50 {
		// The move to running committed inside the admission's transaction
		// (its span within the admission commit's): counting it again would
		// count that fsync twice.
		commits = costGroup{fmt.Sprintf("the two commits (admission with → running in one transaction for %s of calls, then → completed; each an fsync)", pct(share, 100)), v("admission-commit") + v("transition-completed")}
	}
	gs := []costGroup{
		commits,
		{"the backend call (MCP `tools/call` over stdio, less its result's commit)", pos(v("backend") - v("transition-completed"))},
		{"the rest of the invoke IQ (queue, route, `<accepted/>`)", pos(v("stanza") - v("authorize") - v("admission-commit"))},
		{"dispatch less its commit", pos(v("dispatch") - v("transition-running"))},
		{"stanza decode", v("decode")},
		{"authorization", v("authorize")},
		{"event encode and send (2 events)", v("event-status") + v("event-completed")},
	}
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].ms > gs[j].ms })
	return gs, true
}

// stagesCost names the largest part of the echo call from the stages
// breakdown, with its share of the traced call's p50, and the next two.
func stagesCost(o Outcome, res *Results) (string, bool) {
	gs, ok := stageGroups(res)
	if !ok {
		return "", false
	}
	total, ok := res.Get(gwt, stageBench, "traced-p50-ms")
	if !ok || total == 0 {
		total, ok = res.Get(gwt, stageBench, "p50-ms")
	}
	if !ok || total == 0 {
		return "", false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "largest measured cost: %s, p50 %s ms = %s of the echo call's p50 (%s ms, 1 caller, tracing on; %s)", gs[0].name, num(gs[0].ms), pct(gs[0].ms, total), num(total), stageBench)
	var next []string
	for _, g := range gs[1:3] {
		next = append(next, fmt.Sprintf("%s %s ms (%s)", g.name, num(g.ms), pct(g.ms, total)))
	}
	fmt.Fprintf(&b, "; next: %s", strings.Join(next, ", "))
	if o.ID == "mcp1-vs-ceiling" && o.HasFig && o.HasBase {
		fmt.Fprintf(&b, "; the gateway adds %s ms to the ceiling's p50 of %s ms", num(o.Fig-o.Base), num(o.Base))
	}
	return b.String(), true
}

// cpuPerOp is the test process's CPU time per operation in µs, from the
// gotest-cpu-% (share of one core) and rate metrics of a benchmark.
func cpuPerOp(res *Results, bench, rateUnit string) (float64, bool) {
	cpu, ok1 := get(res, bench, "gotest-cpu-%")
	rate, ok2 := get(res, bench, rateUnit)
	if !ok1 || !ok2 || rate == 0 {
		return 0, false
	}
	return cpu / 100 * 1e6 / rate, true
}

// admissionCost compares the CPU per admission of the gateway's process
// with the trivial component's, and adds the commits' share of the echo
// call when the stages were measured.
func admissionCost(o Outcome, res *Results) (string, bool) {
	gw, ok1 := cpuPerOp(res, "BenchmarkAdmission", "admissions/s")
	base, ok2 := cpuPerOp(res, "BenchmarkAdmissionBaselineEvents", "admissions/s")
	var parts []string
	if ok1 && ok2 {
		cpu, _ := get(res, "BenchmarkAdmission", "gotest-cpu-%")
		t := fmt.Sprintf("largest measured cost: CPU in the gateway's process, %s µs per admission against %s µs with the trivial component (+%s µs, the gateway's own), with that process at %s %% of a core",
			num(gw), num(base), num(gw-base), num(cpu))
		if srv, ok := get(res, "BenchmarkAdmission", "server-cpu-%"); ok {
			if sb, ok := get(res, "BenchmarkAdmissionBaselineEvents", "server-cpu-%"); ok {
				t += fmt.Sprintf(" and Prosody at %s %% (%s %% in the baseline)", num(srv), num(sb))
			}
		}
		parts = append(parts, t)
	}
	if s, ok := stagesCost(o, res); ok {
		parts = append(parts, "in the echo call's breakdown the largest part is "+strings.TrimPrefix(s, "largest measured cost: "))
	}
	if len(parts) == 0 {
		return "", false
	}
	return strings.Join(parts, "; "), true
}

// lagCost splits the event lag of BenchmarkConcurrentTasks1000 into the
// commit (the executor's Run call) and the delivery after it, and adds
// the engine alone and the XMPP path alone when measured.
func lagCost(o Outcome, res *Results) (string, bool) {
	const bench = "BenchmarkConcurrentTasks1000"
	c99, ok1 := get(res, bench, "commit-p99-ms")
	d99, ok2 := get(res, bench, "deliver-p99-ms")
	if !ok1 || !ok2 {
		return "", false
	}
	c50, _ := get(res, bench, "commit-p50-ms")
	d50, _ := get(res, bench, "deliver-p50-ms")
	commit := fmt.Sprintf("the commit (the executor's Run call, until its revision is durable), p99 %s ms, p50 %s ms", num(c99), num(c50))
	deliver := fmt.Sprintf("the delivery after the commit (notifier, component queue, Prosody, the caller's connection), p99 %s ms, p50 %s ms", num(d99), num(d50))
	first, second := commit, deliver
	if d99 > c99 {
		first, second = deliver, commit
	}
	t := "largest measured cost: " + first + "; then " + second
	if w, ok := res.Get("tasks", "BenchmarkProgressWave", "commit-p99-ms"); ok {
		t += fmt.Sprintf("; the engine alone commits the same waves (tasks BenchmarkProgressWave, no XMPP) with p99 %s ms", num(w))
	}
	if o.HasBase {
		t += fmt.Sprintf("; the XMPP path alone delivers the same waves with p99 %s ms", num(o.Base))
	}
	// CPU per event, which the machine's load hardly moves: the gateway's
	// process against the trivial component's, and Prosody in each.
	const ceil = "BenchmarkConcurrentTasks1000XMPPCeiling"
	if gw, ok := get(res, bench, "gotest-cpu-us/event"); ok {
		if tc, ok := get(res, ceil, "gotest-cpu-us/event"); ok {
			t += fmt.Sprintf("; CPU per event: %s µs in the gateway's process against %s µs in the trivial component's (+%s µs, the gateway's own)", num(gw), num(tc), num(gw-tc))
			if sg, ok := get(res, bench, "server-cpu-us/event"); ok {
				if sc, ok := get(res, ceil, "server-cpu-us/event"); ok {
					t += fmt.Sprintf(", Prosody %s µs against %s µs", num(sg), num(sc))
					// Prosody routes on one thread: a wave's last event
					// waits at least for the whole wave's routing.
					n, ok := get(res, ceil, "tasks")
					if !ok {
						n = 1000
					}
					t += fmt.Sprintf("; Prosody runs on one thread, so routing one wave of %s events costs it at least %s ms even with no gateway (the trivial component's figure), a floor under the lag of the wave's last event", num(n), num(n*sc/1000))
				}
			}
		}
	}
	return t, true
}

// dirCost splits a directory's peak RSS into the empty gateway's and what
// the endpoints add.
func dirCost(bench string) func(Outcome, *Results) (string, bool) {
	return func(_ Outcome, res *Results) (string, bool) {
		peak, ok1 := get(res, bench, "peak-rss-MB")
		empty, ok2 := get(res, bench, "empty-rss-MB")
		if !ok1 || !ok2 {
			return "", false
		}
		growth := peak - empty
		parts := []costGroup{{"what the endpoints add over the empty gateway", growth}, {"the empty gateway itself", empty}}
		sort.SliceStable(parts, func(i, j int) bool { return parts[i].ms > parts[j].ms })
		t := fmt.Sprintf("largest measured cost: %s, %s MB of the peak %s MB; then %s, %s MB", parts[0].name, num(parts[0].ms), num(peak), parts[1].name, num(parts[1].ms))
		if h, ok := get(res, bench, "registry-heap-MB"); ok {
			t += fmt.Sprintf("; the loaded index's live heap is %s MB", num(h))
		}
		return t, true
	}
}

// readyCost splits the 100,000-endpoint start into the empty gateway's
// and the load of the endpoints.
func readyCost(o Outcome, res *Results) (string, bool) {
	if !o.HasFig || !o.HasBase {
		return "", false
	}
	load := o.Fig - o.Base
	if load >= o.Base {
		return fmt.Sprintf("largest measured cost: loading the endpoints, %s s of the %s s (the empty gateway is ready in %s s)", num(load), num(o.Fig), num(o.Base)), true
	}
	return fmt.Sprintf("largest measured cost: the empty gateway's own start, %s s of the %s s (loading the endpoints adds %s s)", num(o.Base), num(o.Fig), num(load)), true
}

// cpuCost compares the gateway's CPU per echo task with the trivial
// component's and puts the other processes of the call beside it.
func cpuCost(bench string) func(Outcome, *Results) (string, bool) {
	return func(o Outcome, res *Results) (string, bool) {
		if !o.HasFig || !o.HasBase {
			return "", false
		}
		t := fmt.Sprintf("largest measured cost: the gateway's own work, %s µs of CPU per task above the trivial component's %s µs for the same stanzas (engine commits, the MCP client, encode and decode; %s)", num(o.Fig-o.Base), num(o.Base), bench)
		if be, ok := get(res, bench, "backend-cpu-µs/task"); ok {
			t += fmt.Sprintf("; server-everything spends another %s µs per task, not counted", num(be))
		}
		if sg, ok := get(res, bench, "gw-server-cpu-µs/task"); ok {
			if sc, ok := get(res, bench, "ceiling-server-cpu-µs/task"); ok {
				t += fmt.Sprintf("; Prosody %s µs against %s µs", num(sg), num(sc))
			}
		}
		return t, true
	}
}

// prosodyCost explains Prosody's extra CPU serving the gateway by how
// often it woke per task: the same stanzas arriving apart cost it a
// wake-up, a read and a write to the client each.
func prosodyCost(bench string) func(Outcome, *Results) (string, bool) {
	return func(o Outcome, res *Results) (string, bool) {
		wg, ok1 := get(res, bench, "gw-server-wakeups/task")
		wc, ok2 := get(res, bench, "ceiling-server-wakeups/task")
		if !o.HasFig || !o.HasBase || !ok1 || !ok2 {
			return "", false
		}
		gr, ok3 := get(res, bench, "gw-calls/s")
		cr, ok4 := get(res, bench, "ceiling-calls/s")
		if wg < 0.5 && wc < 0.5 && ok3 && ok4 {
			// Prosody hardly ever blocked: it was busy throughout, so it
			// read what had queued whenever it ran, and what differs is
			// how much queued per loop iteration, i.e. the rate.
			return fmt.Sprintf("largest measured cost: the rate, not extra stanzas: Prosody was busy throughout (%s and %s wake-ups per task), and served the gateway at %s calls/s against the trivial component's %s, so fewer stanzas shared each of its loop iterations; %s µs of its CPU per task above the trivial component's %s µs",
				num(wg), num(wc), num(gr), num(cr), num(o.Fig-o.Base), num(o.Base)), true
		}
		return fmt.Sprintf("largest measured cost: Prosody woke %s times per task serving the gateway against %s for the trivial component (the gateway's stanzas of a task arrive apart: the accepted reply after the admission commit, the completed event after the backend; the trivial component writes all three at once), %s µs of its CPU per task above the trivial component's %s µs",
			num(wg), num(wc), num(o.Fig-o.Base), num(o.Base)), true
	}
}
