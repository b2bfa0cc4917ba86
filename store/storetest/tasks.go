// This file is the conformance suite of taskdb.Driver: every task
// driver (store/sqlite now, a PostgreSQL driver later) runs Exercise
// from its tests and must pass it unchanged.

package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// Open returns a driver on a fresh, empty, migrated store.
type OpenTasks func(t *testing.T) taskdb.Driver

// Exercise runs every check of the suite against drivers from open.
func ExerciseTasks(t *testing.T, open OpenTasks) {
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, open) })
	t.Run("InsertUnique", func(t *testing.T) { testInsertUnique(t, open) })
	t.Run("UpdateGuards", func(t *testing.T) { testUpdateGuards(t, open) })
	t.Run("TerminalImmutable", func(t *testing.T) { testTerminal(t, open) })
	t.Run("Events", func(t *testing.T) { testEvents(t, open) })
	t.Run("Inputs", func(t *testing.T) { testInputs(t, open) })
	t.Run("Savepoints", func(t *testing.T) { testSavepoints(t, open) })
	t.Run("Unsettled", func(t *testing.T) { testUnsettled(t, open) })
	t.Run("RetentionAndPurge", func(t *testing.T) { testTaskPurge(t, open) })
	t.Run("References", func(t *testing.T) { testReferences(t, open) })
	t.Run("AdmitAndStartInOneTx", func(t *testing.T) { testAdmitAndStart(t, open) })
	t.Run("BackendState", func(t *testing.T) { testBackendState(t, open) })
}

var (
	taskCtx = context.Background()
	t0      = time.Date(2026, 7, 27, 19, 14, 1, 123456789, time.UTC)
	seq     atomic.Int64
)

// id returns a unique identifier of the stored shape (22+ characters).
func id(prefix string) string {
	return fmt.Sprintf("%s%022d", prefix, seq.Add(1))
}

// newTask is an accepted task with every column set.
func newTask() *taskdb.Task {
	return &taskdb.Task{
		ID: id("task-"), Caller: "alice@example.test", Route: "alice@example.test/cli",
		Endpoint: "weather@agents.example.test", RequestID: id("req-"), Tool: "forecast.get",
		APIVersion: "1.4.0", ManifestHash: "sha-256:abc", Arguments: []byte(`{"city":"Paris"}`),
		Fingerprint: bytes.Repeat([]byte{1}, 32),
		Deadline:    "2026-07-27T19:15:00.0000000001Z", DeadlineAt: t0.Add(time.Minute),
		State: agentproto.StateAccepted, Created: t0, Updated: t0,
		RetainUntil: t0.Add(time.Hour), PurgeAfter: t0.Add(2 * time.Hour), DelegationDepth: 2,
	}
}

