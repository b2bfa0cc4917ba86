package tasks_test

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// BenchmarkAdmitPostgresVsSQLite measures durable admissions with each
// store driver in the same run: b.N admissions through the engine on
// store/sqlite (synchronous=FULL on disk) and b.N on store/pg against a
// private PostgreSQL with fsync on (the harness's durable mode), from
// 64 × GOMAXPROCS concurrent callers each, tasks held accepted as in
// BenchmarkAdmit. It reports both rates, the ratio postgres/sqlite and
// each driver's operations per group commit.
func BenchmarkAdmitPostgresVsSQLite(b *testing.B) {
	srv := pgharness.Start(b, pgharness.Options{Durable: true})
	dsn := srv.NewDatabase(b)
	sq, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer sq.Close()
	pdb, err := pg.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pdb.Close()
	b.ResetTimer()
	sqRate, sqOps := admitRate(b, sqlite.NewTasks(sq), b.N)
	pgRate, pgOps := admitRate(b, pg.NewTasks(pdb), b.N)
	b.StopTimer()
	b.ReportMetric(sqRate, "sqlite-admissions/s")
	b.ReportMetric(pgRate, "postgres-admissions/s")
	b.ReportMetric(pgRate/sqRate, "postgres/sqlite")
	b.ReportMetric(sqOps, "sqlite-ops/commit")
	b.ReportMetric(pgOps, "postgres-ops/commit")
}

// admitRate admits n tasks through an engine on d and returns admissions
// per second and operations per group commit.
func admitRate(b *testing.B, d taskdb.Driver, n int) (rate, opsPerCommit float64) {
	dir := taskstest.NewDirectory()
	m := weatherManifest(version)
	dir.Add(m, true)
	exec := taskstest.New(tasks.Features{})
	eng, err := tasks.New(tasks.Config{
		Driver: d, Directory: dir, Policy: taskstest.NewPolicy([2]string{alice, weather}),
		Backends:  func(string) (tasks.Backend, bool) { return exec, true },
		Clock:     clock.Real{},
		MaxActive: 1 << 30, MaxActivePerPrincipal: 1 << 30, MaxActivePerDomain: 1 << 30,
		MaxRetainedBytes: 1 << 62, MaxRunningPerBackend: 1 << 30,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	tasks.HoldDispatch(eng, true)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range 64 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				inv := tasks.Invocation{
					Caller: alice, Route: aliceRoute, Endpoint: weather, RequestID: ids.New("req-"),
					Tool: "forecast.get", APIVersion: version, ManifestHash: m.Hash,
					Arguments: []byte(`{"city":"Riga"}`), MediaType: "application/json",
				}
				if _, err := eng.Admit(context.Background(), inv); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	commits, ops := tasks.CommitStats(eng)
	if commits > 0 {
		opsPerCommit = float64(ops) / float64(commits)
	}
	return float64(n) / elapsed.Seconds(), opsPerCommit
}
