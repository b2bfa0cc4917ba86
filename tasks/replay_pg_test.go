package tasks_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// Two engines on one PostgreSQL database — two gateway instances — admit
// the same request at once: the database's unique replay key decides, so
// every admission answers with one and the same task and one row is
// stored.
func TestReplayAcrossEnginesOnPostgres(t *testing.T) {
	srv := pgharness.Start(t)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	m := weatherManifest(version)
	var engines []*tasks.Engine
	var first *pg.DB
	for range 2 {
		db, err := pg.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if first == nil {
			first = db
		}
		dir := taskstest.NewDirectory()
		dir.Add(m, true)
		exec := taskstest.New(tasks.Features{})
		eng, err := tasks.New(tasks.Config{
			Driver: pg.NewTasks(db), Directory: dir, Policy: taskstest.NewPolicy([2]string{alice, weather}),
			Backends: func(string) (tasks.Backend, bool) { return exec, true },
			Clock:    clock.Real{}, MaxActive: 1 << 20,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		tasks.HoldDispatch(eng, true)
		engines = append(engines, eng)
	}
	for round := range 20 {
		reqID := ids.New("req-")
		const n = 8
		got := make([]tasks.Accepted, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[i], errs[i] = engines[i%2].Admit(ctx, tasks.Invocation{
					Caller: alice, Route: aliceRoute, Endpoint: weather, RequestID: reqID,
					Tool: "forecast.get", APIVersion: version, ManifestHash: m.Hash,
					Arguments: []byte(`{"city":"Riga"}`), MediaType: "application/json",
				})
			}()
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d admission %d: %v", round, i, errs[i])
			}
			if got[i].TaskID != got[0].TaskID {
				t.Fatalf("round %d: tasks %s and %s for one request", round, got[0].TaskID, got[i].TaskID)
			}
		}
		var rows int
		if err := first.Pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE request_id = $1`, reqID).Scan(&rows); err != nil || rows != 1 {
			t.Fatalf("round %d: %d rows, %v", round, rows, err)
		}
	}
}
