#!/usr/bin/env bash
# Runs the soak test (TestSoak in e2e/soak) for SOAK_DURATION
# (default 20m) against `agentgw serve` as a subprocess, and writes the
# recorded curve to docs/soak.md (SOAK_DOC overrides the path). The test
# itself fails on sustained growth of RSS, live heap, goroutines, open
# descriptors or store size, or on any unexpected operation outcome.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

duration=${SOAK_DURATION:-20m}
doc=${SOAK_DOC:-docs/soak.md}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# go test's own timeout: the run, plus start-up and shutdown. Durations
# are Go-style h/m/s sums such as 20m, 1h or 2m30s.
secs=0
rest=$duration
while [[ $rest =~ ^([0-9]+)([hms])(.*)$ ]]; do
	n=${BASH_REMATCH[1]}
	case ${BASH_REMATCH[2]} in
	h) secs=$((secs + n * 3600)) ;;
	m) secs=$((secs + n * 60)) ;;
	s) secs=$((secs + n)) ;;
	esac
	rest=${BASH_REMATCH[3]}
done
if [ -n "$rest" ] || [ "$secs" -eq 0 ]; then
	echo "soak: SOAK_DURATION=$duration: use whole h/m/s units, e.g. 20m or 1h30m" >&2
	exit 2
fi
timeout=$((secs + 600))s

echo "soak: running for $duration (go test -timeout $timeout); samples go to $doc"
status=0
SOAK_DURATION=$duration SOAK_OUT=$work/soak.csv SOAK_REPORT=$work/soak-report.md \
	go test -count=1 -run '^TestSoak$' -timeout "$timeout" -v ./e2e/soak 2>&1 | tee "$work/soak.log" || status=$?

if [ ! -s "$work/soak-report.md" ]; then
	echo "soak: the test wrote no report (exit $status); $doc left unchanged" >&2
	[ "$status" -ne 0 ] || status=1
	exit "$status"
fi

{
	cat <<'EOF'
# Soak test

`make soak` (scripts/soak.sh) runs `TestSoak` in `e2e/soak`
for `SOAK_DURATION` (default 20m) and rewrites this file with the curve.
The test runs only when `SOAK_DURATION` is set, so `make test` (and CI,
which runs `make test`) no longer runs it; `SOAK_DURATION=2m make soak`
is the short smoke run (a sample every 10 s, looser growth limits), and
`go test -short` skips it.

## What runs

- `agentgw serve` as a **subprocess** (the binary built from
  `cmd/agentgw`), so RSS, descriptors and goroutines are the real
  process's: RSS and descriptors from `/proc/<pid>/status` and
  `/proc/<pid>/fd`, goroutines (`go_goroutines`) and the live heap
  (`go_memstats_next_gc_bytes / (1 + GOGC/100)`, the heap marked live at
  the last GC) from its `/metrics` endpoint. DB+WAL is the size of
  `agentgw.db` plus `agentgw.db-wal`; task rows is `count(*)` of the
  `tasks` table.
- A private Prosody; behind the gateway two real MCP servers
  (`@modelcontextprotocol/server-everything` over stdio: `everything`
  for echo, progress and cancels, `asker` for elicitation), the reference
  xAgent connector (`connectorbridge/connectortest`, in the test process,
  signed in with `agentgw connector auth`), and six static-manifest agents.
- Four client connections, each looping over: discovery (gateway info,
  the directory in pages of 3, endpoint info, manifest, tool items,
  schema, search), echo on the connector and on MCP, progress on both
  (`slow_count`, `trigger-long-running-operation`), input
  (`trigger-elicitation-request`, answered with provide-input), cancel
  (a 30 s operation cancelled once running) and replay (one request-id
  invoked twice, and again after settling: one task). Every outcome is
  checked; any unexpected one fails the run.
- Input calls run one at a time at `asker`, as they did when the bridge
  refused to guess whose question an `elicitation/create` was. Since the
  session pool (`[agents.mcp] max_sessions`, docs/mcp-bridge.md) every
  call has a server session of its own and concurrent input calls are
  attributed with certainty (e2e/mcp `TestMCPInputConcurrent*`); the soak
  workload was not changed and has not been re-run with the pool.

## Method and limits

Each sample is taken with the workload paused and nothing in flight, so
it measures what stays, not what is busy. The store is kept bounded on
purpose: `[tasks] retention_seconds = replay_seconds = 10`, and the engine
purges every minute, so the tasks table holds at most the tasks of the
last ~70 s; the test checks that bound at every sample after the first
minute and a quarter, and that `task_events` shrinks with it (at most ten
events per task in the bound). The store file itself plateaus after about
two minutes; the WAL file does not shrink below `journal_size_limit` (16 MiB) and
its high-water mark, set by the purge transactions, creeps up by about
0.2 MB every few minutes, which the DB + WAL limit allows for.

The least-squares slope over the **second half of the work** must stay
below the limits: the samples from the first one at which half of the
run's tasks had been created (at least the last four samples). The first
half is warm-up. It is counted in tasks, not minutes, because the caches
that warm up fill by count, and on a shared machine the workload's rate
dips when other jobs run; a half counted in minutes then still holds
warm-up (a 10-minute run on this machine failed that way at 1.37 MB/min
of RSS, with the plateau plainly reached one sample later).

| metric | long run (≥ 5 min) | smoke (< 5 min) |
|---|---|---|
| RSS | 1 MB/min | 16 MB/min |
| live heap | 0.5 MB/min | 8 MB/min |
| goroutines | 2 /min | 10 /min |
| open fds | 1 /min | 4 /min |
| DB + WAL | 0.5 MB/min | 8 MB/min |

The workload runs 1000-2000 tasks a minute on a 2-CPU machine. At 1000 a
minute the live-heap limit is crossed by a leak of half a kilobyte per
task, the RSS limit by one kilobyte, the goroutine limit by one goroutine
per 500 tasks, the descriptor limit by one descriptor per 1000 tasks and
the DB + WAL limit by half a kilobyte per task never purged; the slopes
measured here after warm-up stay below (see the recorded run; the live
heap still creeps at about half its limit, see below). The warm-up is
long because several caches are bounded by count rather than time and
fill at the workload's pace for three to four minutes: the event notifier remembers the last
20000 sent events for bounce fallback, the metrics keep admission times of
up to 100000 tasks, SQLite's page caches grow to their limit, and the WAL
file grows to the size of the largest transaction (a purge) and stays
there. A 2-minute smoke run is inside that warm-up, so its memory and
store limits only catch gross leaks (about 10 KB per task or more); its
goroutine and descriptor limits are tight, and the tasks-table bound is
exact in both modes.

## Known creep (bounded)

- The live heap still rises slowly after warm-up: +0.18 MB/min over the
  second half of the 20-minute run of 2026-11-29 (13.55 MB at 4 min,
  14.41 MB from 15 min on, in steps), within the 0.5 MB/min limit. Two
  earlier suspects are ruled out: `startTimes` in
  `gateway/observe.go` compacts settled task IDs out of its
  order slice, and the writer sets `journal_size_limit` (16 MiB), so the
  WAL is truncated after checkpoints. The rest of the cause is not pinned
  down; the step shape fits slices that double as the bounded caches
  above fill.

## Recorded run

EOF
	note=
	[ "$duration" = 20m ] || note=": a $duration run, not the default 20m"
	echo "Recorded $(date -u +%Y-%m-%d) on $(nproc) CPUs with \`SOAK_DURATION=$duration make soak\`$note."
	echo
	cat "$work/soak-report.md"
} > "$doc"
echo "soak: wrote $doc"
exit "$status"
