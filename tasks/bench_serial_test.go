package tasks_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// doneNotifier signals each task's terminal event.
type doneNotifier struct {
	mu   sync.Mutex
	wait map[string]chan struct{}
}

func (n *doneNotifier) expect(id string) chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch, ok := n.wait[id]
	if !ok {
		ch = make(chan struct{})
		n.wait[id] = ch
	}
	return ch
}

func (n *doneNotifier) Notify(ev tasks.Event) {
	if ev.Type == agentproto.EventCompleted || ev.Type == agentproto.EventFailed {
		close(n.expect(ev.TaskID))
	}
}

// BenchmarkAdmitEchoSerial is one caller's echo call inside the engine, on
// SQLite with synchronous=FULL on disk: Admit, then wait for the completed
// event, one call at a time. Every commit is on the call's path here, so
// "commits/call" and the p50 show what the number of commits per call
// costs, without XMPP or a backend process.
func BenchmarkAdmitEchoSerial(b *testing.B) {
	db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	dir := taskstest.NewDirectory()
	m := weatherManifest(version)
	dir.Add(m, true)
	x := taskstest.New(tasks.Features{})
	not := &doneNotifier{wait: map[string]chan struct{}{}}
	eng, err := tasks.New(tasks.Config{
		Driver: sqlite.NewTasks(db), Directory: dir, Policy: taskstest.NewPolicy([2]string{alice, weather}),
		Backends: func(string) (tasks.Backend, bool) { return x, true },
		Notifier: not, Clock: clock.Real{},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	c0, _ := tasks.CommitStats(eng)
	lats := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		acc, err := eng.Admit(context.Background(), tasks.Invocation{
			Caller: alice, Route: aliceRoute, Endpoint: weather, RequestID: ids.New("req-"),
			Tool: "echo", APIVersion: version, ManifestHash: m.Hash,
			Arguments: []byte(`{"message":"hello"}`), MediaType: "application/json",
		})
		if err != nil {
			b.Fatal(err)
		}
		<-not.expect(acc.TaskID)
		lats = append(lats, time.Since(t))
	}
	b.StopTimer()
	c1, _ := tasks.CommitStats(eng)
	slices.Sort(lats)
	b.ReportMetric(float64(c1-c0)/float64(b.N), "commits/call")
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lats[min(len(lats)-1, len(lats)*99/100)].Microseconds())/1000, "p99-ms")
}
