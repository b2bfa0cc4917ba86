#!/usr/bin/env bash
# make bench: build everything, run every benchmark scenario for a bounded
# time (each go test run starts its own private Prosody, the gateway and
# the backends it needs: server-everything, the reference connector), then
# write docs/benchmarks.md with `go run ./tools/benchreport`. Targets
# that are missed get a profile of their hot path, taken in a second,
# shorter run. The whole thing stays under 15 minutes on the 2-core
# machines.
#
# BENCH_OUT=dir keeps the raw results there (default: a temp dir);
# AGENTGW_BENCH_SECONDS sets the timed phase of the echo scenarios (8 s).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
MOD=github.com/agentgw/agentgw
START=$(date +%s)

bash scripts/install-deps.sh || exit 1
echo "bench: building"
go build ./... || exit 1
go build -o bin/agentgw ./cmd/agentgw || exit 1

OUT=${BENCH_OUT:-$(mktemp -d /tmp/agentgw-bench-XXXXXX)}
mkdir -p "$OUT"
: >"$OUT/bench.txt"
: >"$OUT/load.txt"
echo "bench: raw results in $OUT"
export AGENTGW_BENCH_SECONDS=${AGENTGW_BENCH_SECONDS:-8}

failed=0
# fsync_ms is the mean time of one synchronous 4 KiB write in $OUT (the
# store's commits wait for the same disk), over 50 writes.
fsync_ms() {
	dd if=/dev/zero of="$OUT/fsync.probe" bs=4k count=50 oflag=dsync 2>&1 |
		awk '/copied/ { for (i = 2; i <= NF; i++) if ($i ~ /^s,?$/) { printf "%.2f", $(i-1) * 20; exit } }'
	rm -f "$OUT/fsync.probe"
}
load() { echo "$1: load $(cut -d' ' -f1-3 /proc/loadavg), fsync of 4 KiB $(fsync_ms) ms" >>"$OUT/load.txt"; }

# bench PKG TIMEOUT GO-TEST-ARGS... runs one bounded go test and appends
# its output, headed by the package, to bench.txt.
bench() {
	local pkg=$1 timeout=$2
	shift 2
	echo "bench: ./$pkg $*"
	load "before ./$pkg $*"
	local t0=$SECONDS
	{
		echo "pkg: $MOD/$pkg"
		go test -count=1 -timeout "$timeout" "$@" "./$pkg" 2>&1
	} | tee -a "$OUT/bench.txt" | grep -E '^(Benchmark|--- FAIL|FAIL|ok|panic)' || true
	if grep -q "^FAIL" <(tail -n 5 "$OUT/bench.txt"); then
		failed=1
	fi
	echo "bench: ./$pkg took $((SECONDS - t0)) s"
}

load start
# Admission through Prosody and its trivial-component baseline, three times
# each, alternating (the report takes medians), then the parts alone.
for i in 1 2 3; do
	bench e2e/bench 3m -run '^$' -bench 'Benchmark(AdmissionBaseline|AdmissionBaselineEvents|Admission|AdmissionLongRunning)$' -benchtime 4s
