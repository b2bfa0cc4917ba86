// Package bench tests the end-to-end benchmarks (make bench, scripts/bench.sh).
package bench
