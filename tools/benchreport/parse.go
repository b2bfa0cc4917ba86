package main

import (
	"bufio"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// modulePath is stripped from "pkg:" lines, so results are keyed by the
// package directory ("e2e/bench").
const modulePath = "github.com/agentgw/agentgw/"

// Results holds every metric of every benchmark line, by package directory
// and benchmark name without the -GOMAXPROCS suffix. A benchmark reported
// more than once (-count, or a rerun) keeps every value; Get returns their
// median.
type Results struct {
	values map[string]map[string][]float64 // "pkg BenchmarkName" → unit → values
	// Lines are the benchmark lines in input order, for the appendix.
	Lines []string
	// Failed lists "pkg BenchmarkName" of benchmarks reported as failing.
	Failed []string
	// Logs keeps test log lines, by package directory, for metrics that
	// tests print rather than report (TestMemory10000Endpoints).
	Logs map[string][]string
}

var (
	benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.+)$`)
	failLine  = regexp.MustCompile(`^--- FAIL: (Benchmark\S+)`)
)

// Parse reads `go test -bench` output (several runs may be concatenated).
func Parse(r io.Reader) (*Results, error) {
	res := &Results{values: map[string]map[string][]float64{}, Logs: map[string][]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	pkg := ""
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(strings.TrimSpace(p), modulePath)
			continue
		}
		if m := failLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			res.Failed = append(res.Failed, pkg+" "+stripProcs(m[1]))
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			if t := strings.TrimSpace(line); t != "" && pkg != "" {
				res.Logs[pkg] = append(res.Logs[pkg], t)
			}
			continue
		}
		fields := strings.Fields(m[3])
		if len(fields)%2 != 0 {
			continue // not a result line (a log line that starts like one)
		}
		key := pkg + " " + m[1]
		units := res.values[key]
		if units == nil {
			units = map[string][]float64{}
			res.values[key] = units
		}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			units[fields[i+1]] = append(units[fields[i+1]], v)
		}
		res.Lines = append(res.Lines, pkg+": "+line)
	}
	return res, sc.Err()
}

func stripProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

// Get returns the median value of a benchmark's metric.
func (r *Results) Get(pkg, bench, unit string) (float64, bool) {
	vs := r.values[pkg+" "+bench][unit]
	if len(vs) == 0 {
		return 0, false
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[len(s)/2], true
}

// LogMatch returns the submatches of the first log line of pkg matching re.
func (r *Results) LogMatch(pkg string, re *regexp.Regexp) []string {
	for _, l := range r.Logs[pkg] {
		if m := re.FindStringSubmatch(l); m != nil {
			return m
		}
	}
	return nil
}
