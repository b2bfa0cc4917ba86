package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// ExerciseOwnTasks checks a driver's taskdb.OwnLister (the task-list
// extension): only the caller's tasks, newest first with ties broken by
// ID, keyset paging that later admissions do not disturb, the state and
// task filters, the page bound, and the listing columns (no payloads).
func ExerciseOwnTasks(t *testing.T, open func(t *testing.T) taskdb.Driver) {
	t.Helper()
	d := open(t)
	l, ok := d.(taskdb.OwnLister)
	if !ok {
		t.Fatal("the driver is no taskdb.OwnLister")
	}
	ctx := context.Background()
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	insert := func(id, caller string, created time.Time, settled bool, cancelRev int64) {
		t.Helper()
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tk := &taskdb.Task{ID: id, Caller: caller, Route: caller + "/r", Endpoint: "w@agents.x.test",
			RequestID: "req-" + id, Tool: "Tool", APIVersion: "1", ManifestHash: "h",
			Arguments: []byte(`{"big":"arguments"}`), Fingerprint: bytes.Repeat([]byte{1}, 32), State: agentproto.StateRunning, Revision: 2,
			Created: created, Updated: created.Add(time.Second), RetainUntil: base.Add(time.Hour), PurgeAfter: base.Add(2 * time.Hour)}
		if settled {
			tk.State, tk.Result = agentproto.StateCompleted, []byte(`{"result":{}}`)
		}
		if ok, err := tx.InsertTask(tk); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if cancelRev > 0 {
			// An accepted cancellation is a transition like any other.
			tk.State, tk.Revision, tk.CancelKey, tk.CancelRev = agentproto.StateCancelling, cancelRev, bytes.Repeat([]byte{2}, 32), cancelRev
			if ok, err := tx.UpdateTask(tk, 2, agentproto.StateRunning); !ok || err != nil {
				t.Fatal(ok, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// Tasks 0..5 of alice one minute apart; 6 and 7 share 3's instant
	// (ties by ID); bob's task is newest of all.
	for i := 0; i < 6; i++ {
		insert(fmt.Sprintf("task-own-a-%016d", i), "alice@x.test", base.Add(time.Duration(i)*time.Minute), i < 2, 0)
	}
	insert("task-own-a-0000000000000006", "alice@x.test", base.Add(3*time.Minute), false, 0)
	insert("task-own-a-0000000000000007", "alice@x.test", base.Add(3*time.Minute), false, 0)
	insert("task-own-b-0000000000000000", "bob@x.test", base.Add(time.Hour), false, 3)

	list := func(q taskdb.OwnQuery) ([]taskdb.Task, string) {
		t.Helper()
		got, err := l.OwnTasks(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, x := range got {
			fmt.Fprintf(&b, "%c", x.ID[len(x.ID)-1])
		}
		return got, b.String()
	}
	if _, got := list(taskdb.OwnQuery{Caller: "alice@x.test"}); got != "54763210" {
		t.Errorf("alice's tasks = %q, want 54763210", got)
	}
	// Paging by position: three at a time, and an admission between two
	// pages (newer than all) neither repeats nor skips a task.
	var all string
	var before *taskdb.Position
	for page := 0; page < 5; page++ {
		got, ids := list(taskdb.OwnQuery{Caller: "alice@x.test", Before: before, Limit: 3})
		all += ids
		if len(got) < 3 {
			break
		}
		last := got[len(got)-1]
		before = &taskdb.Position{CreatedNS: last.Created.UnixNano(), ID: last.ID}
		if page == 0 {
			insert("task-own-a-0000000000000009", "alice@x.test", base.Add(2*time.Hour), false, 0)
		}
	}
	if all != "54763210" {
		t.Errorf("paged = %q, want 54763210", all)
	}
	if _, got := list(taskdb.OwnQuery{Caller: "alice@x.test", State: string(agentproto.StateCompleted)}); got != "10" {
		t.Errorf("completed = %q, want 10", got)
	}
	if _, got := list(taskdb.OwnQuery{Caller: "alice@x.test", TaskID: "task-own-a-0000000000000002"}); got != "2" {
		t.Errorf("by id = %q, want 2", got)
	}
	// Another caller's task is not found by its ID.
	if _, got := list(taskdb.OwnQuery{Caller: "alice@x.test", TaskID: "task-own-b-0000000000000000"}); got != "" {
		t.Errorf("bob's task listed for alice: %q", got)
	}
	if _, got := list(taskdb.OwnQuery{Caller: ""}); got != "" {
		t.Errorf("no caller listed %q", got)
	}
	got, ids := list(taskdb.OwnQuery{Caller: "bob@x.test", Limit: 1000})
	if ids != "0" {
		t.Fatalf("bob's tasks = %q", ids)
	}
	b := got[0]
	if b.Endpoint != "w@agents.x.test" || b.Tool != "Tool" || b.APIVersion != "1" || b.State != agentproto.StateCancelling ||
		b.Revision != 3 || !b.Created.Equal(base.Add(time.Hour)) || !b.Updated.Equal(base.Add(time.Hour+time.Second)) ||
		!b.RetainUntil.Equal(base.Add(time.Hour)) || b.CancelRev != 3 || b.Result != nil || b.Arguments != nil {
		t.Errorf("bob's listed task = %+v", b)
	}
	got, _ = list(taskdb.OwnQuery{Caller: "alice@x.test", TaskID: "task-own-a-0000000000000000"})
	if len(got) != 1 || got[0].Result == nil || len(got[0].Result) != 0 {
		t.Errorf("a settled task lists its result as retained without its payload: %+v", got)
	}
	// The page bound.
	for i := 0; i < taskdb.MaxOwnPage+5; i++ {
		insert(fmt.Sprintf("task-own-c-%016d", i), "carol@x.test", base.Add(time.Duration(i)*time.Second), false, 0)
	}
	if got, _ := list(taskdb.OwnQuery{Caller: "carol@x.test", Limit: 100000}); len(got) != taskdb.MaxOwnPage {
		t.Errorf("page of %d, want the bound %d", len(got), taskdb.MaxOwnPage)
	}
}