done
bench tasks 3m -run '^$' -bench 'BenchmarkAdmit(NoPersist)?$' -benchtime 3s
bench component 3m -run '^$' -bench 'BenchmarkIQRoundTrip$' -benchtime 2s
# Echo end to end through XMPP, MCP and connector, against direct calls.
bench e2e/bench 6m -run '^$' -bench 'Benchmark(MCPEcho|MCPEchoXMPPCeiling|ConnectorEcho)$' -benchtime 1x
bench mcpbridge 3m -run '^$' -bench 'BenchmarkEcho(Backend|Direct)$' -benchtime 2s
# CPU per echo task of the gateway process beside the trivial component's,
# each a process of its own (issue 23 item 3).
bench e2e/bench 4m -run '^$' -bench 'BenchmarkEchoCPU$' -benchtime 1x
# The latency breakdown of the echo call from its OpenTelemetry spans, and
# the cost of the instrumentation with tracing off (issue 23).
bench e2e/bench 4m -run '^$' -bench 'BenchmarkMCPEchoStages$' -benchtime 1x
bench internal/telemetry 2m -run '^$' -bench 'BenchmarkStageOffVsBare$' -benchtime 3000x
bench connectorbridge 3m -run '^$' -bench 'BenchmarkEcho$' -benchtime 2s
bench connectorbridge 3m -run '^$' -bench 'BenchmarkIMRelay$' -benchtime 2s
bench callers/mcpfront 5m -run '^$' -bench 'BenchmarkEchoFullChainVsDirect$' -benchtime 1x
# MCP Tasks at the front: a task-augmented echo against a plain tools/call.
bench callers/mcpfront 4m -run '^$' -bench 'BenchmarkTaskEchoVsPlain$' -benchtime 1x
# A2A 1.0 (JSON-RPC, HTTP+JSON) against 0.3 through agentgw a2a, same run.
bench callers/a2afront 4m -run '^$' -bench 'BenchmarkA2AEcho10Vs03$' -benchtime 1x
# agent-control-center runs through the gateway against the connector called directly.
bench e2e/bench 4m -run '^$' -bench 'BenchmarkACCRun$' -benchtime 1x
# Human Messaging: a chat round trip and sustained messages/s, each beside a
# trivial component echoing the same exchange.
bench e2e/bench 3m -run '^$' -bench 'BenchmarkChat(RoundTripBaseline|RoundTrip|ThroughputBaseline|Throughput)$' -benchtime 3s
# Directory at scale, concurrency and recovery.
bench directory 3m -run '^TestMemory10000Endpoints$' -v -bench 'BenchmarkList50Of10000$' -benchtime 1s
bench directory/dirxmpp 5m -run '^$' -bench 'BenchmarkDirectoryPage50Of10000$' -benchtime 1s
# One process each, so that RSS and heap figures are their own.
bench e2e/bench 4m -run '^$' -bench 'BenchmarkDirectory10k$' -benchtime 1x
# Directory scale (issue 23): 100,000 endpoints beside the empty gateway.
bench e2e/bench 6m -run '^$' -bench 'BenchmarkDirectory100k$' -benchtime 1x
bench e2e/bench 4m -run '^$' -bench 'BenchmarkConcurrentTasks1000$' -benchtime 1x
# The same event waves through the XMPP path alone (trivial component), and
# the engine's commit of them alone (no XMPP): the parts of the lag goal.
bench e2e/bench 4m -run '^$' -bench 'BenchmarkConcurrentTasks1000XMPPCeiling$' -benchtime 1x
bench tasks 3m -run '^$' -bench 'BenchmarkProgressWave$' -benchtime 1x
bench e2e/bench 5m -run '^$' -bench 'BenchmarkRecovery$' -benchtime 1x
# The store drivers side by side: admissions and MCP echo on PostgreSQL
# against SQLite in the same run (ratio postgres/sqlite).
bench tasks 3m -run '^$' -bench 'BenchmarkAdmitPostgresVsSQLite$' -benchtime 3s
bench e2e/bench 5m -run '^$' -bench 'BenchmarkMCPEchoPostgresVsSQLite$' -benchtime 1x
# Cluster mode: admissions with 1, 2 and 3 instances on one PostgreSQL, and
# the takeover after a crash (docs/cluster.md).
bench tasks 4m -run '^$' -bench 'BenchmarkClusterAdmit$' -benchtime 2s
bench tasks 4m -run '^$' -bench 'BenchmarkClusterTakeover$' -benchtime 3x
# Cluster-wide limits: admissions (engines) and MCP echo (agentgw serve
# behind ejabberd) with 1, 2 and 3 members in one run, as ratios.
bench tasks 4m -run '^$' -bench 'BenchmarkClusterAdmitRatio$' -benchtime 1x
bench e2e/bench 8m -run '^$' -bench 'BenchmarkClusterMCPEcho$' -benchtime 1x
load "end of the measured runs"

# Profiles of missed targets, in shorter runs of their own.
go run ./tools/benchreport -results "$OUT" -missed >"$OUT/missed.txt" || failed=1
while IFS=$'\t' read -r id pkg re benchtime kind; do
	[ -n "$id" ] || continue
	if [ $(($(date +%s) - START)) -gt 720 ]; then
		echo "bench: no time left to profile $id"
		continue
	fi
	echo "bench: profiling $id ($kind) with ./$pkg -bench '$re'"
	prof="$OUT/prof-$id.out"
	if [ "$kind" = mem ]; then
		flags=(-memprofile "$prof")
		view=(-sample_index=inuse_space)
	else
		flags=(-cpuprofile "$prof")
		view=()
	fi
	AGENTGW_BENCH_SECONDS=4 go test -count=1 -timeout 5m -run '^$' -bench "$re" -benchtime "$benchtime" \
		-o "$OUT/prof-$id.test" "${flags[@]}" "./$pkg" >"$OUT/prof-$id.log" 2>&1 ||
		echo "bench: the profiling run of $id failed (see $OUT/prof-$id.log)"
	if [ -s "$prof" ]; then
		go tool pprof "${view[@]}" -top -cum -nodecount=60 "$OUT/prof-$id.test" "$prof" >"$OUT/pprof-$id.txt" 2>/dev/null
	fi
	rm -f "$OUT/prof-$id.test" # tens of MB; the symbols are in the profile

done <"$OUT/missed.txt"

go run ./tools/benchreport -results "$OUT" -out docs/benchmarks.md || exit 1
echo "bench: done in $(($(date +%s) - START)) s; raw results in $OUT"
if [ "$failed" != 0 ]; then
	echo "bench: some benchmarks failed; their rows read 'not measured'" >&2
	exit 1
fi
