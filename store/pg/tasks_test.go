package pg_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

var taskNow = time.Date(2026, 7, 27, 19, 14, 1, 0, time.UTC)

func openTasks(t *testing.T, dsn string) (*pg.DB, *pg.Tasks) {
	t.Helper()
	db := pgharness.Open(t, dsn)
	return db, pg.NewTasks(db)
}

func newTask() *taskdb.Task {
	return &taskdb.Task{
		ID: ids.New("task-"), Caller: "a@x.test", Route: "a@x.test/r", Endpoint: "w@agents.x.test",
		RequestID: ids.New("req-"), Tool: "t", APIVersion: "1", ManifestHash: "h",
		Arguments: []byte(`{}`), Fingerprint: bytes.Repeat([]byte{1}, 32),
		State: agentproto.StateAccepted, Created: taskNow, Updated: taskNow, RetainUntil: taskNow.Add(time.Hour), PurgeAfter: taskNow.Add(2 * time.Hour),
	}
}

func TestTasksConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseTasks(t, func(t *testing.T) taskdb.Driver {
		_, d := openTasks(t, srv.NewDatabase(t))
		return d
	})
}

// The schema itself refuses what the engine must never do, also for a
// writer that bypasses the driver (the same list as store/sqlite's).
func TestTasksSchemaInvariants(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	db, d := openTasks(t, srv.NewDatabase(t))
	ctx := context.Background()
	task := newTask()
	tx, _ := d.Begin(ctx)
	if ok, err := tx.InsertTask(task); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"unknown state":        `UPDATE tasks SET state = 'paused', revision = 1 WHERE id = $1`,
		"revision skip":        `UPDATE tasks SET state = 'running', revision = 2 WHERE id = $1`,
		"revision unchanged":   `UPDATE tasks SET state = 'running' WHERE id = $1`,
		"terminal no result":   `UPDATE tasks SET state = 'completed', revision = 1 WHERE id = $1`,
		"input without id":     `UPDATE tasks SET state = 'input_required', revision = 1 WHERE id = $1`,
		"accepted at rev 1":    `UPDATE tasks SET revision = 1 WHERE id = $1`,
		"identity change":      `UPDATE tasks SET caller = 'b@x.test', state = 'running', revision = 1 WHERE id = $1`,
		"depth change":         `UPDATE tasks SET delegation_depth = 3, state = 'running', revision = 1 WHERE id = $1`,
		"event at wrong rev":   `INSERT INTO task_events (task_id, revision, event_id, type, payload, created_ns) VALUES ($1, 1, 'evt-aaaaaaaaaaaaaaaaaaaaaa', 'status', '\x7b7d', 0)`,
		"bad event type":       `INSERT INTO task_events (task_id, revision, event_id, type, payload, created_ns) VALUES ($1, 0, 'evt-aaaaaaaaaaaaaaaaaaaaaa', 'other', '\x7b7d', 0)`,
		"bad fingerprint size": `UPDATE tasks SET fingerprint = '\x01', state = 'running', revision = 1 WHERE id = $1`,
	}
	for name, q := range bad {
		if _, err := db.Pool.Exec(ctx, q, task.ID); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, q := range []string{
		`UPDATE tasks SET state = 'running', revision = 1 WHERE id = $1`,
		`UPDATE tasks SET state = 'completed', revision = 2, result = '\x7b7d' WHERE id = $1`,
	} {
		if _, err := db.Pool.Exec(ctx, q, task.ID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, q := range []string{
		`UPDATE tasks SET state = 'failed', revision = 3 WHERE id = $1`,
		`UPDATE tasks SET result = '\x5b5d', revision = 3 WHERE id = $1`,
	} {
		if _, err := db.Pool.Exec(ctx, q, task.ID); err == nil || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("terminal changed: %v", err)
		}
	}
	t2 := newTask()
	tx, _ = d.Begin(ctx)
	tx.InsertTask(t2)
	tx.Commit()
	if _, err := db.Pool.Exec(ctx, `UPDATE tasks SET state = 'running', revision = 1 WHERE id = $1`, t2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE tasks SET state = 'accepted', revision = 2 WHERE id = $1`, t2.ID); err == nil {
		t.Error("running -> accepted allowed")
	}
	first := ids.New("input-")
	if _, err := db.Pool.Exec(ctx, `INSERT INTO task_inputs (task_id, request_id, status, request, created_revision)
		VALUES ($1, $2, 'expired', '\x7b7d', 1)`, t2.ID, first); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE task_inputs SET status = 'pending' WHERE request_id = $1`, first); err == nil {
		t.Error("final disposition changed")
	}
}

// Replay is decided by the database: the same request admitted at once
// through separate connections (separate gateway instances) stores one
// task, and every admission that lost the race reads the winner's record
// in its own transaction.
func TestTasksConcurrentReplayOneTask(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	dsn := srv.NewDatabase(t)
	dbA, a := openTasks(t, dsn)
	_, b := openTasks(t, dsn)
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		reqID := ids.New("req-")
		const n = 8
		var wg sync.WaitGroup
		got := make([]string, n)
		inserted := make([]bool, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			d := a
			if i%2 == 1 {
				d = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = func() error {
					tx, err := d.Begin(ctx)
					if err != nil {
						return err
					}
					defer tx.Rollback()
					task := newTask()
					task.RequestID = reqID
					ok, err := tx.InsertTask(task)
					if err != nil {
						return err
					}
					inserted[i] = ok
					prev, err := tx.TaskByRequest(task.Caller, task.Endpoint, reqID)
					if err != nil {
						return err
					}
					if prev == nil {
						return fmt.Errorf("no record after insert (inserted=%v)", ok)
					}
					got[i] = prev.ID
					return tx.Commit()
				}()
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d admission %d: %v", round, i, errs[i])
			}
			if inserted[i] {
				wins++
			}
			if got[i] != got[0] {
				t.Fatalf("round %d: admissions saw tasks %q and %q", round, got[0], got[i])
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d inserts won, want 1", round, wins)
		}
		var count int
		if err := dbA.Pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE request_id = $1`, reqID).Scan(&count); err != nil || count != 1 {
			t.Fatalf("round %d: %d rows, %v", round, count, err)
		}
	}
}

// A compare-and-set from another connection that read the same revision
// loses after the first commits: PostgreSQL re-checks the guard on the
// latest row version.
func TestTasksConcurrentUpdateOneWinner(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	dsn := srv.NewDatabase(t)
	_, a := openTasks(t, dsn)
	_, b := openTasks(t, dsn)
	ctx := context.Background()
	task := newTask()
	tx, _ := a.Begin(ctx)
	tx.InsertTask(task)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	next := *task
	next.State, next.Revision, next.Dispatched = agentproto.StateRunning, 1, true
	ta, _ := a.Begin(ctx)
	if ok, err := ta.UpdateTask(&next, 0, agentproto.StateAccepted); !ok || err != nil {
		t.Fatal(ok, err)
	}
	done := make(chan bool)
	go func() {
		tb, _ := b.Begin(ctx)
		defer tb.Rollback()
		c := *task
		c.State, c.Revision, c.CancelKey, c.CancelRev = agentproto.StateCancelling, 1, bytes.Repeat([]byte{3}, 32), 1
		ok, err := tb.UpdateTask(&c, 0, agentproto.StateAccepted, agentproto.StateRunning)
		if err != nil {
			t.Error(err)
		}
		done <- ok
	}()
	time.Sleep(50 * time.Millisecond) // let b block on a's row lock (either order is checked below)
	if err := ta.Commit(); err != nil {
		t.Fatal(err)
	}
	if <-done {
		t.Fatal("a stale compare-and-set succeeded")
	}
	got, _ := a.Task(ctx, task.ID)
	if got.State != agentproto.StateRunning || got.Revision != 1 {
		t.Fatalf("task = %s@%d", got.State, got.Revision)
	}
}

func TestTasksClusterConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseTaskCluster(t, func(t *testing.T, n int) ([]storetest.TaskClusterDriver, bool) {
		dsn := srv.NewDatabase(t)
		hs := make([]storetest.TaskClusterDriver, n)
		for i := range hs {
			_, hs[i] = openTasks(t, dsn)
		}
		return hs, true
	})
}

// A transaction that an unrecovered statement error aborted does not
// commit: PostgreSQL answers its COMMIT with ROLLBACK, and the driver
// reports that as a failed commit instead of success. The connection goes
// back to the pool clean.
func TestTasksCommitOfAbortedTransactionFails(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	_, d := openTasks(t, srv.NewDatabase(t))
	ctx := context.Background()
	good, bad := newTask(), newTask()
	bad.Fingerprint = []byte{1} // refused by the schema
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := tx.InsertTask(good); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := tx.InsertTask(bad); err == nil {
		t.Fatal("a malformed task was inserted")
	}
	if err := tx.Commit(); err == nil || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("commit of an aborted transaction: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("rollback after the failed commit: %v", err)
	}
	if got, _ := d.Task(ctx, good.ID); got != nil {
		t.Fatal("a task of the aborted transaction is visible")
	}
	for range 10 { // every pooled connection is usable
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := tx.InsertTask(newTask()); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}
