package main

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Metric names one reported figure: a benchmark's metric, optionally
// transformed for display (ns/op to ms, ns/op to operations per second).
type Metric struct {
	Pkg, Bench, Unit string
	// Show is the unit displayed; Conv converts the raw value to it.
	Show string
	Conv func(float64) float64
	// Log, when set, reads the value from a test log line instead: the
	// first submatch of Log in Pkg's output.
	Log *regexp.Regexp
}

func (m Metric) value(r *Results) (float64, bool) {
	var v float64
	if m.Log != nil {
		sm := r.LogMatch(m.Pkg, m.Log)
		if sm == nil {
			return 0, false
		}
		f, err := strconv.ParseFloat(sm[1], 64)
		if err != nil {
			return 0, false
		}
		v = f
	} else {
		f, ok := r.Get(m.Pkg, m.Bench, m.Unit)
		if !ok {
			return 0, false
		}
		v = f
	}
	if m.Conv != nil {
		v = m.Conv(v)
	}
	return v, true
}

func (m Metric) unit() string {
	if m.Show != "" {
		return m.Show
	}
	return prettyUnit(m.Unit)
}

// prettyUnit turns a metric name into the unit a reader expects:
// "p50-ms" → "ms", "direct-calls/s" → "calls/s", "lost-revisions" →
// "lost revisions".
func prettyUnit(u string) string {
	if i := strings.LastIndexByte(u, '-'); i >= 0 {
		switch suffix := u[i+1:]; suffix {
		case "ms", "s", "MB":
			return suffix
		}
	}
	u = strings.TrimPrefix(u, "direct-")
	return strings.ReplaceAll(u, "-", " ")
}

func nsToMS(v float64) float64   { return v / 1e6 }
func nsToUS(v float64) float64   { return v / 1e3 }
func nsToRate(v float64) float64 { return 1e9 / v }

// Target is what a figure (or its ratio to the baseline) must reach.
type Target struct {
	OnRatio bool    // compare the ratio instead of the figure
	Op      string  // ">=", "<=", "<" or "=="
	Value   float64 // ratios are fractions: 0.5 is 50 %
	Text    string
	// Secondary marks a superseded target (the previous wave's, against
	// a baseline that is not like-for-like): the table still says whether
	// it is met, but it is no goal: it is not counted, listed under Goals
	// or profiled.
	Secondary bool
}

func (t Target) met(v float64) bool {
	switch t.Op {
	case ">=":
		return v >= t.Value
	case "<=":
		return v <= t.Value
	case "<":
		return v < t.Value
	case "==":
		return v == t.Value
	}
	return false
}

// Profile says how to profile a scenario whose target was missed.
type Profile struct {
	Pkg, Bench, Benchtime string
	Mem                   bool // heap (inuse_space) instead of CPU
}

// Row is one line of the report table.
type Row struct {
	ID       string
	Scenario string
	Figure   Metric
	Baseline *Metric
	BaseNote string // what the baseline is
	// Percent shows the ratio as a percentage (throughputs); otherwise as
	// a factor (latencies, sizes).
	Percent bool
	Target  *Target
	Profile *Profile
	// Why says what structurally bounds the figure; the report prints it
	// when the target is missed.
	Why string
	// Ceiling names the row measuring what the XMPP path alone allows for
	// the same traffic; when the target is missed, the report says whether
	// that ceiling itself meets the target.
	Ceiling string
	// Goal is the row's line in issue 34's goal table; goal rows are
	// listed, in goalOrder, under "Goals".
	Goal string
	// Cost names the largest measured cost of the figure from the run's
	// own data (the stages breakdown, the CPU figures, the split of a
	// lag), for a missed goal; ok is false when the run has no such data.
	Cost func(o Outcome, res *Results) (text string, ok bool)
}

// primary reports whether the row has a target that counts.
func (r Row) primary() bool { return r.Target != nil && !r.Target.Secondary }

// Outcome is a row evaluated against the results.
type Outcome struct {
	Row
	Fig, Base, Ratio          float64
	HasFig, HasBase, HasRatio bool
	Runs                      int   // > 1 when Ratio is the median of paired runs
	Met                       *bool // nil: no target, or not measured
}

func (r Row) evaluate(res *Results) Outcome {
	o := Outcome{Row: r}
	o.Fig, o.HasFig = r.Figure.value(res)
	if r.Baseline != nil {
		o.Base, o.HasBase = r.Baseline.value(res)
	}
	if o.HasFig && o.HasBase && o.Base != 0 {
		o.Ratio, o.HasRatio = o.Fig/o.Base, true
		// Runs repeated in alternation pair up: the median of the
		// per-run ratios is steadier than the ratio of the medians.
		if r.Figure.Log == nil && r.Baseline.Log == nil && r.Figure.Conv == nil && r.Baseline.Conv == nil {
			fs := res.values[r.Figure.Pkg+" "+r.Figure.Bench][r.Figure.Unit]
			bs := res.values[r.Baseline.Pkg+" "+r.Baseline.Bench][r.Baseline.Unit]
			if len(fs) > 1 && len(fs) == len(bs) {
				var rs []float64
				for i := range fs {
					if bs[i] != 0 {
						rs = append(rs, fs[i]/bs[i])
					}
				}
				if len(rs) == len(fs) {
					sort.Float64s(rs)
					o.Ratio, o.Runs = rs[len(rs)/2], len(rs)
				}
			}
		}
	}
	if r.Target != nil {
		v, ok := o.Fig, o.HasFig
		if r.Target.OnRatio {
			v, ok = o.Ratio, o.HasRatio
		}
		if ok {
			m := r.Target.met(v)
			o.Met = &m
		}
	}
	return o
}

