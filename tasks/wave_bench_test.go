package tasks_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// waveNotifier timestamps each event as the engine hands it over.
type waveNotifier struct {
	mu sync.Mutex
	at map[revKey]time.Time
}

type revKey struct {
	task string
	rev  int64
}

func (n *waveNotifier) Notify(ev tasks.Event) {
	now := time.Now()
	n.mu.Lock()
	n.at[revKey{ev.TaskID, ev.Revision}] = now
	n.mu.Unlock()
}

// BenchmarkProgressWave is the engine's part of BenchmarkConcurrentTasks1000
// (e2e/bench) without XMPP: 1,000 running tasks report progress
// at the same instant, five times 200 ms apart, then complete. It reports
// the Run call's latency (the commit) and the time from the report to the
// notifier's receipt of the committed event, p50 and p99.
func BenchmarkProgressWave(b *testing.B) {
	const (
		nTasks   = 1000
		progress = 5
		interval = 200 * time.Millisecond
	)
	for range b.N {
		db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "wave.db"))
		if err != nil {
			b.Fatal(err)
		}
		var (
			marksMu sync.Mutex
			marks   = map[revKey]time.Time{}
			commits []time.Duration
			running atomic.Int64
			gate    = make(chan struct{})
		)
		report := func(task string, call func() (int64, error)) error {
			t := time.Now()
			rev, err := call()
			d := time.Since(t)
			marksMu.Lock()
			marks[revKey{task, rev}] = t
			commits = append(commits, d)
			marksMu.Unlock()
			return err
		}
		steps := []taskstest.Step{{Do: func(context.Context, tasks.Call, tasks.Run) error {
			running.Add(1)
			return nil
		}}, {Gate: gate}}
		for k := 1; k <= progress; k++ {
			steps = append(steps, taskstest.Step{Do: func(ctx context.Context, call tasks.Call, run tasks.Run) error {
				select {
				case <-time.After(interval):
				case <-ctx.Done():
					return ctx.Err()
				}
				// Revision 1 is running; progress k is revision 1+k.
				return report(call.TaskID, func() (int64, error) {
					return int64(1 + k), run.Progress(tasks.Progress{Percent: taskstest.Percent(float64(100 * k / (progress + 1))), Message: fmt.Sprintf("step %d", k)})
				})
			}})
		}
		steps = append(steps, taskstest.Step{Do: func(_ context.Context, call tasks.Call, run tasks.Run) error {
			return report(call.TaskID, func() (int64, error) { return progress + 2, run.Complete(*taskstest.Text("done")) })
		}})
		x := taskstest.New(tasks.Features{Progress: true, Cancel: true})
		x.Script("echo", steps...)
		dir := taskstest.NewDirectory()
		m := weatherManifest(version)
		dir.Add(m, true)
		notif := &waveNotifier{at: map[revKey]time.Time{}}
		eng, err := tasks.New(tasks.Config{
			Driver: sqlite.NewTasks(db), Directory: dir, Policy: taskstest.NewPolicy([2]string{alice, weather}),
			Backends: func(string) (tasks.Backend, bool) { return x, true },
			Clock:    clock.Real{}, Notifier: notif,
			MaxActive: 1 << 30, MaxActivePerPrincipal: 1 << 30, MaxActivePerDomain: 1 << 30,
			MaxRetainedBytes: 1 << 62, MaxRunningPerBackend: 1 << 30,
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		var ids_ []string
		for range nTasks {
			acc, err := eng.Admit(context.Background(), tasks.Invocation{
				Caller: alice, Route: aliceRoute, Endpoint: weather, RequestID: ids.New("req-"),
				Tool: "echo", APIVersion: version, ManifestHash: m.Hash,
				Arguments: []byte(`{}`), MediaType: "application/json",
			})
			if err != nil {
				b.Fatal(err)
			}
			ids_ = append(ids_, acc.TaskID)
		}
		for running.Load() < nTasks {
			time.Sleep(5 * time.Millisecond)
		}
		b.ResetTimer()
		close(gate)
		want := nTasks * (progress + 1)
		for {
			marksMu.Lock()
			notif.mu.Lock()
			n := 0
			for k := range marks {
				if _, ok := notif.at[k]; ok {
					n++
				}
			}
			notif.mu.Unlock()
			marksMu.Unlock()
			if n >= want {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.StopTimer()
		var lags []time.Duration
		marksMu.Lock()
		notif.mu.Lock()
		for k, t := range marks {
			lags = append(lags, notif.at[k].Sub(t))
		}
		notif.mu.Unlock()
		marksMu.Unlock()
		slices.Sort(lags)
		slices.Sort(commits)
		q := func(s []time.Duration, p float64) float64 {
			return float64(s[min(len(s)-1, int(float64(len(s))*p))].Microseconds()) / 1000
		}
		b.ReportMetric(q(commits, 0.5), "commit-p50-ms")
		b.ReportMetric(q(commits, 0.99), "commit-p99-ms")
		b.ReportMetric(q(lags, 0.5), "notify-p50-ms")
		b.ReportMetric(q(lags, 0.99), "notify-p99-ms")
		if c, o := tasks.CommitStats(eng); c > 0 {
			b.ReportMetric(float64(o)/float64(c), "ops/commit")
		}
		eng.Close()
		db.Close()
	}
}
