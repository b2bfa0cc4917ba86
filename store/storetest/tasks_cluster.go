package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// ClusterDriver is a task driver with the cluster contract.
type TaskClusterDriver interface {
	taskdb.Driver
	taskdb.Cluster
}

// OpenCluster returns n handles (separate connections, as separate
// instances have) on one fresh, migrated store. Shared is false for a
// single-instance driver, which returns one handle n times and runs only
// the checks that hold for one instance.
type OpenTaskCluster func(t *testing.T, n int) (handles []TaskClusterDriver, shared bool)

// ExerciseCluster runs the taskdb.Cluster checks.
func ExerciseTaskCluster(t *testing.T, open OpenTaskCluster) {
	t.Run("JoinRenewOwned", func(t *testing.T) { testJoinOwned(t, open) })
	t.Run("TakeOverGuarded", func(t *testing.T) { testTakeOver(t, open) })
	t.Run("TakeOverOnce", func(t *testing.T) { testTakeOverRace(t, open) })
}

func owned(task *taskdb.Task, owner string) *taskdb.Task {
	task.Owner = owner
	return task
}

func taskIDs(ts []taskdb.Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	slices.Sort(out)
	return out
}

func testJoinOwned(t *testing.T, open OpenTaskCluster) {
	hs, shared := open(t, 2)
	a := hs[0]
	if err := a.Join(taskCtx, "gw-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Renew(taskCtx, "gw-1", time.Minute); err != nil || !ok {
		t.Fatalf("Renew of a live lease: %v %v", ok, err)
	}
	t1, t2, done := owned(newTask(), "gw-1"), owned(newTask(), "gw-1"), owned(newTask(), "gw-1")
	done.State, done.Result, done.Revision = agentproto.StateCompleted, []byte(`{}`), 1
	write(t, a, func(tx taskdb.Tx) { insert(t, tx, t1); insert(t, tx, t2); insert(t, tx, done) })
	got, err := a.Owned(taskCtx, "gw-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := taskIDs([]taskdb.Task{*t1, *t2}); !slices.Equal(taskIDs(got), want) {
		t.Fatalf("Owned(gw-1) = %v, want %v", taskIDs(got), want)
	}
	insts, err := hs[1].Instances(taskCtx)
	if err != nil || len(insts) < 1 {
		t.Fatalf("Instances: %+v %v", insts, err)
	}
	i := slices.IndexFunc(insts, func(in taskdb.Instance) bool { return in.Name == "gw-1" })
	if i < 0 || !insts[i].Live || !insts[i].Expires.After(time.Now().Add(30*time.Second)) {
		t.Fatalf("gw-1 not listed live: %+v", insts)
	}
	if !shared {
		return
	}
	if insts[i].Unsettled != 2 {
		t.Fatalf("gw-1 Unsettled = %d, want 2", insts[i].Unsettled)
	}
	if read(t, hs[1], t1.ID).Owner != "gw-1" {
		t.Fatal("Owner not stored")
	}
	if other, err := a.Owned(taskCtx, "gw-2"); err != nil || len(other) != 0 {
		t.Fatalf("Owned(gw-2) = %v %v", taskIDs(other), err)
	}
	// A task stored without an owner is adopted by the next Join.
	orphan := newTask()
	write(t, a, func(tx taskdb.Tx) { insert(t, tx, orphan) })
	if err := hs[1].Join(taskCtx, "gw-2", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := read(t, a, orphan.ID); got.Owner != "gw-2" {
		t.Fatalf("an ownerless task after Join is owned by %q", got.Owner)
	}
	if err := a.Leave(taskCtx, "gw-1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Renew(taskCtx, "gw-1", time.Minute); err != nil || ok {
		t.Fatalf("Renew after Leave: %v %v", ok, err)
	}
	if err := a.Join(taskCtx, "gw-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Renew(taskCtx, "gw-1", time.Minute); err != nil || !ok {
		t.Fatalf("Renew after rejoin: %v %v", ok, err)
	}
}

func testTakeOver(t *testing.T, open OpenTaskCluster) {
	hs, shared := open(t, 2)
	a, b := hs[0], hs[1]
	if err := a.Join(taskCtx, "gw-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	t1 := owned(newTask(), "gw-1")
	write(t, a, func(tx taskdb.Tx) { insert(t, tx, t1) })
	if moved, err := b.TakeOver(taskCtx, "gw-1", "gw-2"); err != nil || len(moved) != 0 {
		t.Fatalf("TakeOver of a live instance moved %v (%v)", taskIDs(moved), err)
	}
	if moved, err := b.TakeOver(taskCtx, "gw-unknown", "gw-2"); err != nil || len(moved) != 0 {
		t.Fatalf("TakeOver of an unknown instance moved %v (%v)", taskIDs(moved), err)
	}
	if !shared {
		return
	}
	// A short lease runs out.
	if err := a.Join(taskCtx, "gw-1", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if ok, err := a.Renew(taskCtx, "gw-1", time.Minute); err != nil || ok {
		t.Fatalf("Renew of an expired lease: %v %v", ok, err)
	}
	moved, err := b.TakeOver(taskCtx, "gw-1", "gw-2")
	if err != nil || len(moved) != 1 || moved[0].ID != t1.ID || moved[0].Owner != "gw-2" {
		t.Fatalf("TakeOver of an expired instance: %+v %v", moved, err)
	}
	if again, err := b.TakeOver(taskCtx, "gw-1", "gw-3"); err != nil || len(again) != 0 {
		t.Fatalf("second TakeOver moved %v (%v)", taskIDs(again), err)
	}
	// An update by the old owner's stale copy keeps the new owner.
	next := *t1
	next.State, next.Revision, next.Dispatched = agentproto.StateRunning, 1, true
	write(t, a, func(tx taskdb.Tx) { update(t, tx, &next, 0, agentproto.StateAccepted) })
	if got := read(t, a, t1.ID); got.Owner != "gw-2" || got.State != agentproto.StateRunning {
		t.Fatalf("after update: owner %q state %s", got.Owner, got.State)
	}
	if own, _ := b.Owned(taskCtx, "gw-2"); len(own) != 1 {
		t.Fatalf("Owned(gw-2) = %v", taskIDs(own))
	}
	// Tasks admitted by the dead instance after the takeover are taken
	// over by a later one; terminal ones never move.
	late, fin := owned(newTask(), "gw-1"), owned(newTask(), "gw-1")
	fin.State, fin.Result, fin.Revision = agentproto.StateFailed, []byte(`{}`), 1
	write(t, a, func(tx taskdb.Tx) { insert(t, tx, late); insert(t, tx, fin) })
	moved, err = b.TakeOver(taskCtx, "gw-1", "gw-3")
	if err != nil || len(moved) != 1 || moved[0].ID != late.ID {
		t.Fatalf("later TakeOver: %v %v", taskIDs(moved), err)
	}
	if read(t, a, fin.ID).Owner != "gw-1" {
		t.Fatal("a terminal task moved")
	}
}

func testTakeOverRace(t *testing.T, open OpenTaskCluster) {
	hs, shared := open(t, 3)
	if !shared {
		t.Skip("single-instance driver")
	}
	const n = 40
	if err := hs[0].Join(taskCtx, "gw-1", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var all []taskdb.Task
	write(t, hs[0], func(tx taskdb.Tx) {
		for range n {
			task := owned(newTask(), "gw-1")
			insert(t, tx, task)
			all = append(all, *task)
		}
	})
	time.Sleep(400 * time.Millisecond)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		moved []taskdb.Task
	)
	for i, h := range hs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := h.TakeOver(taskCtx, "gw-1", []string{"gw-2", "gw-3"}[i])
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			moved = append(moved, m...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if !slices.Equal(taskIDs(moved), taskIDs(all)) {
		t.Fatalf("two concurrent takeovers moved %d tasks (want each of %d exactly once)", len(moved), n)
	}
}
