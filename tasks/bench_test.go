package tasks_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

type benchMode int

const (
	durable    benchMode = iota // synchronous=FULL on disk, tasks held accepted
	durableRun                  // the same, and every task dispatched and completed
	noSync                      // synchronous=OFF on tmpfs: SQLite work without durability
	noPersist                   // validation only, no store write at all
)

// BenchmarkAdmit measures durable admissions (task row and replay record
// committed with synchronous=FULL on disk before Admit returns) from many
// concurrent callers. Admitted tasks stay accepted, so only admission is
// measured. Reports admissions/s and latency percentiles.
func BenchmarkAdmit(b *testing.B) { benchAdmit(b, durable) }

// BenchmarkAdmitAndRun is BenchmarkAdmit with every task also dispatched
// (running, one revision) and completed (one more) through the same writer.
func BenchmarkAdmitAndRun(b *testing.B) { benchAdmit(b, durableRun) }

// BenchmarkAdmitNoSync is the no-durability baseline: the same engine and
// SQL on a tmpfs file with synchronous=OFF, so no fsync at all.
func BenchmarkAdmitNoSync(b *testing.B) { benchAdmit(b, noSync) }

// BenchmarkAdmitNoPersist is the no-persistence baseline: the same
// validation path (authorization, pinning, I-JSON canonicalization, schema
// validation, fingerprint, replay lookup) stopping right before the commit.
func BenchmarkAdmitNoPersist(b *testing.B) { benchAdmit(b, noPersist) }

func benchAdmit(b *testing.B, mode benchMode) {
	dirPath := b.TempDir()
	if mode == noSync {
		if d, err := os.MkdirTemp("/dev/shm", "tasksbench"); err == nil {
			dirPath = d
			defer os.RemoveAll(d)
		}
	}
	db, err := sqlite.Open(context.Background(), filepath.Join(dirPath, "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if mode == noSync {
		// The writer pool holds exactly one long-lived connection, so the
		// pragma sticks.
		if _, err := db.Write.Exec("PRAGMA synchronous=OFF"); err != nil {
			b.Fatal(err)
		}
	}
	dir := taskstest.NewDirectory()
	m := weatherManifest(version)
	dir.Add(m, true)
	exec := taskstest.New(tasks.Features{})
	exec.Script("forecast.get", taskstest.Step{Complete: &tasks.ToolResult{
		Content:           json.RawMessage(`[{"type":"text","text":"Light rain, 18 C"}]`),
		StructuredContent: json.RawMessage(`{"summary":"Light rain, 18 C"}`),
	}})
	eng, err := tasks.New(tasks.Config{
		Driver: sqlite.NewTasks(db), Directory: dir, Policy: taskstest.NewPolicy([2]string{alice, weather}),
		Backends:  func(string) (tasks.Backend, bool) { return exec, true },
		Clock:     clock.Real{},
		MaxActive: 1 << 30,
		// The per-caller quotas and the backend limit (issue 14) are lifted
		// like MaxActive, so the figure stays the admission cost alone.
		MaxActivePerPrincipal: 1 << 30, MaxActivePerDomain: 1 << 30,
		MaxRetainedBytes: 1 << 62, MaxRunningPerBackend: 1 << 30,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	tasks.SetNoPersist(eng, mode == noPersist)
	tasks.HoldDispatch(eng, mode != durableRun)

	var (
		mu   sync.Mutex
		lats []time.Duration
	)
	b.SetParallelism(64) // 64 × GOMAXPROCS concurrent callers
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			inv := tasks.Invocation{
				Caller: alice, Route: aliceRoute, Endpoint: weather, RequestID: ids.New("req-"),
				Tool: "forecast.get", APIVersion: version, ManifestHash: m.Hash,
				Arguments: []byte(`{"city":"Riga"}`), MediaType: "application/json",
			}
			t := time.Now()
			if _, err := eng.Admit(context.Background(), inv); err != nil {
				b.Error(err)
				return
			}
			local = append(local, time.Since(t))
		}
		mu.Lock()
		lats = append(lats, local...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	pct := func(p float64) float64 {
		return float64(lats[min(len(lats)-1, int(float64(len(lats))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(lats))/elapsed.Seconds(), "admissions/s")
	if commits, ops := tasks.CommitStats(eng); commits > 0 && mode != noPersist {
		b.ReportMetric(float64(ops)/float64(commits), "ops/commit")
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
