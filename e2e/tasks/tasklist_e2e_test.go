package tasks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// TestTaskListExtension: agentgw's task-list IQ (docs/task-list.md)
// through Prosody: a requester lists its own tasks newest first, pages by
// cursor, filters by state and task-id, never sees another account's
// tasks (not even by naming their id), and bad input is one bad-request
// that repeats nothing.
func TestTaskListExtension(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice", "bob"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alice, bob := e.Dial("alice"), e.Dial("bob")
	ep := e.Endpoint("weather")
	gw := jid.MustParse(e.Domain)
	call := func(c *agentclient.Client, msg string) string {
		t.Helper()
		var id string
		out, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"`+msg+`"}`), agentclient.CallOptions{OnAccepted: func(a *agentclient.Accepted) { id = a.TaskID }})
		if err != nil || out.State != agentproto.StateCompleted {
			t.Fatalf("echo %s: %v %+v", msg, err, out)
		}
		return id
	}
	a1, a2, a3 := call(alice, "a1"), call(alice, "a2"), call(alice, "a3")
	b1 := call(bob, "b1")

	ids := func(l *agentclient.TaskList) string {
		var s []string
		for _, x := range l.Tasks {
			s = append(s, x.TaskID)
		}
		return strings.Join(s, ",")
	}
	all, err := alice.ListTasks(ctx, gw, agentclient.TaskListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(all), a3+","+a2+","+a1; got != want || all.More {
		t.Fatalf("alice's tasks = %s (more %v), want %s", got, all.More, want)
	}
	x := all.Tasks[0]
	if x.Endpoint.String() != ep.String() || x.Tool != "echo" || x.State != agentproto.StateCompleted || !x.ResultAvailable || x.CancelRevision != 0 || x.Created == "" || x.RetainUntil == "" {
		t.Errorf("listed task %+v", x)
	}
	// Paging: two, then the rest after the cursor.
	p1, err := alice.ListTasks(ctx, gw, agentclient.TaskListQuery{Max: 2})
	if err != nil || ids(p1) != a3+","+a2 || !p1.More {
		t.Fatalf("page 1 = %s more %v, %v", ids(p1), p1.More, err)
	}
	p2, err := alice.ListTasks(ctx, gw, agentclient.TaskListQuery{Max: 2, After: p1.Tasks[1].Cursor})
	if err != nil || ids(p2) != a1 || p2.More {
		t.Fatalf("page 2 = %s more %v, %v", ids(p2), p2.More, err)
	}
	// Filters; bob's task is not alice's, even by id.
	if l, err := alice.ListTasks(ctx, gw, agentclient.TaskListQuery{State: agentproto.StateRunning}); err != nil || len(l.Tasks) != 0 {
		t.Errorf("running filter: %s %v", ids(l), err)
	}
	if l, err := alice.ListTasks(ctx, gw, agentclient.TaskListQuery{TaskID: a2}); err != nil || ids(l) != a2 {
		t.Errorf("task-id filter: %v %v", l, err)
	}
	if l, err := alice.ListTasks(ctx, gw, agentclient.TaskListQuery{TaskID: b1}); err != nil || len(l.Tasks) != 0 {
		t.Errorf("alice naming bob's task: %s %v", ids(l), err)
	}
	if l, err := bob.ListTasks(ctx, gw, agentclient.TaskListQuery{}); err != nil || ids(l) != b1 {
		t.Errorf("bob's tasks = %s %v", ids(l), err)
	}
	// Bad input: one bad-request each, nothing reflected.
	secret := "SECRET-x<y>"
	for name, q := range map[string]agentclient.TaskListQuery{
		"cursor": {After: secret}, "long cursor": {After: strings.Repeat("A", 300)}, "state": {State: agentproto.State(secret)},
		"task-id": {TaskID: secret}, "max": {Max: 51},
	} {
		_, err := alice.ListTasks(ctx, gw, q)
		if agentclient.Condition(err) != "bad-request" || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: %v", name, err)
		}
	}
	t.Logf("alice lists %d, pages 2+1, bob lists 1; bad input: bad-request", len(all.Tasks))
}
