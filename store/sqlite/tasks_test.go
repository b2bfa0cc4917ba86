package sqlite_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

var taskNow = time.Date(2026, 7, 27, 19, 14, 1, 0, time.UTC)

func openTasks(t *testing.T) (*sqlite.DB, *sqlite.Tasks) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, sqlite.NewTasks(db)
}

func newTask() *taskdb.Task {
	return &taskdb.Task{
		ID: ids.New("task-"), Caller: "a@x.test", Route: "a@x.test/r", Endpoint: "w@agents.x.test",
		RequestID: ids.New("req-"), Tool: "t", APIVersion: "1", ManifestHash: "h",
		Arguments: []byte(`{}`), Fingerprint: bytes.Repeat([]byte{1}, 32),
		Deadline: "2026-07-27T19:15:00.0000000001Z", DeadlineAt: taskNow.Add(time.Minute + 1),
		State: agentproto.StateAccepted, Created: taskNow, Updated: taskNow, RetainUntil: taskNow.Add(time.Hour), PurgeAfter: taskNow.Add(2 * time.Hour),
	}
}

// write runs f in one transaction and commits it.
func writeTask(t *testing.T, d *sqlite.Tasks, f func(tx taskdb.Tx) error) error {
	t.Helper()
	tx, err := d.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func TestTasksRoundTripAndGuards(t *testing.T) {
	_, d := openTasks(t)
	task := newTask()
	if err := writeTask(t, d, func(tx taskdb.Tx) error {
		ok, err := tx.InsertTask(task)
		if !ok || err != nil {
			t.Fatalf("insert: %v %v", ok, err)
		}
		dup := newTask()
		dup.RequestID = task.RequestID
		ok, err = tx.InsertTask(dup) // same (caller, endpoint, request)
		if ok || err != nil {
			t.Fatalf("duplicate request inserted: %v %v", ok, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := d.Task(context.Background(), task.ID)
	if err != nil || got == nil {
		t.Fatal(err)
	}
	if got.Deadline != task.Deadline || !got.DeadlineAt.Equal(task.DeadlineAt) || !got.Created.Equal(taskNow) ||
		!bytes.Equal(got.Fingerprint, task.Fingerprint) || got.State != agentproto.StateAccepted {
		t.Fatalf("round trip %+v", got)
	}
	byReq, _ := d.TaskByRequest(context.Background(), task.Caller, task.Endpoint, task.RequestID)
	if byReq == nil || byReq.ID != task.ID {
		t.Fatal("lookup by request")
	}
	// A guard on a stale revision or state updates nothing.
	next := *got
	next.State, next.Revision, next.Dispatched = agentproto.StateRunning, 1, true
	if err := writeTask(t, d, func(tx taskdb.Tx) error {
		if ok, err := tx.UpdateTask(&next, 5, agentproto.StateAccepted); ok || err != nil {
			t.Fatalf("stale revision updated: %v %v", ok, err)
		}
		if ok, err := tx.UpdateTask(&next, 0, agentproto.StateRunning); ok || err != nil {
			t.Fatalf("wrong state updated: %v %v", ok, err)
		}
		if ok, err := tx.UpdateTask(&next, 0, agentproto.StateAccepted); !ok || err != nil {
			t.Fatalf("update: %v %v", ok, err)
		}
		return tx.AppendEvent(&taskdb.Event{TaskID: task.ID, Revision: 1, EventID: ids.New("evt-"), Type: "status", Payload: []byte(`{}`), Created: taskNow})
	}); err != nil {
		t.Fatal(err)
	}
}

// The schema itself refuses what the engine must never do.
func TestTasksSchemaInvariants(t *testing.T) {
	db, d := openTasks(t)
	task := newTask()
	if err := writeTask(t, d, func(tx taskdb.Tx) error { _, err := tx.InsertTask(task); return err }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bad := map[string]string{
		"unknown state":        `UPDATE tasks SET state = 'paused', revision = 1 WHERE id = ?`,
		"revision skip":        `UPDATE tasks SET state = 'running', revision = 2 WHERE id = ?`,
		"revision unchanged":   `UPDATE tasks SET state = 'running' WHERE id = ?`,
		"terminal no result":   `UPDATE tasks SET state = 'completed', revision = 1 WHERE id = ?`,
		"input without id":     `UPDATE tasks SET state = 'input_required', revision = 1 WHERE id = ?`,
		"accepted at rev 1":    `UPDATE tasks SET revision = 1 WHERE id = ?`,
		"identity change":      `UPDATE tasks SET caller = 'b@x.test', state = 'running', revision = 1 WHERE id = ?`,
		"event at wrong rev":   `INSERT INTO task_events (task_id, revision, event_id, type, payload, created_ns) VALUES (?, 1, 'evt-aaaaaaaaaaaaaaaaaaaaaa', 'status', x'7b7d', 0)`,
		"bad event type":       `INSERT INTO task_events (task_id, revision, event_id, type, payload, created_ns) VALUES (?, 0, 'evt-aaaaaaaaaaaaaaaaaaaaaa', 'other', x'7b7d', 0)`,
		"bad fingerprint size": `UPDATE tasks SET fingerprint = x'01', state = 'running', revision = 1 WHERE id = ?`,
	}
	for name, q := range bad {
		if _, err := db.Write.ExecContext(ctx, q, task.ID); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Walk to a terminal state legally, then try to leave it.
	steps := []string{
		`UPDATE tasks SET state = 'running', revision = 1 WHERE id = ?`,
		`UPDATE tasks SET state = 'completed', revision = 2, result = x'7b7d' WHERE id = ?`,
	}
	for _, q := range steps {
		if _, err := db.Write.ExecContext(ctx, q, task.ID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, q := range []string{
		`UPDATE tasks SET state = 'failed', revision = 3 WHERE id = ?`,
		`UPDATE tasks SET result = x'5b5d', revision = 3 WHERE id = ?`,
	} {
		if _, err := db.Write.ExecContext(ctx, q, task.ID); err == nil || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("terminal changed: %v", err)
		}
	}
	// running -> accepted is not a transition.
	t2 := newTask()
	writeTask(t, d, func(tx taskdb.Tx) error { _, err := tx.InsertTask(t2); return err })
	db.Write.ExecContext(ctx, `UPDATE tasks SET state = 'running', revision = 1 WHERE id = ?`, t2.ID)
	if _, err := db.Write.ExecContext(ctx, `UPDATE tasks SET state = 'accepted', revision = 2 WHERE id = ?`, t2.ID); err == nil {
		t.Error("running -> accepted allowed")
	}
	// One pending input per task; dispositions are final.
	in := func(id string) error {
		return writeTask(t, d, func(tx taskdb.Tx) error {
			return tx.InsertInput(&taskdb.Input{TaskID: t2.ID, RequestID: id, Status: taskdb.InputPending, Request: []byte(`{}`), CreatedRev: 2})
		})
	}
	first := ids.New("input-")
	if err := in(first); err != nil {
		t.Fatal(err)
	}
	if err := in(ids.New("input-")); err == nil {
		t.Error("second pending input accepted")
	}
	writeTask(t, d, func(tx taskdb.Tx) error {
		ok, err := tx.SetInputStatus(t2.ID, first, taskdb.InputExpired, nil, 0)
		if !ok || err != nil {
			t.Fatalf("expire: %v %v", ok, err)
		}
		ok, err = tx.SetInputStatus(t2.ID, first, taskdb.InputAnswered, bytes.Repeat([]byte{2}, 32), 3)
		if ok || err != nil {
			t.Fatalf("expired input answered: %v %v", ok, err)
		}
		return nil
	})
	if _, err := db.Write.ExecContext(ctx, `UPDATE task_inputs SET status = 'pending' WHERE request_id = ?`, first); err == nil {
		t.Error("final disposition changed")
	}
}

func TestTasksPurgeCascades(t *testing.T) {
	db, d := openTasks(t)
	task := newTask()
	writeTask(t, d, func(tx taskdb.Tx) error {
		tx.InsertTask(task)
		n := *task
		n.State, n.Revision, n.Result, n.Updated = agentproto.StateFailed, 1, []byte(`{}`), taskNow
		if ok, err := tx.UpdateTask(&n, 0, agentproto.StateAccepted); !ok || err != nil {
			t.Fatalf("settle: %v %v", ok, err)
		}
		return tx.AppendEvent(&taskdb.Event{TaskID: task.ID, Revision: 1, EventID: ids.New("evt-"), Type: "failed", Payload: []byte(`{}`), Created: taskNow})
	})
	var purged int64
	writeTask(t, d, func(tx taskdb.Tx) error {
		var err error
		purged, err = tx.Purge(task.PurgeAfter.Add(-1))
		return err
	})
	if purged != 0 {
		t.Fatal("purged early")
	}
	writeTask(t, d, func(tx taskdb.Tx) error {
		var err error
		purged, err = tx.Purge(task.PurgeAfter)
		return err
	})
	var n int
	db.Read.QueryRow(`SELECT count(*) FROM task_events`).Scan(&n)
	if purged != 1 || n != 0 {
		t.Fatalf("purged %d, %d events left", purged, n)
	}
}

func TestTasksConformance(t *testing.T) {
	storetest.ExerciseTasks(t, func(t *testing.T) taskdb.Driver {
		_, d := openTasks(t)
		return d
	})
}

func TestTasksClusterConformance(t *testing.T) {
	storetest.ExerciseTaskCluster(t, func(t *testing.T, n int) ([]storetest.TaskClusterDriver, bool) {
		_, d := openTasks(t)
		hs := make([]storetest.TaskClusterDriver, n)
		for i := range hs {
			hs[i] = d
		}
		return hs, false
	})
}
