package main

import (
	"fmt"
	"strings"
)

// stageBench is the benchmark whose metrics are the per-stage latencies
// of the echo call, taken from its OpenTelemetry spans (issue 23).
const stageBench = "BenchmarkMCPEchoStages"

// stages are its rows, in the order of one call, with what each covers.
var stages = []struct{ key, what string }{
	{"decode", "stanza decode: the invoke IQ read into a bounded tree (reader goroutine)"},
	{"stanza", "the whole invoke IQ: queued to a worker, routed, admitted, `<accepted/>` queued"},
	{"authorize", "authorization: policy, endpoint, version, tool"},
	{"admission-commit", "admission commit: the task and its replay record, durable (group commit, fsync)"},
	{"dispatch", "dispatch: accepted → running committed, to the backend's launch"},
	{"transition-running", "transition commit accepted → running (revision + event, durable)"},
	{"backend", "backend call: the MCP `tools/call` over stdio to server-everything, including the wait for its result's commit"},
	{"transition-completed", "transition commit running → completed (revision + event, durable)"},
	{"event-status", "event encode and send: the `running` status message queued"},
	{"event-completed", "event encode and send: the `completed` message queued"},
}

// stageRows are the Results rows of the breakdown's own figures.
func stageRows() []Row {
	return []Row{
		{ID: "stages-traced", Scenario: "MCP echo, 1 caller, p50 with tracing on (in-process span recorder), against tracing off in the same run",
			Figure: m(gwt, stageBench, "traced-p50-ms"), Baseline: mp(gwt, stageBench, "p50-ms"), BaseNote: "tracing off, alternating"},
		{ID: "telemetry-off", Scenario: "A traced stage with tracing off, against the same stage uninstrumented (internal/telemetry), ns per stage",
			Figure: m("internal/telemetry", "BenchmarkStageOffVsBare", "off-ns/stage"), Baseline: mp("internal/telemetry", "BenchmarkStageOffVsBare", "bare-ns/stage"), BaseNote: "uninstrumented, same loop"},
		{ID: "telemetry-off-allocs", Scenario: "A traced stage with tracing off: allocations per 1,000 stages",
			Figure: m("internal/telemetry", "BenchmarkStageOffVsBare", "allocs/op")},
	}
}

// renderStages is the "Latency breakdown" section: p50 and p99 of every
// stage of one echo call, from the spans.
func renderStages(res *Results) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("\n## Latency breakdown (issue 23)\n\n")
	w("Where one MCP echo call's time goes (1 caller, server-everything over stdio, through Prosody), from the OpenTelemetry spans of `%s` recorded in process (docs/telemetry.md). ", stageBench)
	w("Stages overlap: `stanza` contains authorize and the admission commit; dispatch contains the running transition's commit; the event spans run after their commit.")
	if share, ok := res.Get(gwt, stageBench, "running-in-admission-%"); ok {
		w(" When the backend has a free slot, the move to running commits in the admission's transaction, so dispatch and its commit lie inside the admission commit and share its fsync: so it was for %s of the calls here.", pct(share, 100))
	}
	w("\n\n")
	w("| Stage | p50 | p99 |\n| --- | --- | --- |\n")
	for _, s := range stages {
		p50, ok50 := res.Get(gwt, stageBench, s.key+"-p50-ms")
		p99, ok99 := res.Get(gwt, stageBench, s.key+"-p99-ms")
		w("| %s | %s | %s |\n", cell(s.what), msText(p50, ok50), msText(p99, ok99))
	}
	if v, ok := res.Get(gwt, stageBench, "p50-ms"); ok {
		w("| the whole call (invoke → completed event at the caller), tracing off | %s | — |\n", msText(v, true))
	}
	return b.String()
}

func msText(v float64, ok bool) string {
	if !ok {
		return "not measured"
	}
	return num(v) + " ms"
}
