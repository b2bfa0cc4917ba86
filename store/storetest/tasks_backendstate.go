// This file is the conformance case of the backend state a task carries
// (taskdb.Tx.SetBackendState): stored, replaced, read back, rolled back
// with its savepoint, deleted, and gone with the purged task.

package storetest

import (
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

func testBackendState(t *testing.T, open OpenTasks) {
	d := open(t)
	get := func(id string) string {
		t.Helper()
		b, err := d.BackendState(taskCtx, id)
		if err != nil {
			t.Fatalf("BackendState: %v", err)
		}
		if b == nil {
			return "<nil>"
		}
		return string(b)
	}
	task, other := newTask(), newTask()
	write(t, d, func(tx taskdb.Tx) {
		insert(t, tx, task)
		insert(t, tx, other)
		if err := tx.SetBackendState(task.ID, []byte(`{"v":1}`)); err != nil {
			t.Fatal(err)
		}
	})
	if g := get(task.ID); g != `{"v":1}` {
		t.Fatalf("stored state = %s", g)
	}
	if g := get(other.ID); g != "<nil>" {
		t.Fatalf("a task without state reads %s", g)
	}
	write(t, d, func(tx taskdb.Tx) {
		if err := tx.SetBackendState(task.ID, []byte(`{"v":2}`)); err != nil {
			t.Fatal(err)
		}
		// A rolled-back savepoint undoes its write.
		if err := tx.Savepoint(); err != nil {
			t.Fatal(err)
		}
		if err := tx.SetBackendState(other.ID, []byte(`{"x":1}`)); err != nil {
			t.Fatal(err)
		}
		if err := tx.RollbackTo(); err != nil {
			t.Fatal(err)
		}
	})
	if g := get(task.ID); g != `{"v":2}` {
		t.Fatalf("replaced state = %s", g)
	}
	if g := get(other.ID); g != "<nil>" {
		t.Fatalf("a rolled-back state reads %s", g)
	}
	// The revision is untouched.
	if r := read(t, d, task.ID); r.Revision != task.Revision {
		t.Fatalf("revision moved to %d", r.Revision)
	}
	write(t, d, func(tx taskdb.Tx) {
		if err := tx.SetBackendState(other.ID, []byte(`{"y":1}`)); err != nil {
			t.Fatal(err)
		}
		if err := tx.SetBackendState(other.ID, nil); err != nil {
			t.Fatal(err)
		}
	})
	if g := get(other.ID); g != "<nil>" {
		t.Fatalf("a deleted state reads %s", g)
	}
	// Purging the settled task takes its state along.
	write(t, d, func(tx taskdb.Tx) {
		n := *task
		n.State, n.Revision, n.Result, n.PurgeAfter = agentproto.StateFailed, 1, []byte(`{}`), t0
		update(t, tx, &n, 0, agentproto.StateAccepted)
		if c, err := tx.Purge(t0.Add(time.Second)); err != nil || c != 1 {
			t.Fatalf("Purge = %d, %v", c, err)
		}
	})
	if g := get(task.ID); g != "<nil>" {
		t.Fatalf("a purged task's state reads %s", g)
	}
}
