package tasks_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// BenchmarkClusterAdmit measures durable admissions (fsync on) with 1, 2
// and 3 engines sharing one PostgreSQL, the callers spread over them;
// tasks stay accepted so only admission is measured. Compare the
// sub-benchmarks' admissions/s: the ratio is what another instance adds.
func BenchmarkClusterAdmit(b *testing.B) {
	srv := pgharness.Start(b, pgharness.Options{Durable: true})
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			c := newTestClusterOn(b, srv)
			// Held tasks pile up: lift the capacity and the quotas, as
			// BenchmarkAdmit does.
			c.mutate = func(cfg *tasks.Config) {
				cfg.MaxActive = 1 << 30
				cfg.MaxActivePerPrincipal, cfg.MaxActivePerDomain, cfg.MaxRetainedBytes = -1, -1, -1
			}
			var ms []*member
			for i := range n {
				ms = append(ms, c.start(fmt.Sprintf("gw-%d", i), 0, true))
			}
			inv := c.inv("echo", `{}`)
			var next atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					in := inv
					in.RequestID = fmt.Sprintf("req-bench-%018d", i)
					if _, err := ms[int(i)%n].eng.Admit(context.Background(), in); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "admissions/s")
		})
	}
}

// BenchmarkClusterTakeover measures the takeover after a crash: one
// instance holds 20 running and 180 accepted tasks and dies (abandoned, as
// kill -9); takeover-ms is the time from its lease's expiry (read from the
// database) until every one of its tasks is settled on the survivors
// (interrupted, or dispatched once and completed).
func BenchmarkClusterTakeover(b *testing.B) {
	srv := pgharness.Start(b)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := newTestClusterOn(b, srv)
		a := c.start("gw-a", 20, false)
		b1 := c.start("gw-b", 0, false)
		c.start("gw-c", 0, false)
		ctx := context.Background()
		var ids, running []string
		for j := range 20 {
			acc, err := a.eng.Admit(ctx, c.inv("forecast.get", fmt.Sprintf(`{"city":"c%d"}`, j)))
			if err != nil {
				b.Fatal(err)
			}
			running = append(running, acc.TaskID)
		}
		<-waitExec(c.be, running)
		ids = append(ids, running...)
		for range 180 {
			acc, err := a.eng.Admit(ctx, c.inv("echo", `{}`))
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, acc.TaskID)
		}
		b.StartTimer()
		c.crash(a)
		var expires time.Time
		if err := b1.db.Pool.QueryRow(ctx, `SELECT expires FROM instances WHERE name = 'gw-a'`).Scan(&expires); err != nil {
			b.Fatal(err)
		}
		for {
			var open int
			if err := b1.db.Pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE id = ANY($1) AND result IS NULL`, ids).Scan(&open); err != nil {
				b.Fatal(err)
			}
			if open == 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		total += time.Since(expires)
		b.StopTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "takeover-ms")
}
