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

// ExerciseRecent checks a driver's taskdb.Lister (the console's task
// list): newest first, search across ID, endpoint, tool and caller without
// regard to case, live and settled filters, offset and limit.
func ExerciseRecent(t *testing.T, open func(t *testing.T) taskdb.Driver) {
	t.Helper()
	d := open(t)
	l, ok := d.(taskdb.Lister)
	if !ok {
		t.Fatal("the driver is no taskdb.Lister")
	}
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 7; i++ {
		tk := &taskdb.Task{ID: fmt.Sprintf("task-recent-%016d", i), Caller: "a@x.test", Route: "a@x.test/r", Endpoint: "w@agents.x.test",
			RequestID: fmt.Sprintf("req-recent-%016d", i), Tool: fmt.Sprintf("Tool%d", i%2), APIVersion: "1", ManifestHash: "h",
			Arguments: []byte(`{}`), Fingerprint: bytes.Repeat([]byte{1}, 32), State: agentproto.StateRunning, Revision: 1,
			Created: base.Add(time.Duration(i) * time.Minute), Updated: base, RetainUntil: base.Add(time.Hour), PurgeAfter: base.Add(2 * time.Hour)}
		if i < 3 {
			tk.State, tk.Result = agentproto.StateCompleted, []byte(`{"result":{}}`)
		}
		if ok, err := tx.InsertTask(tk); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	ids := func(q taskdb.RecentQuery) string {
		t.Helper()
		got, err := l.Recent(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, x := range got {
			fmt.Fprintf(&b, "%c", x.ID[len(x.ID)-1])
		}
		return b.String()
	}
	for _, c := range []struct {
		q    taskdb.RecentQuery
		want string
	}{
		{taskdb.RecentQuery{}, "6543210"},
		{taskdb.RecentQuery{Limit: 3}, "654"},
		{taskdb.RecentQuery{Offset: 3, Limit: 3}, "321"},
		{taskdb.RecentQuery{Live: true}, "6543"},
		{taskdb.RecentQuery{Settled: true}, "210"},
		{taskdb.RecentQuery{Search: "TOOL1"}, "531"},
		{taskdb.RecentQuery{Search: "tool1", Settled: true}, "1"},
		{taskdb.RecentQuery{Search: "W@AGENTS"}, "6543210"},
		{taskdb.RecentQuery{Search: "nobody"}, ""},
		{taskdb.RecentQuery{Search: "%"}, ""},
	} {
		if got := ids(c.q); got != c.want {
			t.Errorf("Recent(%+v) = %q, want %q", c.q, got, c.want)
		}
	}
}