// write runs f in one transaction and commits it; f's error rolls back.
func write(t *testing.T, d taskdb.Driver, f func(tx taskdb.Tx)) {
	t.Helper()
	tx, err := d.Begin(taskCtx)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	f(tx)
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func insert(t *testing.T, tx taskdb.Tx, task *taskdb.Task) {
	t.Helper()
	if ok, err := tx.InsertTask(task); err != nil || !ok {
		t.Fatalf("InsertTask: %v %v", ok, err)
	}
}

func update(t *testing.T, tx taskdb.Tx, task *taskdb.Task, prev int64, from ...agentproto.State) {
	t.Helper()
	if ok, err := tx.UpdateTask(task, prev, from...); err != nil || !ok {
		t.Fatalf("UpdateTask to %s at %d: %v %v", task.State, task.Revision, ok, err)
	}
}

// refused runs f in its own operation (savepoint) and checks that it
// stored nothing: it reported !ok or an error.
func refused(t *testing.T, tx taskdb.Tx, what string, f func() (bool, error)) {
	t.Helper()
	if err := tx.Savepoint(); err != nil {
		t.Fatal(err)
	}
	ok, err := f()
	if ok && err == nil {
		t.Errorf("%s: accepted", what)
	}
	if err := tx.RollbackTo(); err != nil {
		t.Fatalf("%s: RollbackTo: %v", what, err)
	}
}

func read(t *testing.T, d taskdb.Driver, id string) *taskdb.Task {
	t.Helper()
	got, err := d.Task(taskCtx, id)
	if err != nil {
		t.Fatalf("Task(%s): %v", id, err)
	}
	return got
}

func sameTask(t *testing.T, got, want *taskdb.Task) {
	t.Helper()
	if got == nil {
		t.Fatalf("task %s missing", want.ID)
	}
	g, w := *got, *want
	for _, tm := range []struct {
		name string
		a, b time.Time
	}{{"DeadlineAt", g.DeadlineAt, w.DeadlineAt}, {"Created", g.Created, w.Created}, {"Updated", g.Updated, w.Updated},
		{"RetainUntil", g.RetainUntil, w.RetainUntil}, {"PurgeAfter", g.PurgeAfter, w.PurgeAfter}} {
		if !tm.a.Equal(tm.b) {
			t.Errorf("%s = %v, want %v", tm.name, tm.a, tm.b)
		}
	}
	g.DeadlineAt, g.Created, g.Updated, g.RetainUntil, g.PurgeAfter = w.DeadlineAt, w.Created, w.Updated, w.RetainUntil, w.PurgeAfter
	if g.ID != w.ID || g.Caller != w.Caller || g.Route != w.Route || g.Endpoint != w.Endpoint || g.RequestID != w.RequestID ||
		g.Tool != w.Tool || g.APIVersion != w.APIVersion || g.ManifestHash != w.ManifestHash ||
		!bytes.Equal(g.Arguments, w.Arguments) || !bytes.Equal(g.Fingerprint, w.Fingerprint) || g.Deadline != w.Deadline ||
		g.State != w.State || g.Revision != w.Revision || g.Dispatched != w.Dispatched || g.InputRequest != w.InputRequest ||
		!bytes.Equal(g.Result, w.Result) || !bytes.Equal(g.CancelKey, w.CancelKey) || g.CancelRev != w.CancelRev ||
		g.DelegationDepth != w.DelegationDepth {
		t.Errorf("task reads back as\n%+v\nwant\n%+v", *got, *want)
	}
}

func testRoundTrip(t *testing.T, open OpenTasks) {
	d := open(t)
	task := newTask()
	if got := read(t, d, task.ID); got != nil {
		t.Fatalf("a missing task reads %+v", got)
	}
	tx, err := d.Begin(taskCtx)
	if err != nil {
		t.Fatal(err)
	}
	insert(t, tx, task)
	// The transaction sees its own write; the read side only committed state.
	if got, err := tx.Task(task.ID); err != nil {
		t.Fatal(err)
	} else {
		sameTask(t, got, task)
	}
	if got, err := tx.TaskByRequest(task.Caller, task.Endpoint, task.RequestID); err != nil || got == nil || got.ID != task.ID {
		t.Fatalf("Tx.TaskByRequest = %v, %v", got, err)
	}
	if got := read(t, d, task.ID); got != nil {
		t.Error("an uncommitted task is visible to the read side")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	sameTask(t, read(t, d, task.ID), task)
	got, err := d.TaskByRequest(taskCtx, task.Caller, task.Endpoint, task.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	sameTask(t, got, task)
	for _, k := range [][3]string{{"bob@example.test", task.Endpoint, task.RequestID}, {task.Caller, "x@agents.example.test", task.RequestID}, {task.Caller, task.Endpoint, id("req-")}} {
		if got, err := d.TaskByRequest(taskCtx, k[0], k[1], k[2]); err != nil || got != nil {
			t.Errorf("TaskByRequest%q = %v, %v; want nil, nil", k, got, err)
		}
	}
	// A task without deadline or optional columns.
	bare := newTask()
	bare.Deadline, bare.DeadlineAt, bare.DelegationDepth = "", time.Time{}, 0
	write(t, d, func(tx taskdb.Tx) { insert(t, tx, bare) })
	if got := read(t, d, bare.ID); got == nil || got.Deadline != "" || !got.DeadlineAt.IsZero() || got.DelegationDepth != 0 || got.Result != nil || got.CancelKey != nil {
		t.Errorf("a task without a deadline reads %+v", got)
	}
	// TaskState without a pending input.
	st, in, err := d.TaskState(taskCtx, task.ID)
	if err != nil || st == nil || in != nil || st.ID != task.ID {
		t.Errorf("TaskState = %v, %v, %v", st, in, err)
	}
	if st, in, err := d.TaskState(taskCtx, id("task-")); err != nil || st != nil || in != nil {
		t.Errorf("TaskState of a missing task = %v, %v, %v", st, in, err)
	}
}

func testInsertUnique(t *testing.T, open OpenTasks) {
	d := open(t)
	task := newTask()
	write(t, d, func(tx taskdb.Tx) {
		insert(t, tx, task)
		// The replay key (caller, endpoint, request) is unique: a second
		// insert is not an error, it reports the existing record.
		dup := newTask()
		dup.RequestID = task.RequestID
		if ok, err := tx.InsertTask(dup); ok || err != nil {
			t.Errorf("a duplicate request key: %v %v; want false, nil", ok, err)
		}
		// The same request ID from another caller or at another endpoint
		// is another task.
		other := newTask()
		other.RequestID, other.Caller = task.RequestID, "bob@example.test"
		insert(t, tx, other)
		other2 := newTask()
		other2.RequestID, other2.Endpoint = task.RequestID, "news@agents.example.test"
		insert(t, tx, other2)
		// The task ID is unique too.
		sameID := newTask()
		sameID.ID = task.ID
		refused(t, tx, "a duplicate task ID", func() (bool, error) { return tx.InsertTask(sameID) })
		// The schema refuses malformed rows.
		for name, mut := range map[string]func(*taskdb.Task){
			"unknown state":       func(x *taskdb.Task) { x.State = "paused" },
			"accepted at rev 1":   func(x *taskdb.Task) { x.Revision = 1 },
			"short fingerprint":   func(x *taskdb.Task) { x.Fingerprint = []byte{1} },
			"negative depth":      func(x *taskdb.Task) { x.DelegationDepth = -1 },
			"short task ID":       func(x *taskdb.Task) { x.ID = "task-1" },
			"empty tool":          func(x *taskdb.Task) { x.Tool = "" },
			"result while active": func(x *taskdb.Task) { x.Result = []byte(`{}`) },
		} {
			bad := newTask()
			mut(bad)
			refused(t, tx, name, func() (bool, error) { return tx.InsertTask(bad) })
		}
	})
	if got := read(t, d, task.ID); got == nil || got.Caller != task.Caller {
		t.Fatalf("the first task was replaced: %+v", got)
	}
}

func testUpdateGuards(t *testing.T, open OpenTasks) {
	d := open(t)
	task := newTask()
	write(t, d, func(tx taskdb.Tx) { insert(t, tx, task) })
	next := *task
	next.State, next.Revision, next.Dispatched, next.Updated = agentproto.StateRunning, 1, true, t0.Add(time.Second)
	write(t, d, func(tx taskdb.Tx) {
		if ok, err := tx.UpdateTask(&next, 5, agentproto.StateAccepted); ok || err != nil {
			t.Errorf("a stale revision updated: %v %v", ok, err)
		}
		if ok, err := tx.UpdateTask(&next, 0, agentproto.StateRunning, agentproto.StateInputRequired); ok || err != nil {
			t.Errorf("a wrong source state updated: %v %v", ok, err)
		}
		missing := next
		missing.ID = id("task-")
		if ok, err := tx.UpdateTask(&missing, 0, agentproto.StateAccepted); ok || err != nil {
			t.Errorf("a missing task updated: %v %v", ok, err)
		}
		if _, err := tx.UpdateTask(&next, 0); err == nil {
			t.Error("an update without source states was accepted")
		}
		update(t, tx, &next, 0, agentproto.StateRunning, agentproto.StateAccepted, agentproto.StateInputRequired)
	})
	sameTask(t, read(t, d, task.ID), &next)
	write(t, d, func(tx taskdb.Tx) {
		skip := next
		skip.Revision = 3
		refused(t, tx, "a revision skip", func() (bool, error) { return tx.UpdateTask(&skip, 1, agentproto.StateRunning) })
		back := next
		back.State, back.Revision = agentproto.StateAccepted, 2
		refused(t, tx, "running -> accepted", func() (bool, error) { return tx.UpdateTask(&back, 1, agentproto.StateRunning) })
		noInput := next
		noInput.State, noInput.Revision = agentproto.StateInputRequired, 2
		refused(t, tx, "input_required without a request", func() (bool, error) { return tx.UpdateTask(&noInput, 1, agentproto.StateRunning) })
		noResult := next
		noResult.State, noResult.Revision = agentproto.StateCompleted, 2
		refused(t, tx, "a settlement without a result", func() (bool, error) { return tx.UpdateTask(&noResult, 1, agentproto.StateRunning) })
		halfCancel := next
		halfCancel.State, halfCancel.Revision, halfCancel.CancelKey = agentproto.StateCancelling, 2, []byte{1, 2}
		refused(t, tx, "a short cancel key", func() (bool, error) { return tx.UpdateTask(&halfCancel, 1, agentproto.StateRunning) })
	})
	sameTask(t, read(t, d, task.ID), &next)
	// Cancellation records its key and revision.
	c := next
	c.State, c.Revision, c.CancelKey, c.CancelRev, c.Updated = agentproto.StateCancelling, 2, bytes.Repeat([]byte{9}, 32), 2, t0.Add(2*time.Second)
	write(t, d, func(tx taskdb.Tx) { update(t, tx, &c, 1, agentproto.StateRunning) })
	sameTask(t, read(t, d, task.ID), &c)
}

func testTerminal(t *testing.T, open OpenTasks) {
	d := open(t)
	for _, final := range []agentproto.State{agentproto.StateCompleted, agentproto.StateFailed, agentproto.StateCancelled} {
		task := newTask()
		done := *task
		done.State, done.Revision, done.Result = final, 1, []byte(`{"final":"`+string(final)+`"}`)
		done.Updated, done.PurgeAfter = t0.Add(time.Second), t0.Add(3*time.Hour)
		write(t, d, func(tx taskdb.Tx) {
			insert(t, tx, task)
			update(t, tx, &done, 0, agentproto.StateAccepted)
		})
		sameTask(t, read(t, d, task.ID), &done)
		write(t, d, func(tx taskdb.Tx) {
			again := done
			again.Revision, again.State = 2, agentproto.StateFailed
			refused(t, tx, string(final)+" -> failed", func() (bool, error) {
				return tx.UpdateTask(&again, 1, agentproto.StateCompleted, agentproto.StateFailed, agentproto.StateCancelled)
			})
			same := done
			same.Revision, same.Result = 2, []byte(`[]`)
			refused(t, tx, string(final)+": a new result", func() (bool, error) {
				return tx.UpdateTask(&same, 1, final)
			})
		})
		sameTask(t, read(t, d, task.ID), &done)
	}
}

func event(taskID string, rev int64, typ agentproto.EventType) *taskdb.Event {
	return &taskdb.Event{TaskID: taskID, Revision: rev, EventID: id("evt-"), Type: typ,
		Payload: []byte(`{"n":` + fmt.Sprint(rev) + `}`), Created: t0.Add(time.Duration(rev) * time.Second)}
}

func testEvents(t *testing.T, open OpenTasks) {
	d := open(t)
	task := newTask()
	var evs []*taskdb.Event
	write(t, d, func(tx taskdb.Tx) {
		insert(t, tx, task)
		refused(t, tx, "an event at revision 0", func() (bool, error) {
			return true, tx.AppendEvent(event(task.ID, 0, agentproto.EventStatus))
		})
		cur := *task
		for rev, typ := range []agentproto.EventType{"", agentproto.EventStatus, agentproto.EventProgress, agentproto.EventProgress, agentproto.EventCompleted} {
			if rev == 0 {
				continue
			}
			n := cur
			n.Revision = int64(rev)
			n.State = agentproto.StateRunning
			if typ == agentproto.EventCompleted {
				n.State, n.Result = agentproto.StateCompleted, []byte(`{}`)
			}
			update(t, tx, &n, cur.Revision, cur.State)
			cur = n
			refused(t, tx, "an event ahead of its task", func() (bool, error) {
				return true, tx.AppendEvent(event(task.ID, int64(rev)+1, typ))
			})
			e := event(task.ID, int64(rev), typ)
			if err := tx.AppendEvent(e); err != nil {
				t.Fatalf("AppendEvent at %d: %v", rev, err)
			}
			evs = append(evs, e)
			dup := event(task.ID, int64(rev), typ)
			refused(t, tx, "a second event at one revision", func() (bool, error) { return true, tx.AppendEvent(dup) })
		}
		reused := event(task.ID, 4, agentproto.EventCompleted)
		reused.EventID = evs[0].EventID
		refused(t, tx, "a reused event ID", func() (bool, error) { return true, tx.AppendEvent(reused) })
		other := newTask()
		insert(t, tx, other)
		on := *other
		on.State, on.Revision = agentproto.StateRunning, 1
		update(t, tx, &on, 0, agentproto.StateAccepted)
		bad := event(other.ID, 1, "paused")
		refused(t, tx, "an unknown event type", func() (bool, error) { return true, tx.AppendEvent(bad) })
	})
	got, err := d.Events(taskCtx, task.ID)
	if err != nil || len(got) != len(evs) {
		t.Fatalf("Events = %d, %v; want %d", len(got), err, len(evs))
	}
	for i, e := range got {
		w := evs[i]
		if e.TaskID != w.TaskID || e.Revision != w.Revision || e.EventID != w.EventID || e.Type != w.Type ||
			!bytes.Equal(e.Payload, w.Payload) || !e.Created.Equal(w.Created) {
			t.Errorf("event %d = %+v, want %+v", i, e, *w)
		}
	}
	if got, err := d.Events(taskCtx, id("task-")); err != nil || len(got) != 0 {
		t.Errorf("events of a missing task: %v %v", got, err)
	}
}

func testInputs(t *testing.T, open OpenTasks) {
	d := open(t)
	task := newTask()
	reqID := id("input-")
	waiting := *task
	waiting.State, waiting.Revision, waiting.InputRequest = agentproto.StateInputRequired, 1, reqID
	in := &taskdb.Input{TaskID: task.ID, RequestID: reqID, Status: taskdb.InputPending,
		Request: []byte(`{"prompt":"city?"}`), ExpiresAt: "2026-07-27T19:20:00Z", CreatedRev: 1}
	write(t, d, func(tx taskdb.Tx) {
		insert(t, tx, task)
		update(t, tx, &waiting, 0, agentproto.StateAccepted)
		if err := tx.InsertInput(in); err != nil {
			t.Fatalf("InsertInput: %v", err)
		}
		second := *in
		second.RequestID = id("input-")
		refused(t, tx, "a second pending input", func() (bool, error) { return true, tx.InsertInput(&second) })
		answeredNoKey := *in
		answeredNoKey.RequestID, answeredNoKey.Status = id("input-"), taskdb.InputAnswered
		refused(t, tx, "answered without a key", func() (bool, error) { return true, tx.InsertInput(&answeredNoKey) })
		got, err := tx.Input(task.ID, reqID)
		if err != nil || got == nil || got.Status != taskdb.InputPending || got.ExpiresAt != in.ExpiresAt || !bytes.Equal(got.Request, in.Request) || got.CreatedRev != 1 {
			t.Fatalf("Tx.Input = %+v, %v", got, err)
		}
		if got, err := tx.Input(task.ID, id("input-")); err != nil || got != nil {
			t.Errorf("a missing input reads %+v, %v", got, err)
		}
	})
	st, pending, err := d.TaskState(taskCtx, task.ID)
	if err != nil || st == nil || st.State != agentproto.StateInputRequired || pending == nil || pending.RequestID != reqID || pending.Status != taskdb.InputPending {
		t.Fatalf("TaskState = %+v, %+v, %v", st, pending, err)
	}
	key := bytes.Repeat([]byte{5}, 32)
	write(t, d, func(tx taskdb.Tx) {
		if ok, err := tx.SetInputStatus(task.ID, id("input-"), taskdb.InputAnswered, key, 2); ok || err != nil {
			t.Errorf("answering a missing input: %v %v", ok, err)
		}
		refused(t, tx, "answered without a key", func() (bool, error) {
			return tx.SetInputStatus(task.ID, reqID, taskdb.InputAnswered, nil, 0)
		})
		if ok, err := tx.SetInputStatus(task.ID, reqID, taskdb.InputAnswered, key, 2); !ok || err != nil {
			t.Fatalf("answer: %v %v", ok, err)
		}
		// A disposition is final.
		refused(t, tx, "answering twice", func() (bool, error) {
			return tx.SetInputStatus(task.ID, reqID, taskdb.InputExpired, nil, 0)
		})
		got, err := tx.Input(task.ID, reqID)
		if err != nil || got.Status != taskdb.InputAnswered || !bytes.Equal(got.AcceptKey, key) || got.AcceptRev != 2 {
			t.Errorf("answered input = %+v, %v", got, err)
		}
		// After the answer another request may be pending.
		n := waiting
		n.Revision, n.InputRequest = 2, id("input-")
		update(t, tx, &n, 1, agentproto.StateInputRequired)
		if err := tx.InsertInput(&taskdb.Input{TaskID: task.ID, RequestID: n.InputRequest, Status: taskdb.InputPending, Request: []byte(`{}`), CreatedRev: 2}); err != nil {
			t.Fatalf("the next pending input: %v", err)
		}
		if ok, err := tx.SetInputStatus(task.ID, n.InputRequest, taskdb.InputSuperseded, nil, 0); !ok || err != nil {
			t.Errorf("supersede: %v %v", ok, err)
		}
	})
}

func testSavepoints(t *testing.T, open OpenTasks) {
	d := open(t)
	kept, undone, committed := newTask(), newTask(), newTask()
	write(t, d, func(tx taskdb.Tx) {
		if err := tx.Savepoint(); err != nil {
			t.Fatal(err)
		}
		insert(t, tx, undone)
		if err := tx.RollbackTo(); err != nil {
			t.Fatal(err)
		}
		if got, err := tx.Task(undone.ID); err != nil || got != nil {
			t.Errorf("a rolled-back operation left %v, %v", got, err)
		}
		if err := tx.Savepoint(); err != nil {
			t.Fatal(err)
		}
		insert(t, tx, kept)
		if err := tx.Release(); err != nil {
			t.Fatal(err)
		}
	})
	if read(t, d, undone.ID) != nil || read(t, d, kept.ID) == nil {
		t.Error("savepoints: wrong tasks committed")
	}
	tx, err := d.Begin(taskCtx)
	if err != nil {
		t.Fatal(err)
	}
	insert(t, tx, committed)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if read(t, d, committed.ID) != nil {
		t.Error("a rolled-back transaction committed")
	}
}

func testUnsettled(t *testing.T, open OpenTasks) {
	d := open(t)
	var want []string
	write(t, d, func(tx taskdb.Tx) {
		for i, st := range []agentproto.State{agentproto.StateAccepted, agentproto.StateRunning, agentproto.StateCompleted, agentproto.StateInputRequired, agentproto.StateCancelling, agentproto.StateFailed, agentproto.StateCancelled} {
			task := newTask()
			task.Created = t0.Add(time.Duration(7-i) * time.Second) // reverse insertion order
			insert(t, tx, task)
			if st == agentproto.StateAccepted {
				want = append(want, task.ID)
				continue
			}
			n := *task
			n.State, n.Revision = st, 1
			switch st {
			case agentproto.StateInputRequired:
				n.InputRequest = id("input-")
			case agentproto.StateCompleted, agentproto.StateFailed, agentproto.StateCancelled:
				n.Result = []byte(`{}`)
			}
			update(t, tx, &n, 0, agentproto.StateAccepted)
			if n.Result == nil {
				want = append(want, task.ID)
			}
		}
	})
	slices.Reverse(want) // ordered by creation
	got, err := d.Unsettled(taskCtx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, task := range got {
		ids = append(ids, task.ID)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("Unsettled = %q, want %q", ids, want)
	}
}

func testTaskPurge(t *testing.T, open OpenTasks) {
	d := open(t)
	settle := func(tx taskdb.Tx, caller string, args, result string, purgeAfter time.Time) *taskdb.Task {
		task := newTask()
		task.Caller, task.Arguments = caller, []byte(args)
		insert(t, tx, task)
		n := *task
		n.State, n.Revision, n.Result, n.PurgeAfter = agentproto.StateFailed, 1, []byte(result), purgeAfter
		update(t, tx, &n, 0, agentproto.StateAccepted)
		if err := tx.AppendEvent(event(task.ID, 1, agentproto.EventFailed)); err != nil {
			t.Fatal(err)
		}
		return task
	}
	early, late := t0.Add(time.Hour), t0.Add(3*time.Hour)
	var a1, a2, b1 *taskdb.Task
	write(t, d, func(tx taskdb.Tx) {
		a1 = settle(tx, "alice@example.test", `{"a":1}`, `{"r":"1"}`, early) // 7 + 9
		a2 = settle(tx, "alice@example.test", `{}`, `{"rr":"22"}`, late)     // 2 + 11
		b1 = settle(tx, "bob@example.test", `[1,2,3]`, `{}`, early)          // 7 + 2
		live := newTask()
		live.Caller = "bob@example.test"
		insert(t, tx, live) // not terminal: not retained bytes
	})
	got, err := d.RetainedBytes(taskCtx)
	if err != nil {
		t.Fatal(err)
	}
	if w := map[string]int64{"alice@example.test": 16 + 13, "bob@example.test": 9}; !mapsEqual(got, w) {
		t.Errorf("RetainedBytes = %v, want %v", got, w)
	}
	write(t, d, func(tx taskdb.Tx) {
		pb, err := tx.PurgeableBytes(early.Add(-time.Nanosecond))
		if err != nil || len(pb) != 0 {
			t.Errorf("PurgeableBytes before any purge time = %v, %v", pb, err)
		}
		if n, err := tx.Purge(early.Add(-time.Nanosecond)); err != nil || n != 0 {
			t.Errorf("Purge before any purge time = %d, %v", n, err)
		}
		pb, err = tx.PurgeableBytes(early)
		if w := map[string]int64{"alice@example.test": 16, "bob@example.test": 9}; err != nil || !mapsEqual(pb, w) {
			t.Errorf("PurgeableBytes = %v, %v; want %v", pb, err, w)
		}
		if n, err := tx.Purge(early); err != nil || n != 2 {
			t.Errorf("Purge = %d, %v; want 2", n, err)
		}
	})
	if read(t, d, a1.ID) != nil || read(t, d, b1.ID) != nil || read(t, d, a2.ID) == nil {
		t.Error("Purge deleted the wrong tasks")
	}
	for _, gone := range []*taskdb.Task{a1, b1} {
		if evs, err := d.Events(taskCtx, gone.ID); err != nil || len(evs) != 0 {
			t.Errorf("a purged task kept its events: %d %v", len(evs), err)
		}
	}
	if evs, _ := d.Events(taskCtx, a2.ID); len(evs) != 1 {
		t.Errorf("a retained task lost its events: %d", len(evs))
	}
	if got, _ := d.RetainedBytes(taskCtx); !mapsEqual(got, map[string]int64{"alice@example.test": 13}) {
		t.Errorf("RetainedBytes after purge = %v", got)
	}
	// A purged request key is free again.
	write(t, d, func(tx taskdb.Tx) {
		again := newTask()
		again.Caller, again.RequestID = a1.Caller, a1.RequestID
		insert(t, tx, again)
	})
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func testReferences(t *testing.T, open OpenTasks) {
	d := open(t)
	task := newTask()
	write(t, d, func(tx taskdb.Tx) { insert(t, tx, task) })
	check := func(what string, got bool, err error, want bool) {
		t.Helper()
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", what, got, err, want)
		}
	}
	ref, err := d.VersionReferenced(taskCtx, task.Endpoint, task.APIVersion)
	check("VersionReferenced(pinned)", ref, err, true)
	ref, err = d.VersionReferenced(taskCtx, task.Endpoint, "9.9.9")
	check("VersionReferenced(other version)", ref, err, false)
	ref, err = d.VersionReferenced(taskCtx, "news@agents.example.test", task.APIVersion)
	check("VersionReferenced(other endpoint)", ref, err, false)
	has, err := d.HasTask(taskCtx, task.Caller, task.Endpoint)
	check("HasTask", has, err, true)
	has, err = d.HasTask(taskCtx, "bob@example.test", task.Endpoint)
	check("HasTask(other caller)", has, err, false)
	has, err = d.HasTask(taskCtx, task.Caller, strings.ToUpper(task.Endpoint))
	check("HasTask(other endpoint)", has, err, false)
}

// testAdmitAndStart is the engine's admission of a task with a free backend
// slot: insert at revision 0, move to running (dispatched) at revision 1 and
// append its status event, in one transaction. Committed, it reads back
// running and dispatched (a restart settles it interrupted, never re-runs
// it), with the one event; rolled back, nothing of it exists.
func testAdmitAndStart(t *testing.T, open OpenTasks) {
	d := open(t)
	admitStart := func(tx taskdb.Tx, task *taskdb.Task) *taskdb.Task {
		insert(t, tx, task)
		n := *task
		n.State, n.Revision, n.Dispatched = agentproto.StateRunning, 1, true
		update(t, tx, &n, 0, agentproto.StateAccepted)
		if err := tx.AppendEvent(event(task.ID, 1, agentproto.EventStatus)); err != nil {
			t.Fatalf("AppendEvent: %v", err)
		}
		return &n
	}
	task := newTask()
	var want *taskdb.Task
	write(t, d, func(tx taskdb.Tx) { want = admitStart(tx, task) })
	sameTask(t, read(t, d, task.ID), want)
	if evs, err := d.Events(taskCtx, task.ID); err != nil || len(evs) != 1 || evs[0].Revision != 1 || evs[0].Type != agentproto.EventStatus {
		t.Errorf("events after admit+start: %+v %v", evs, err)
	}
	if got, err := d.TaskByRequest(taskCtx, task.Caller, task.Endpoint, task.RequestID); err != nil || got == nil || got.ID != task.ID {
		t.Errorf("replay record after admit+start: %v %v", got, err)
	}
	un, err := d.Unsettled(taskCtx)
	if err != nil || len(un) != 1 || un[0].ID != task.ID || !un[0].Dispatched || un[0].State != agentproto.StateRunning {
		t.Errorf("Unsettled after admit+start = %+v %v, want the task running and dispatched", un, err)
	}

	gone := newTask()
	tx, err := d.Begin(taskCtx)
	if err != nil {
		t.Fatal(err)
	}
	admitStart(tx, gone)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, d, gone.ID); got != nil {
		t.Errorf("a rolled-back admit+start left %+v", got)
	}
	if evs, err := d.Events(taskCtx, gone.ID); err != nil || len(evs) != 0 {
		t.Errorf("a rolled-back admit+start left events %v %v", evs, err)
	}
}
