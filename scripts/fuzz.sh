#!/usr/bin/env bash
# Runs every Go fuzz target of the repository, one after the other, for
# FUZZTIME each (default 5m), and prints a summary with the executions and
# the corpus growth of each target. A crasher fails the run; Go writes it
# to the package's testdata/fuzz/<Target>/, where it stays as a regression
# seed that plain `go test` replays.
#
#   scripts/fuzz.sh                  all targets
#   scripts/fuzz.sh FuzzParseInvoke  only the named targets
#   scripts/fuzz.sh -l               list the targets and exit
#
# Environment: FUZZTIME (go test -fuzztime, default 5m), FUZZ_PARALLEL
# (workers per target, default GOMAXPROCS), FUZZ_MINIMIZETIME (default 10s:
# with Go's 60s default, minimizing one new corpus entry can stall every
# worker for a minute, which shows as "0/sec"), FUZZ_LOGDIR (full logs; a
# temp dir by default).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

FUZZTIME="${FUZZTIME:-5m}"
LOGDIR="${FUZZ_LOGDIR:-$(mktemp -d -t agentgw-fuzz-XXXXXX)}"
mkdir -p "$LOGDIR"

# "package-dir Target" for every fuzz target in a test file.
list_targets() {
	grep -rn --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.git \
		-E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . |
		while IFS=: read -r file _ decl; do
			name="${decl#func }"
			echo "$(dirname "$file") ${name%%(*}"
		done | sort -u
}

if [[ "${1:-}" == "-l" ]]; then
	list_targets
	exit 0
fi

declare -A wanted=()
for a in "$@"; do wanted["$a"]=1; done

parallel=()
[[ -n "${FUZZ_PARALLEL:-}" ]] && parallel=(-parallel "$FUZZ_PARALLEL")

rows=()
failed=0
flaked=0
ran=0
while read -r pkg name; do
	if ((${#wanted[@]} > 0)) && [[ -z "${wanted[$name]:-}" ]]; then
		continue
	fi
	ran=$((ran + 1))
	log="$LOGDIR/$(echo "${pkg#./}" | tr / _)_$name.log"
	echo "==> $name ($pkg) for $FUZZTIME"
	seeds="$pkg/testdata/fuzz/$name"
	before=$(ls "$seeds" 2>/dev/null | sort)
	start=$(date +%s)
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "${FUZZ_MINIMIZETIME:-10s}" \
		-timeout 0 "${parallel[@]}" "$pkg" >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	# The last progress line: "fuzz: elapsed: 1m0s, execs: 123 (2/sec), new interesting: 4 (total: 40)".
	progress=$(grep -E 'fuzz: elapsed: .*execs: [0-9]+' "$log" | tail -n 1)
	execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$progress")
	corpus=$(sed -nE 's/.*\(total: ([0-9]+)\).*/\1/p' <<<"$progress")
	after=$(ls "$seeds" 2>/dev/null | sort)
	if ((rc == 0)); then
		result=ok
	elif [[ "$before" == "$after" ]] && tail -n 5 "$log" | grep -q '^    context deadline exceeded$'; then
		# Go 1.26's fuzz coordinator can report its own -fuzztime deadline
		# as a failure, with no crasher written (go.dev/issue/75804, fixed
		# in Go 1.27): the run completed its time.
		result=ok*
		flaked=$((flaked + 1))
	else
		result=FAIL
		failed=$((failed + 1))
		crasher=$(sed -nE 's/.*Failing input written to (.*)$/\1/p' "$log" | tail -n 1)
		echo "    FAILED (exit $rc)${crasher:+; crasher: $pkg/$crasher}"
		tail -n 30 "$log" | sed 's/^/    | /'
	fi
	rows+=("$(printf '%-5s %-26s %-26s %12s %8s %6ss' "$result" "$name" "${pkg#./}" "${execs:-?}" "${corpus:-?}" "$secs")")
done < <(list_targets)

if ((ran == 0)); then
	echo "fuzz.sh: no fuzz target matched: $*" >&2
	exit 2
fi
echo
echo "Fuzz summary (FUZZTIME=$FUZZTIME, logs in $LOGDIR):"
printf '%-5s %-26s %-26s %12s %8s %7s\n' result target package execs corpus time
printf '%s\n' "${rows[@]}"
echo "$ran targets, $failed failed"
if ((flaked > 0)); then
	echo "ok*: $flaked target(s) ran their full time and wrote no crasher, but go test exited with the coordinator's own \"context deadline exceeded\" (go.dev/issue/75804, fixed in Go 1.27)"
fi
((failed == 0))
