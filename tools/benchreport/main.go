// Command benchreport turns the output of `make bench` (go test -bench
// runs collected by scripts/bench.sh) into docs/benchmarks.md: one table
// row per scenario with the figure, the baseline measured in the same run,
// their ratio and the target, the machine the run happened on, and for
// each missed target the profile of its hot path.
//
//	go run ./tools/benchreport -results DIR -out docs/benchmarks.md
//	go run ./tools/benchreport -results DIR -missed   # what to profile
//
// DIR holds bench.txt (the concatenated go test output), optionally
// load.txt (lines of /proc/loadavg taken during the run, "label: ...") and
// pprof-<row id>.txt files (pprof -top output for missed targets).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	results := flag.String("results", "", "directory holding bench.txt (required)")
	out := flag.String("out", "docs/benchmarks.md", "report to write")
	missed := flag.Bool("missed", false, "print the profiles to take for missed targets instead of writing the report")
	flag.Parse()
	if *results == "" {
		fmt.Fprintln(os.Stderr, "benchreport: -results is required")
		os.Exit(2)
	}
	if err := run(*results, *out, *missed); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(dir, out string, missed bool) error {
	f, err := os.Open(filepath.Join(dir, "bench.txt"))
	if err != nil {
		return err
	}
	res, err := Parse(f)
	f.Close()
	if err != nil {
		return err
	}
	var outcomes []Outcome
	for _, r := range Rows() {
		outcomes = append(outcomes, r.evaluate(res))
	}
	if missed {
		for _, l := range missedProfiles(outcomes) {
			fmt.Println(l)
		}
		return nil
	}
	doc := render(outcomes, res, dir, collectMachine(dir))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
		return err
	}
	met, miss, unmeasured := 0, 0, 0
	for _, o := range outcomes {
		switch {
		case !o.primary():
		case o.Met == nil:
			unmeasured++
		case *o.Met:
			met++
		default:
			miss++
		}
	}
	fmt.Printf("benchreport: wrote %s: %d goals met, %d missed, %d not measured\n", out, met, miss, unmeasured)
	for _, o := range goals(outcomes) {
		state := "not measured"
		if o.Met != nil {
			state = map[bool]string{true: "met", false: "MISSED"}[*o.Met]
		}
		fmt.Printf("  %-20s %-12s figure %s %s, ratio %s, goal %s\n", o.ID, state, valueText(o.Fig, o.HasFig), o.Figure.unit(), o.ratioText(), o.Target.Text)
	}
	return nil
}

// missedProfiles lists the profiles to take for missed goals, one line
// each: row id, package, -bench, -benchtime, cpu or mem. Rows sharing a
// profile are listed once; superseded targets are not profiled.
func missedProfiles(outcomes []Outcome) []string {
	var out []string
	seen := map[Profile]bool{}
	for _, o := range outcomes {
		if !o.primary() || o.Met == nil || *o.Met || o.Profile == nil || seen[*o.Profile] {
			continue
		}
		seen[*o.Profile] = true
		kind := "cpu"
		if o.Profile.Mem {
			kind = "mem"
		}
		out = append(out, fmt.Sprintf("%s\t%s\t%s\t%s\t%s", o.ID, o.Profile.Pkg, o.Profile.Bench, o.Profile.Benchtime, kind))
	}
	return out
}

func valueText(v float64, ok bool) string {
	if !ok {
		return "not measured"
	}
	return num(v)
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
