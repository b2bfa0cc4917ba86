package tasks_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// BenchmarkClusterAdmitRatio measures durable admissions/s (fsync on) with
// 1, 2 and 3 engines on one PostgreSQL in one run, each for the same timed
// phase with 16 callers spread over the members, under the cluster-wide
// limits (every member's group commit holds the cluster commit lock and
// counts in the store). It reports each rate and the ratios to one
// member. Run with -benchtime 1x; AGENTGW_BENCH_SECONDS sets the phase
// (default 4 s).
func BenchmarkClusterAdmitRatio(b *testing.B) {
	phase := 4 * time.Second
	if s, err := strconv.ParseFloat(os.Getenv("AGENTGW_BENCH_SECONDS"), 64); err == nil && s > 0 {
		phase = time.Duration(s * float64(time.Second))
	}
	srv := pgharness.Start(b, pgharness.Options{Durable: true})
	rates := map[int]float64{}
	for range b.N {
		for _, n := range []int{1, 2, 3} {
			c := newTestClusterOn(b, srv)
			// Held tasks pile up: lift the capacity and the quotas (they are
			// still counted, in the store, at every admission).
			c.mutate = func(cfg *tasks.Config) {
				cfg.MaxActive = 1 << 30
				cfg.MaxActivePerPrincipal, cfg.MaxActivePerDomain = 1<<30, 1<<30
			}
			var ms []*member
			for i := range n {
				ms = append(ms, c.start(fmt.Sprintf("gw-%d", i), 0, true))
			}
			inv := c.inv("echo", `{}`)
			var next, done atomic.Int64
			var wg sync.WaitGroup
			deadline := time.Now().Add(phase)
			start := time.Now()
			for w := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m := ms[w%n]
					for time.Now().Before(deadline) {
						in := inv
						in.RequestID = fmt.Sprintf("req-bench-%018d", next.Add(1))
						if _, err := m.eng.Admit(context.Background(), in); err != nil {
							b.Error(err)
							return
						}
						done.Add(1)
					}
				}()
			}
			wg.Wait()
			rates[n] += float64(done.Load()) / time.Since(start).Seconds() / float64(b.N)
			for _, m := range ms {
				m.eng.Close()
			}
		}
	}
	for _, n := range []int{1, 2, 3} {
		b.ReportMetric(rates[n], fmt.Sprintf("members=%d-admissions/s", n))
	}
	b.ReportMetric(rates[2]/rates[1], "2/1")
	b.ReportMetric(rates[3]/rates[1], "3/1")
}
