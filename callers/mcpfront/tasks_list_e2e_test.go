package mcpfront_test

// Durable tasks/list and a tasks/cancel that holds (issue 30, rest §1
// and §2): the list comes from the gateway (agentgw's task-list
// extension), so a front killed with SIGKILL and started again lists the
// tasks of earlier processes, and one account never sees another's; a
// 2025-11-25 task whose cancellation was accepted stays cancelled even
// when the agent finishes anyway.

import (
	"syscall"
	"testing"

	gatewaytest "github.com/agentgw/agentgw/testkit/e2e"
)

// stdioPlanAs is stdioPlan for another account of the env.
func (x *taskEnv) stdioPlanAs(user string, steps ...any) map[string]any {
	s := x.env.Server
	args := []string{"mcp", "--jid", x.env.JID(user), "--password-env", pwEnv, "--server", s.C2SAddr, "--ca-file", s.CAFile}
	return map[string]any{"transport": "stdio", "command": x.bin, "args": args,
		"env": map[string]string{pwEnv: gatewaytest.Password + user}, "steps": steps}
}

func listedIDs(tb testing.TB, list map[string]any) []string {
	tb.Helper()
	l, _ := list["tasks"].([]any)
	var out []string
	for _, t := range l {
		id, _ := t.(map[string]any)["taskId"].(string)
		out = append(out, id)
	}
	return out
}

func TestTasksListDurableAcrossFronts(t *testing.T) {
	t.Parallel()
	x := startTaskEnv(t)

	// alice, stdio front 1 (exits with its client): two tasks.
	a := x.runTS(t, x.stdioPlan(
		step("create", "tool", "weather.echo", "args", map[string]any{"message": "a1"}),
		step("create", "tool", "weather.slow")))
	a1, a2 := a.Steps[0].TaskID, a.Steps[1].TaskID
	// alice, HTTP front 2: one more, then kill -9.
	url1, front1 := x.httpFront(t, "tok-1")
	h := x.runTS(t, httpPlan(url1, "tok-1", step("create", "tool", "weather.echo", "args", map[string]any{"message": "a3"})))
	a3 := h.Steps[0].TaskID
	if a1 == "" || a2 == "" || a3 == "" {
		t.Fatalf("creates: %+v %+v", a.Steps, h.Steps)
	}
	if err := front1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = front1.Process.Wait()
	// bob, his own stdio front: one task, and his list holds only it.
	b := x.runTS(t, x.stdioPlanAs("bob",
		step("create", "tool", "weather.echo", "args", map[string]any{"message": "b1"}),
		step("list")))
	b1 := b.Steps[0].TaskID
	if got := listedIDs(t, b.Steps[1].List); len(got) != 1 || got[0] != b1 {
		t.Fatalf("bob's tasks/list = %v, want only %s", got, b1)
	}

	// alice, a new HTTP front after the kill: all three, newest first,
	// none of bob's; and the same from a new stdio front.
	url2, _ := x.httpFront(t, "tok-2")
	r := x.runTS(t, httpPlan(url2, "tok-2", step("list"), step("get", "taskId", b1)))
	want := []string{a3, a2, a1}
	got := listedIDs(t, r.Steps[0].List)
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("alice's tasks/list after kill -9 = %v, want %v", got, want)
	}
	if _, ok := r.Steps[0].List["nextCursor"]; ok {
		t.Errorf("a short list has a nextCursor: %v", r.Steps[0].List)
	}
	if r.Steps[1].Error == nil || r.Steps[1].Error.Code != -32602 {
		t.Fatalf("alice's tasks/get of bob's task = %+v", r.Steps[1])
	}
	s := x.runTS(t, x.stdioPlan(step("list")))
	if got := listedIDs(t, s.Steps[0].List); len(got) != 3 || got[0] != a3 {
		t.Fatalf("alice's tasks/list from a new stdio front = %v", got)
	}
	// Every listed task resolves with tasks/get (the spec's MUST, the
	// other way round).
	for _, id := range got {
		g := x.runTS(t, httpPlan(url2, "tok-2", step("get", "taskId", id)))
		if g.Steps[0].Error != nil {
			t.Errorf("listed %s does not resolve: %+v", id, g.Steps[0].Error)
		}
	}
	t.Logf("alice lists %d tasks after a kill -9 of her front; bob lists %d", len(got), 1)
}

// TestTasksCancelStaysCancelled: 2025-11-25 tasks/cancel answers cancelled
// once the XMPP task accepted the cancellation, and the task stays
// cancelled when the agent completes anyway ("fail" here ignores
// cancellation); tasks/list says the same, from a new front.
func TestTasksCancelStaysCancelled(t *testing.T) {
	t.Parallel()
	x := startTaskEnv(t)
	out := x.runTS(t, x.stdioPlan(
		step("create", "tool", "weather.fail"),
		step("until", "taskId", "$0", "status", []string{"working"}),
		step("cancel", "taskId", "$0")))
	if s := out.Steps[2]; s.Error != nil || s.Task["status"] != "cancelled" {
		t.Fatalf("tasks/cancel = %+v %+v", s.Task, s.Error)
	}
	id := out.Steps[0].TaskID
	ep, xid := xmppOf(t, id)
	x.waitState(t, ep, xid, "completed") // the agent finished anyway
	after := x.runTS(t, x.stdioPlan(step("get", "taskId", id), step("list"), step("cancel", "taskId", id)))
	if s := after.Steps[0]; s.Error != nil || s.Task["status"] != "cancelled" {
		t.Fatalf("tasks/get after the agent completed = %+v %+v", s.Task, s.Error)
	}
	l, _ := after.Steps[1].List["tasks"].([]any)
	if len(l) != 1 || l[0].(map[string]any)["status"] != "cancelled" {
		t.Fatalf("tasks/list = %v", after.Steps[1].List)
	}
	if s := after.Steps[2]; s.Error == nil || s.Error.Code != -32602 {
		t.Fatalf("cancelling a cancelled task = %+v", s)
	}
	t.Logf("cancel: %v; after completion: %v", out.Steps[2].Task["statusMessage"], after.Steps[0].Task["statusMessage"])
}
