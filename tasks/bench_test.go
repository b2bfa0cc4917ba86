package tasks_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/internal/store"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// BenchmarkAdmit measures durable admissions (task row + replay record
// committed with synchronous=FULL before Admit returns) from many
// concurrent callers, with dispatch and completion of every admitted task
// sharing the same writer. Reports admissions/s and latency percentiles.
func BenchmarkAdmit(b *testing.B) { benchAdmit(b, false) }

// BenchmarkAdmitNoPersist is the baseline: the same validation path
// (authorization, pinning, I-JSON canonicalization, schema validation,
// fingerprint, replay lookup) stopping right before the commit.
func BenchmarkAdmitNoPersist(b *testing.B) { benchAdmit(b, true) }

func benchAdmit(b *testing.B, noPersist bool) {
	db, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	dir := taskstest.NewDirectory()
	m := weatherManifest(version)
	dir.Add(m, true)
	exec := taskstest.New(tasks.Features{})
	eng, err := tasks.New(tasks.Config{
		Store: db, Directory: dir, Policy: taskstest.NewPolicy([2]string{alice, weather}),
		Backends:  func(string) (tasks.Backend, bool) { return exec, true },
		Clock:     clock.Real{},
		MaxActive: 1 << 30,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	tasks.SetNoPersist(eng, noPersist)

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
	nb := tasks.InstrBatches.Load()
	if nb > 0 {
		b.Logf("batches %d ops %d avg %.1f; per batch begin %.2fms ops %.2fms commit %.2fms", nb, tasks.InstrOps.Load(), float64(tasks.InstrOps.Load())/float64(nb),
			float64(tasks.InstrBeginNS.Load())/float64(nb)/1e6, float64(tasks.InstrOpNS.Load())/float64(nb)/1e6, float64(tasks.InstrCommitNS.Load())/float64(nb)/1e6)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