func (o Outcome) ratioText() string {
	if !o.HasRatio {
		return "—"
	}
	runs := ""
	if o.Runs > 1 {
		runs = fmt.Sprintf(" (median of %d runs)", o.Runs)
	}
	if o.Percent {
		return fmt.Sprintf("%s %%%s", num(100*o.Ratio), runs)
	}
	return num(o.Ratio) + "×" + runs
}

// num prints a figure with three significant digits, without exponent.
func num(v float64) string {
	switch a := math.Abs(v); {
	case v == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a >= 0.01:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

const (
	gwt   = "e2e/bench"
	front = "callers/mcpfront"
)

func m(pkg, bench, unit string) Metric { return Metric{Pkg: pkg, Bench: bench, Unit: unit} }
func mp(pkg, bench, unit string) *Metric {
	x := m(pkg, bench, unit)
	return &x
}

func nsMS(pkg, bench string) Metric {
	return Metric{Pkg: pkg, Bench: bench, Unit: "ns/op", Show: "ms", Conv: nsToMS}
}

// memLoadRSS reads directory's TestMemory10000Endpoints log line.
var memLoadHeap = regexp.MustCompile(`live heap \+([0-9.]+) MB`)

// Rows is the report: the scenarios of the benchmark issue, each figure
// with the baseline measured in the same run.
func Rows() []Row {
	mcp32 := "BenchmarkMCPEcho/callers=32"
	mcp1 := "BenchmarkMCPEcho/callers=1"
	ceil32 := "BenchmarkMCPEchoXMPPCeiling/callers=32"
	ceil1 := "BenchmarkMCPEchoXMPPCeiling/callers=1"
	cpu1 := "BenchmarkEchoCPU/callers=1"
	cpu32 := "BenchmarkEchoCPU/callers=32"
	chain := "BenchmarkEchoFullChainVsDirect/prosody-nagle-off"
	chainDefault := "BenchmarkEchoFullChainVsDirect/prosody-default"
	admProf := &Profile{Pkg: gwt, Bench: "BenchmarkAdmission$", Benchtime: "5s"}
	mcpProf := &Profile{Pkg: gwt, Bench: "BenchmarkMCPEcho$", Benchtime: "1x"}
	return append([]Row{
		// Admission.
		{ID: "admission-rate", Scenario: "Admission: durable invokes accepted/s through Prosody (64 in flight; the echo tasks then run to completion)",
			Figure: m(gwt, "BenchmarkAdmission", "admissions/s"), Baseline: mp(gwt, "BenchmarkAdmissionBaseline", "admissions/s"),
			BaseNote: "trivial component answering the same IQ, no persistence", Percent: true,
			Target: &Target{OnRatio: true, Op: ">=", Value: 0.5, Text: "≥ 50 % of baseline (wave 2)", Secondary: true}, Profile: admProf,
			Ceiling: "admission-events-ceiling",
			Why:     admissionWhy},
		{ID: "admission-long-running", Scenario: "Admission of long-running tasks (they run past the measurement: invoke, accepted, one status event each), admissions/s",
			Figure: m(gwt, "BenchmarkAdmissionLongRunning", "admissions/s"), Baseline: mp(gwt, "BenchmarkAdmissionBaseline", "admissions/s"),
			BaseNote: "trivial component answering the same IQ, no persistence", Percent: true},
		{ID: "admission-vs-events", Scenario: "Admission, against the XMPP path's own limit for the same stanzas",
			Figure: m(gwt, "BenchmarkAdmission", "admissions/s"), Baseline: mp(gwt, "BenchmarkAdmissionBaselineEvents", "admissions/s"),
			BaseNote: "trivial component sending the same <accepted/> and the two events of an echo task, no persistence", Percent: true,
			Goal:   "durable admissions/s, 64 in flight (echo tasks run to completion), against the trivial component sending the same stanzas",
			Target: &Target{OnRatio: true, Op: ">=", Value: 0.9, Text: "≥ 90 % of the XMPP path's limit"}, Profile: admProf,
			Cost: admissionCost},
		{ID: "admission-events-ceiling", Scenario: "XMPP path's own limit for an echo task's stanzas (invoke, accepted, 2 events), as a share of the IQ-only baseline",
			Figure: m(gwt, "BenchmarkAdmissionBaselineEvents", "admissions/s"), Baseline: mp(gwt, "BenchmarkAdmissionBaseline", "admissions/s"),
			BaseNote: "trivial component answering the IQ only", Percent: true},
		{ID: "admission-p50", Scenario: "Admission: invoke → accepted p50",
			Figure: m(gwt, "BenchmarkAdmission", "p50-ms"), Baseline: mp(gwt, "BenchmarkAdmissionBaseline", "p50-ms"), BaseNote: "same, trivial component"},
		{ID: "admission-p99", Scenario: "Admission: invoke → accepted p99",
			Figure: m(gwt, "BenchmarkAdmission", "p99-ms"), Baseline: mp(gwt, "BenchmarkAdmissionBaseline", "p99-ms"), BaseNote: "same, trivial component"},
		{ID: "engine-admit", Scenario: "Admission in the engine alone (no XMPP), admissions/s",
			Figure: m("tasks", "BenchmarkAdmit", "admissions/s"), Baseline: mp("tasks", "BenchmarkAdmitNoPersist", "admissions/s"),
			BaseNote: "same validation, no commit", Percent: true},
		{ID: "engine-admit-postgres", Scenario: "Admission in the engine alone on the PostgreSQL driver (private server, fsync on), admissions/s",
			Figure: m("tasks", "BenchmarkAdmitPostgresVsSQLite", "postgres-admissions/s"), Baseline: mp("tasks", "BenchmarkAdmitPostgresVsSQLite", "sqlite-admissions/s"),
			BaseNote: "the SQLite driver, same run", Percent: true},
		{ID: "mcp1-postgres", Scenario: "MCP echo end to end on the PostgreSQL driver, 1 caller, calls/s",
			Figure: m(gwt, "BenchmarkMCPEchoPostgresVsSQLite/callers=1", "postgres-calls/s"), Baseline: mp(gwt, "BenchmarkMCPEchoPostgresVsSQLite/callers=1", "sqlite-calls/s"),
			BaseNote: "the same gateway on SQLite, same run", Percent: true},
		{ID: "mcp32-postgres", Scenario: "MCP echo end to end on the PostgreSQL driver, 32 callers, calls/s",
			Figure: m(gwt, "BenchmarkMCPEchoPostgresVsSQLite/callers=32", "postgres-calls/s"), Baseline: mp(gwt, "BenchmarkMCPEchoPostgresVsSQLite/callers=32", "sqlite-calls/s"),
			BaseNote: "the same gateway on SQLite, same run", Percent: true},
		{ID: "cluster-admit-2", Scenario: "Cluster mode: admissions/s with 2 engines sharing one PostgreSQL (fsync on), callers spread over them",
			Figure: m("tasks", "BenchmarkClusterAdmit/instances=2", "admissions/s"), Baseline: mp("tasks", "BenchmarkClusterAdmit/instances=1", "admissions/s"),
			BaseNote: "one engine on the same server, same run", Percent: true},
		{ID: "cluster-admit-3", Scenario: "Cluster mode: admissions/s with 3 engines sharing one PostgreSQL",
			Figure: m("tasks", "BenchmarkClusterAdmit/instances=3", "admissions/s"), Baseline: mp("tasks", "BenchmarkClusterAdmit/instances=1", "admissions/s"),
			BaseNote: "one engine on the same server, same run", Percent: true},
		{ID: "cluster-admit-ratio-2", Scenario: "Cluster mode under cluster-wide limits (commit lock, counts in the store): admissions/s with 2 members, 16 callers",
			Figure: m("tasks", "BenchmarkClusterAdmitRatio", "members=2-admissions/s"), Baseline: mp("tasks", "BenchmarkClusterAdmitRatio", "members=1-admissions/s"),
			BaseNote: "one member, same run", Percent: true},
		{ID: "cluster-admit-ratio-3", Scenario: "Cluster mode under cluster-wide limits: admissions/s with 3 members, 16 callers",
			Figure: m("tasks", "BenchmarkClusterAdmitRatio", "members=3-admissions/s"), Baseline: mp("tasks", "BenchmarkClusterAdmitRatio", "members=1-admissions/s"),
			BaseNote: "one member, same run", Percent: true},
		{ID: "cluster-mcp-2", Scenario: "Cluster mode: MCP echo end to end through ejabberd, 2 `agentgw serve` members on one PostgreSQL, 16 callers, calls/s",
			Figure: m(gwt, "BenchmarkClusterMCPEcho", "members=2-calls/s"), Baseline: mp(gwt, "BenchmarkClusterMCPEcho", "members=1-calls/s"),
			BaseNote: "one member, same run", Percent: true},
		{ID: "cluster-mcp-3", Scenario: "Cluster mode: MCP echo end to end through ejabberd, 3 members, 16 callers, calls/s",
			Figure: m(gwt, "BenchmarkClusterMCPEcho", "members=3-calls/s"), Baseline: mp(gwt, "BenchmarkClusterMCPEcho", "members=1-calls/s"),
			BaseNote: "one member, same run", Percent: true},
		{ID: "cluster-takeover", Scenario: "Cluster mode: lease expiry of a killed instance to all of its 200 tasks settled on the survivors, ms",
			Figure: m("tasks", "BenchmarkClusterTakeover", "takeover-ms")},
		{ID: "iq-rtt", Scenario: "XMPP path alone: IQ round trip client → Prosody → component, 1 in flight",
			Figure: nsMS("component", "BenchmarkIQRoundTrip/inflight=1")},
		{ID: "iq-rate", Scenario: "XMPP path alone: IQ round trips/s, 16 in flight",
			Figure: Metric{Pkg: "component", Bench: "BenchmarkIQRoundTrip/inflight=16", Unit: "ns/op", Show: "IQ/s", Conv: nsToRate}},

		// MCP echo through XMPP.
		{ID: "mcp1-rate", Scenario: "MCP echo end to end (invoke → completed event), 1 caller, calls/s",
			Figure: m(gwt, mcp1, "calls/s"), Baseline: mp(gwt, mcp1, "direct-calls/s"), BaseNote: "go-sdk client → same server-everything", Percent: true},
		{ID: "mcp1-p50", Scenario: "MCP echo end to end, 1 caller, p50",
			Figure: m(gwt, mcp1, "p50-ms"), Baseline: mp(gwt, mcp1, "direct-p50-ms"), BaseNote: "go-sdk direct"},
		{ID: "mcp1-p99", Scenario: "MCP echo end to end, 1 caller, p99",
			Figure: m(gwt, mcp1, "p99-ms"), Baseline: mp(gwt, mcp1, "direct-p99-ms"), BaseNote: "go-sdk direct"},
		{ID: "mcp32-rate", Scenario: "MCP echo end to end, 32 concurrent callers, calls/s",
			Figure: m(gwt, mcp32, "calls/s"), Baseline: mp(gwt, mcp32, "direct-calls/s"), BaseNote: "go-sdk direct, 32 concurrent", Percent: true,
			Target: &Target{OnRatio: true, Op: ">=", Value: 0.25, Text: "≥ 25 % of direct (wave 2)", Secondary: true}, Profile: mcpProf,
			Ceiling: "mcp32-ceiling-rate",
			Why:     mcpWhy},
		{ID: "mcp32-p50", Scenario: "MCP echo end to end, 32 concurrent callers, p50",
			Figure: m(gwt, mcp32, "p50-ms"), Baseline: mp(gwt, mcp32, "direct-p50-ms"), BaseNote: "go-sdk direct, 32 concurrent",
			Target: &Target{OnRatio: true, Op: "<=", Value: 5, Text: "≤ 5× direct (wave 2)", Secondary: true}, Profile: mcpProf,
			Ceiling: "mcp32-ceiling-p50",
			Why:     mcpWhy},
		{ID: "mcp32-ceiling-rate", Scenario: "XMPP path alone for an echo call's exchange (trivial component: accepted + 2 canned events), 32 callers, calls/s",
			Figure: m(gwt, ceil32, "calls/s"), Baseline: mp(gwt, mcp32, "direct-calls/s"), BaseNote: "go-sdk direct, 32 concurrent", Percent: true},
		{ID: "mcp32-ceiling-p50", Scenario: "XMPP path alone for an echo call's exchange, 32 callers, p50",
			Figure: m(gwt, ceil32, "p50-ms"), Baseline: mp(gwt, mcp32, "direct-p50-ms"), BaseNote: "go-sdk direct, 32 concurrent"},
		{ID: "mcp32-vs-ceiling", Scenario: "MCP echo end to end, 32 callers, against the XMPP path alone for the same exchange, calls/s",
			Figure: m(gwt, mcp32, "calls/s"), Baseline: mp(gwt, ceil32, "calls/s"), BaseNote: "trivial component, same Prosody setup and callers", Percent: true,
			Goal:   "MCP echo calls/s, 32 callers, against the XMPP ceiling (BenchmarkMCPEchoXMPPCeiling)",
			Target: &Target{OnRatio: true, Op: ">=", Value: 0.85, Text: "≥ 85 % of the XMPP ceiling"}, Profile: mcpProf,
			Cost: stagesCost},
		{ID: "mcp1-vs-ceiling", Scenario: "MCP echo end to end, 1 caller, p50, against the XMPP path alone for the same exchange",
			Figure: m(gwt, mcp1, "p50-ms"), Baseline: mp(gwt, ceil1, "p50-ms"), BaseNote: "trivial component, 1 caller",
			Goal:   "MCP echo p50, 1 caller, against the XMPP ceiling's",
			Target: &Target{OnRatio: true, Op: "<=", Value: 1.5, Text: "≤ 1.5× the XMPP ceiling"}, Profile: mcpProf,
			Cost: stagesCost},
		{ID: "mcp32-p99", Scenario: "MCP echo end to end, 32 concurrent callers, p99",
			Figure: m(gwt, mcp32, "p99-ms"), Baseline: mp(gwt, mcp32, "direct-p99-ms"), BaseNote: "go-sdk direct, 32 concurrent"},
		{ID: "mcp-bridge", Scenario: "MCP bridge alone (Backend.Execute → server-everything echo), per call",
			Figure: nsMS("mcpbridge", "BenchmarkEchoBackend"), Baseline: ptr(nsMS("mcpbridge", "BenchmarkEchoDirect")), BaseNote: "go-sdk direct"},

		// CPU per call (issue 23 item 3; goals of issue 34): /proc
		// utime+stime of each process over the timed phases, divided by
		// the tasks completed. No profile: the gateway is a process of its
		// own, which the test binary's -cpuprofile does not see.
		{ID: "cpu1-gateway", Scenario: "CPU per MCP echo task, 1 caller: `agentgw serve` process (server-everything's own CPU not included)",
			Figure:   Metric{Pkg: gwt, Bench: cpu1, Unit: "gw-cpu-µs/task", Show: "µs/task"},
			Baseline: &Metric{Pkg: gwt, Bench: cpu1, Unit: "ceiling-cpu-µs/task", Show: "µs/task"},
			BaseNote: "trivial component process sending the same stanzas (accepted, running, completed), same run",
			Goal:     "CPU per MCP echo task, 1 caller (BenchmarkEchoCPU), against the trivial component",
			Target:   &Target{OnRatio: true, Op: "<=", Value: 4, Text: "≤ 4× the trivial component"},
			Cost:     cpuCost(cpu1)},
		{ID: "cpu32-gateway", Scenario: "CPU per MCP echo task, 32 callers: `agentgw serve` process",
			Figure:   Metric{Pkg: gwt, Bench: cpu32, Unit: "gw-cpu-µs/task", Show: "µs/task"},
			Baseline: &Metric{Pkg: gwt, Bench: cpu32, Unit: "ceiling-cpu-µs/task", Show: "µs/task"},
			BaseNote: "trivial component process, same stanzas, 32 callers, same run",
			Goal:     "CPU per MCP echo task, 32 callers (BenchmarkEchoCPU), against the trivial component",
			Target:   &Target{OnRatio: true, Op: "<=", Value: 2.5, Text: "≤ 2.5× the trivial component"},
			Cost:     cpuCost(cpu32)},
		{ID: "mcp-bridge-cpu", Scenario: "MCP bridge alone (Backend.Execute → server-everything echo): CPU of the bridge's process per call (node not included)",
			Figure: Metric{Pkg: "mcpbridge", Bench: "BenchmarkEchoBackend", Unit: "cpu-µs/call", Show: "µs/call"}},
		{ID: "cpu32-backend", Scenario: "CPU per MCP echo task, 32 callers: server-everything (node, the gateway's child)",
			Figure: Metric{Pkg: gwt, Bench: cpu32, Unit: "backend-cpu-µs/task", Show: "µs/task"}},
		{ID: "cpu1-prosody", Scenario: "CPU per MCP echo task, 1 caller: Prosody serving the gateway",
			Figure:   Metric{Pkg: gwt, Bench: cpu1, Unit: "gw-server-cpu-µs/task", Show: "µs/task"},
			Baseline: &Metric{Pkg: gwt, Bench: cpu1, Unit: "ceiling-server-cpu-µs/task", Show: "µs/task"},
			BaseNote: "Prosody serving the trivial component, same run",
			Goal:     "Prosody's CPU per MCP echo task, 1 caller, against Prosody serving the trivial component",
			Target:   &Target{OnRatio: true, Op: "<=", Value: 1.1, Text: "≤ 1.1× Prosody serving the trivial component"},
			Cost:     prosodyCost(cpu1)},
		{ID: "cpu32-prosody", Scenario: "CPU per MCP echo task, 32 callers: Prosody serving the gateway",
			Figure:   Metric{Pkg: gwt, Bench: cpu32, Unit: "gw-server-cpu-µs/task", Show: "µs/task"},
			Baseline: &Metric{Pkg: gwt, Bench: cpu32, Unit: "ceiling-server-cpu-µs/task", Show: "µs/task"},
			BaseNote: "Prosody serving the trivial component, same run",
			Goal:     "Prosody's CPU per MCP echo task, 32 callers, against Prosody serving the trivial component",
			Target:   &Target{OnRatio: true, Op: "<=", Value: 1.1, Text: "≤ 1.1× Prosody serving the trivial component"},
			Cost:     prosodyCost(cpu32)},
		{ID: "cpu1-prosody-wakeups", Scenario: "Prosody's wake-ups per MCP echo task, 1 caller (voluntary context switches: one per burst of input it reads)",
			Figure:   Metric{Pkg: gwt, Bench: cpu1, Unit: "gw-server-wakeups/task", Show: "wake-ups/task"},
			Baseline: &Metric{Pkg: gwt, Bench: cpu1, Unit: "ceiling-server-wakeups/task", Show: "wake-ups/task"},
			BaseNote: "Prosody serving the trivial component, same run"},
		{ID: "cpu32-prosody-wakeups", Scenario: "Prosody's wake-ups per MCP echo task, 32 callers",
			Figure:   Metric{Pkg: gwt, Bench: cpu32, Unit: "gw-server-wakeups/task", Show: "wake-ups/task"},
			Baseline: &Metric{Pkg: gwt, Bench: cpu32, Unit: "ceiling-server-wakeups/task", Show: "wake-ups/task"},
			BaseNote: "Prosody serving the trivial component, same run"},

		// Connector echo.
		{ID: "conn1-mean", Scenario: "Connector echo end to end through XMPP, 1 caller, mean",
			Figure: m(gwt, "BenchmarkConnectorEcho/callers=1", "mean-ms"), Baseline: ptr(nsMS("connectorbridge", "BenchmarkEcho/direct")),
			BaseNote: "reference connector called directly on its WebSocket"},
		{ID: "conn1-p99", Scenario: "Connector echo end to end, 1 caller, p99",
			Figure: m(gwt, "BenchmarkConnectorEcho/callers=1", "p99-ms")},
		{ID: "conn32-rate", Scenario: "Connector echo end to end, 32 concurrent callers, calls/s",
			Figure:   m(gwt, "BenchmarkConnectorEcho/callers=32", "calls/s"),
			Baseline: &Metric{Pkg: "connectorbridge", Bench: "BenchmarkEcho/direct", Unit: "ns/op", Show: "calls/s", Conv: nsToRate},
			BaseNote: "direct, one call at a time", Percent: true},
		{ID: "conn-bridge", Scenario: "Connector bridge alone (Backend.Execute), per call",
			Figure: nsMS("connectorbridge", "BenchmarkEcho/backend"), Baseline: ptr(nsMS("connectorbridge", "BenchmarkEcho/direct")), BaseNote: "direct WebSocket"},

		// MCP Tasks at the front (issue 30).
		{ID: "front-task-p50", Scenario: "MCP front: echo as a 2025-11-25 task (tools/call with task, then tasks/result), p50",
			Figure: m(front, "BenchmarkTaskEchoVsPlain", "task-p50-ms"), Baseline: mp(front, "BenchmarkTaskEchoVsPlain", "plain-p50-ms"), BaseNote: "plain tools/call, same front, same run"},
		{ID: "front-task-p99", Scenario: "MCP front: echo as a task, p99",
			Figure: m(front, "BenchmarkTaskEchoVsPlain", "task-p99-ms"), Baseline: mp(front, "BenchmarkTaskEchoVsPlain", "plain-p99-ms"), BaseNote: "plain tools/call, same run"},
		// MCP front chain.
		{ID: "front-p50", Scenario: "MCP front chain: TS client → agentgw mcp → Prosody → gateway → server-everything, p50",
			Figure: m(front, chain, "chain-p50-ms"), Baseline: mp(front, chain, "direct-p50-ms"), BaseNote: "TS client → server-everything directly"},
		{ID: "front-p99", Scenario: "MCP front chain, p99",
			Figure: m(front, chain, "chain-p99-ms"), Baseline: mp(front, chain, "direct-p99-ms"), BaseNote: "TS client direct"},
		{ID: "front-default-p50", Scenario: "MCP front chain, p50, harness Prosody config without the extra Nagle line",
			Figure: m(front, chainDefault, "chain-p50-ms"), Baseline: mp(front, chainDefault, "direct-p50-ms"), BaseNote: "TS client direct"},

		// Directory at scale.
		{ID: "dir-page-p50", Scenario: "Directory, 10,000 endpoints: page of 50 (disco#items + RSM) through Prosody, p50",
			Figure: m(gwt, "BenchmarkDirectory10k", "page-p50-ms")},
		{ID: "dir-page-p99", Scenario: "Directory, 10,000 endpoints: page of 50 through Prosody, p99",
			Figure: m(gwt, "BenchmarkDirectory10k", "page-p99-ms")},
		{ID: "dir-search-p50", Scenario: "Directory, 10,000 endpoints: search (jabber:iq:search), page of 50, p50",
			Figure: m(gwt, "BenchmarkDirectory10k", "search-p50-ms")},
		{ID: "dir-search-p99", Scenario: "Directory, 10,000 endpoints: search, p99",
			Figure: m(gwt, "BenchmarkDirectory10k", "search-p99-ms")},
		{ID: "dir-handler", Scenario: "Directory page of 50 of 10,000 in the handler (no XMPP), grant table",
			Figure: nsMS("directory/dirxmpp", "BenchmarkDirectoryPage50Of10000/grant-table")},
		{ID: "dir-index", Scenario: "Directory index: page of 50 of 10,000 (after the middle)",
			Figure: Metric{Pkg: "directory", Bench: "BenchmarkList50Of10000/after-middle", Unit: "ns/op", Show: "µs", Conv: nsToUS}},
		{ID: "dir-index-search", Scenario: "Directory index: search, page of 50",
			Figure: Metric{Pkg: "directory", Bench: "BenchmarkList50Of10000/search", Unit: "ns/op", Show: "µs", Conv: nsToUS}},
		{ID: "dir-rss", Scenario: "Directory, 10,000 endpoints (5 tools each): `agentgw serve` peak RSS (VmHWM)",
			Figure: m(gwt, "BenchmarkDirectory10k", "peak-rss-MB"), Baseline: mp(gwt, "BenchmarkDirectory10k", "empty-rss-MB"),
			BaseNote: "the same gateway with no endpoints",
			Target:   &Target{Op: "<", Value: 50, Text: "< 50 MB"}, // issue 23's goal (was < 100 MB)
			Profile:  &Profile{Pkg: gwt, Bench: "BenchmarkDirectory10k$", Benchtime: "1x", Mem: true},
			Goal:     "directory, 10,000 endpoints × 5 tools, peak RSS",
			Cost:     dirCost("BenchmarkDirectory10k")},
		{ID: "dir-rss-growth", Scenario: "Directory, 10,000 endpoints: RSS growth over the empty gateway",
			Figure: m(gwt, "BenchmarkDirectory10k", "rss-growth-MB")},
		{ID: "dir-heap", Scenario: "Directory, 10,000 endpoints: live heap of the loaded index (in process)",
			Figure: m(gwt, "BenchmarkDirectory10k", "registry-heap-MB")},
		{ID: "dir-heap-3tools", Scenario: "Directory index, 10,000 endpoints with 3 tools: live heap (TestMemory10000Endpoints)",
			Figure: Metric{Pkg: "directory", Unit: "MB", Log: memLoadHeap}},
		{ID: "dir-ready", Scenario: "Directory, 10,000 endpoints: `agentgw serve` start to component connected",
			Figure: m(gwt, "BenchmarkDirectory10k", "ready-s")},

		// Directory scale (issue 23): 100,000 endpoints beside the empty gateway.
		{ID: "dir100k-rss", Scenario: "Directory, 100,000 endpoints (5 tools each): `agentgw serve` peak RSS (VmHWM)",
			Figure: m(gwt, "BenchmarkDirectory100k", "peak-rss-MB"), Baseline: mp(gwt, "BenchmarkDirectory100k", "empty-rss-MB"),
			BaseNote: "the same gateway with no endpoints",
			Target:   &Target{Op: "<", Value: 250, Text: "< 250 MB"},
			Profile:  &Profile{Pkg: gwt, Bench: "BenchmarkDirectory100k$", Benchtime: "1x", Mem: true},
			Goal:     "directory, 100,000 endpoints × 5 tools, peak RSS",
			Cost:     dirCost("BenchmarkDirectory100k")},
		{ID: "dir100k-ready", Scenario: "Directory, 100,000 endpoints: `agentgw serve` start to component connected",
			Figure: m(gwt, "BenchmarkDirectory100k", "ready-s"), Baseline: mp(gwt, "BenchmarkDirectory100k", "empty-ready-s"),
			BaseNote: "the same gateway with no endpoints",
			Target:   &Target{Op: "<", Value: 3, Text: "< 3 s"},
			Goal:     "directory, 100,000 endpoints, `agentgw serve` ready",
			Cost:     readyCost},
		{ID: "dir100k-per-endpoint", Scenario: "Directory, 100,000 endpoints: peak RSS growth per endpoint",
			Figure: Metric{Pkg: gwt, Bench: "BenchmarkDirectory100k", Unit: "peak-rss-growth-B/endpoint", Show: "B"}},
		{ID: "dir100k-heap-per-endpoint", Scenario: "Directory, 100,000 endpoints: live heap of the loaded index per endpoint (in process)",
			Figure: Metric{Pkg: gwt, Bench: "BenchmarkDirectory100k", Unit: "registry-heap-B/endpoint", Show: "B"}},
		{ID: "dir100k-page-p50", Scenario: "Directory, 100,000 endpoints: page of 50 through Prosody, p50",
			Figure: m(gwt, "BenchmarkDirectory100k", "page-p50-ms")},
		{ID: "dir100k-search-p50", Scenario: "Directory, 100,000 endpoints: search, page of 50, p50",
			Figure: m(gwt, "BenchmarkDirectory100k", "search-p50-ms")},

		// Concurrency.
		{ID: "conc-lost", Scenario: "1,000 concurrent long-running tasks (5 progress each): lost revisions",
			Figure: m(gwt, "BenchmarkConcurrentTasks1000", "lost-revisions"),
			Target: &Target{Op: "==", Value: 0, Text: "zero"},
			Goal:   "1,000 concurrent long tasks: no revision lost (durability, Done means)"},
		{ID: "conc-undelivered", Scenario: "1,000 concurrent tasks: committed events the caller never received",
			Figure: m(gwt, "BenchmarkConcurrentTasks1000", "undelivered-events")},
		{ID: "conc-lag-p50", Scenario: "1,000 concurrent tasks: event lag (executor report → caller receipt), p50",
			Figure: m(gwt, "BenchmarkConcurrentTasks1000", "lag-p50-ms")},
		// Issue 34 retired the < 50 ms goal: the XMPP path alone cannot
		// deliver a wave of 1,000 events that fast on one Prosody thread.
		// The lag is held to the XMPP path's own for the same waves.
		{ID: "conc-lag-p99", Scenario: "1,000 concurrent tasks: event lag, p99, against the XMPP path alone for the same waves",
			Figure: m(gwt, "BenchmarkConcurrentTasks1000", "lag-p99-ms"), Baseline: mp(gwt, "BenchmarkConcurrentTasks1000XMPPCeiling", "lag-p99-ms"),
			BaseNote: "trivial component sending the same events in the same waves, no persistence",
			Goal:     "1,000 concurrent long tasks, event lag p99, against the XMPP path alone",
			Target:   &Target{OnRatio: true, Op: "<=", Value: 1, Text: "at or below the XMPP path alone"},
			Profile:  &Profile{Pkg: gwt, Bench: "BenchmarkConcurrentTasks1000$", Benchtime: "1x"},
			Cost:     lagCost},
		{ID: "conc-lag-p99-50ms", Scenario: "1,000 concurrent tasks: event lag, p99 (the retired absolute goal)",
			Figure:  m(gwt, "BenchmarkConcurrentTasks1000", "lag-p99-ms"),
			Target:  &Target{Op: "<", Value: 50, Text: "< 50 ms (wave 3, retired by issue 34)", Secondary: true},
			Ceiling: "conc-ceiling-lag-p99"},
		{ID: "conc-ceiling-lag-p50", Scenario: "XMPP path alone for the same event waves (trivial component: 1,000 tasks, 5 progress each 200 ms apart, then completed), event lag p50",
			Figure: m(gwt, "BenchmarkConcurrentTasks1000XMPPCeiling", "lag-p50-ms")},
		{ID: "conc-ceiling-lag-p99", Scenario: "XMPP path alone for the same event waves, event lag p99",
			Figure: m(gwt, "BenchmarkConcurrentTasks1000XMPPCeiling", "lag-p99-ms")},
		{ID: "engine-wave-commit-p99", Scenario: "The engine alone for the same event waves (tasks BenchmarkProgressWave, SQLite, no XMPP): Run call (commit), p99",
			Figure: m("tasks", "BenchmarkProgressWave", "commit-p99-ms"), Baseline: mp("tasks", "BenchmarkProgressWave", "commit-p50-ms"), BaseNote: "its p50"},
		{ID: "engine-wave-notify-p99", Scenario: "The engine alone for the same event waves: report → notifier receipt of the committed event, p99",
			Figure: m("tasks", "BenchmarkProgressWave", "notify-p99-ms")},
		{ID: "conc-commit-p99", Scenario: "1,000 concurrent tasks: commit part of the lag (Run call), p99",
			Figure: m(gwt, "BenchmarkConcurrentTasks1000", "commit-p99-ms")},
		{ID: "conc-rss", Scenario: "1,000 concurrent tasks: peak RSS (gateway and 4 callers in one process)",
			Figure: m(gwt, "BenchmarkConcurrentTasks1000", "peak-rss-MB")},

		// Recovery.
		{ID: "rec-ready", Scenario: "Recovery: restart over 10,000 non-terminal + 100,000 terminal tasks, time to ready",
			Figure: m(gwt, "BenchmarkRecovery", "ready-s")},
		{ID: "rec-state-p50", Scenario: "Recovery: task-state right after the restart, p50 (1,000 random tasks)",
			Figure: m(gwt, "BenchmarkRecovery", "state-p50-ms")},
		{ID: "rec-state-p99", Scenario: "Recovery: task-state right after the restart, p99",
			Figure: m(gwt, "BenchmarkRecovery", "state-p99-ms")},
		{ID: "rec-unsettled", Scenario: "Recovery: tasks still unsettled once ready (all 10,000 must be settled interrupted)",
			Figure: m(gwt, "BenchmarkRecovery", "unsettled-after")},

		// A2A 1.0 against 0.3 through the front (issue 31).
		{ID: "a2a10-jsonrpc-p50", Scenario: "A2A 1.0 JSON-RPC echo through `agentgw a2a` (JS SDK 1.3.0 Client), blocking send p50",
			Figure: m("callers/a2afront", "BenchmarkA2AEcho10Vs03", "v10-jsonrpc-p50-ms"), Baseline: mp("callers/a2afront", "BenchmarkA2AEcho10Vs03", "v03-p50-ms"),
			BaseNote: "the same echo from the JS SDK's 0.3 JSON-RPC transport, same run"},
		{ID: "a2a10-rest-p50", Scenario: "A2A 1.0 HTTP+JSON echo through `agentgw a2a`, blocking send p50",
			Figure: m("callers/a2afront", "BenchmarkA2AEcho10Vs03", "v10-rest-p50-ms"), Baseline: mp("callers/a2afront", "BenchmarkA2AEcho10Vs03", "v03-p50-ms"),
			BaseNote: "the same echo from the JS SDK's 0.3 JSON-RPC transport, same run"},
	}, stageRows()...)
}

func ptr(m Metric) *Metric { return &m }

const admissionWhy = "Each benchmarked invoke costs the gateway far more than the baseline's canned reply: schema validation, a group-committed SQLite transaction with fsync (synchronous=FULL) before `<accepted/>`, and then, as in production, the echo task runs: two more revisions committed (running, completed) and two event messages sent through the same Prosody. Those two messages double the stanzas Prosody routes per invoke. The row \"XMPP path's own limit for an echo task's stanzas\" is a trivial component sending exactly the gateway's stanzas with no persistence at all (see the verdict on it below); against that like-for-like limit, the row \"Admission, against the XMPP path's own limit\" is the gateway's own cost. The row \"Admission of long-running tasks\" shows the same gateway when each invoke brings one event instead of two. Gateway, callers and Prosody share the 2 cores (gotest-cpu-% and server-cpu-% in the raw lines)."

const mcpWhy = "A call through the gateway is an invoke IQ through Prosody, an admission commit, two more committed revisions (running, completed; synchronous=FULL, group-committed) and an event message back through Prosody, around the same MCP call over stdio; the direct call is one JSON-RPC round trip over a pipe. On 2 cores, Prosody, the gateway, server-everything and the callers compete for CPU, while the direct path has only the client and node. In the profile the go-sdk client of the baseline also runs in the test process (the direct phases alternate with the gateway phases). The rows \"XMPP path alone for an echo call's exchange\" measure a trivial component that makes the same exchange (invoke, accepted, two events) with nothing behind it, the ceiling of any gateway behind this Prosody (see the verdict on it below); the row \"MCP echo end to end, 32 callers, against the XMPP path alone\" is the gateway's own share."
