// This file is the conformance suite of accdb.Driver: every ACC
// store driver (store/sqlite, store/pg) runs
// Exercise from its tests and must pass it unchanged.

package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/agentgw/agentgw/accbridge/accdb"
)

// Open returns two drivers on one fresh, migrated store, as the gateway and
// an operator command (`agentgw acc enroll|revoke`) hold it.
type OpenACC func(t *testing.T) (first, second accdb.Driver)

const fp = "0000000000000000000000000000000000000000000000000000000000000001"

// Exercise runs every check of the suite against drivers from open.
func ExerciseACC(t *testing.T, open OpenACC) {
	t.Run("EnrollAndRevoke", func(t *testing.T) { testEnroll(t, open) })
	t.Run("OneRunPerTask", func(t *testing.T) { testOneRun(t, open) })
	t.Run("RunStates", func(t *testing.T) { testRunStates(t, open) })
}

func testEnroll(t *testing.T, open OpenACC) {
	ctx := context.Background()
	a, b := open(t)
	if _, ok, err := a.Connector(ctx, "farm"); ok || err != nil {
		t.Fatalf("absent connector: ok %v err %v", ok, err)
	}
	c := accdb.Connector{Name: "farm", ID: "id-1", CertSHA256: fp, CreatedAt: "2026-01-01T00:00:00Z"}
	if err := a.Enroll(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := b.Enroll(ctx, c); !errors.Is(err, accdb.ErrExists) {
		t.Fatalf("second enroll of a name: %v, want ErrExists", err)
	}
	if err := b.Enroll(ctx, accdb.Connector{Name: "other", ID: "id-1", CertSHA256: fp, CreatedAt: c.CreatedAt}); !errors.Is(err, accdb.ErrExists) {
		t.Fatalf("second enroll of an id: %v, want ErrExists", err)
	}
	got, ok, err := b.ConnectorByID(ctx, "id-1")
	if err != nil || !ok || got != c {
		t.Fatalf("by id from the other handle: %+v %v %v", got, ok, err)
	}
	if ok, err := b.Revoke(ctx, "nobody", "2026-01-02T00:00:00Z"); ok || err != nil {
		t.Fatalf("revoke of an unknown name: %v %v", ok, err)
	}
	if ok, err := b.Revoke(ctx, "farm", "2026-01-02T00:00:00Z"); !ok || err != nil {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	b.Revoke(ctx, "farm", "2026-01-03T00:00:00Z")
	got, _, _ = a.Connector(ctx, "farm")
	if !got.Revoked() || got.RevokedAt != "2026-01-02T00:00:00Z" {
		t.Fatalf("revoked at %q, want the first revocation", got.RevokedAt)
	}
	if err := a.Enroll(ctx, accdb.Connector{Name: "alpha", ID: "id-2", CertSHA256: fp, CreatedAt: c.CreatedAt}); err != nil {
		t.Fatal(err)
	}
	all, err := b.Connectors(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "alpha" || all[1].Name != "farm" {
		t.Fatalf("list: %+v %v", all, err)
	}
}

func testOneRun(t *testing.T, open OpenACC) {
	ctx := context.Background()
	a, b := open(t)
	// Many concurrent creators for one task: exactly one creates, and all
	// see the same run.
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	runs := map[string]bool{}
	for i := 0; i < 16; i++ {
		d := a
		if i%2 == 1 {
			d = b
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, c, err := d.CreateRun(ctx, accdb.Run{RunID: fmt.Sprintf("run-%d", i), TaskID: "task-1", ConnectorID: "id-1", AgentID: "ag"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if c {
				created++
			}
			runs[r.RunID] = true
		}(i)
	}
	wg.Wait()
	if created != 1 || len(runs) != 1 {
		t.Fatalf("created %d times, %d distinct runs; want 1 and 1", created, len(runs))
	}
	got, ok, err := b.RunByTask(ctx, "task-1")
	if err != nil || !ok || !runs[got.RunID] || got.State != accdb.RunCreated {
		t.Fatalf("run by task: %+v %v %v", got, ok, err)
	}
}

func testRunStates(t *testing.T, open OpenACC) {
	ctx := context.Background()
	a, b := open(t)
	for i, c := range []string{"id-1", "id-1", "id-2"} {
		if _, _, err := a.CreateRun(ctx, accdb.Run{RunID: fmt.Sprintf("r%d", i), TaskID: fmt.Sprintf("t%d", i), ConnectorID: c, AgentID: "ag"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SetRunState(ctx, "r0", accdb.RunAccepted); err != nil {
		t.Fatal(err)
	}
	if err := b.SetRunState(ctx, "r1", accdb.RunDone); err != nil {
		t.Fatal(err)
	}
	if err := b.SetRunState(ctx, "r1", accdb.RunOrphaned); err != nil {
		t.Fatal(err)
	}
	if err := b.SetRunState(ctx, "r1", "bogus"); err == nil {
		t.Fatal("unknown state accepted")
	}
	open1, err := a.OpenRuns(ctx, "id-1")
	if err != nil || len(open1) != 1 || open1[0].RunID != "r0" || open1[0].State != accdb.RunAccepted {
		t.Fatalf("open runs of id-1 (a done run must stay done): %+v %v", open1, err)
	}
	if err := a.SetRunState(ctx, "r0", accdb.RunOrphaned); err != nil {
		t.Fatal(err)
	}
	open1, _ = b.OpenRuns(ctx, "id-1")
	if len(open1) != 1 || open1[0].State != accdb.RunOrphaned {
		t.Fatalf("orphaned run: %+v", open1)
	}
}
