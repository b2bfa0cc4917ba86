package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

func startTaskEnv(t *testing.T, users []string, script func(x *taskstest.Executor), extra ...map[string]any) *e2e.TaskEnv {
	t.Helper()
	return e2e.StartTaskEnvConfig(t, users, nil, script, extra...)
}

// TestTaskE2EReplay sends one invoke 100 times at once over four
// connections of the same user: one task, one execution. The same
// request-id with other arguments conflicts.
func TestTaskE2EReplay(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	te := startTaskEnv(t, []string{"alice"}, func(x *taskstest.Executor) {
		x.Script("gated", taskstest.Step{Gate: gate}, taskstest.Step{Echo: true})
	}, e2e.Tool("gated", "Gated", "Waits for the test, then echoes.", `{"type":"object","properties":{"n":{"type":"integer"}}}`, false))
	conns := make([]*agentclient.Client, 4)
	for i := range conns {
		conns[i] = te.Dial("alice")
	}
	rid := ids.New("req-")
	const n = 100
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		accs []*agentclient.Accepted
		errs []error
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(c *agentclient.Client) {
			defer wg.Done()
			<-start
			acc, err := c.Invoke(te.Ctx, te.Ep, &agentclient.InvokeRequest{
				RequestID: rid, Tool: "gated", Version: te.Version, ManifestHash: te.Hash, Arguments: json.RawMessage(`{"n":1}`),
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			accs = append(accs, acc)
		}(conns[i%len(conns)])
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d replays failed; first: %v", len(errs), n, errs[0])
	}
	first := accs[0]
	for _, a := range accs {
		if a.TaskID != first.TaskID || a.RequestID != rid || a.Revision != 0 || a.Created != first.Created || a.RetainUntil != first.RetainUntil {
			t.Fatalf("replay accepted %+v, first %+v", a, first)
		}
	}
	// Arguments are compared canonically: the same value spelled
	// differently is still the identical request.
	again, err := conns[0].Invoke(te.Ctx, te.Ep, &agentclient.InvokeRequest{
		RequestID: rid, Tool: "gated", Version: te.Version, ManifestHash: te.Hash, Arguments: json.RawMessage(` { "n" : 1.0 } `),
	})
	if err != nil || again.TaskID != first.TaskID {
		t.Fatalf("canonically equal replay: %+v, %v", again, err)
	}
	_, err = conns[1].Invoke(te.Ctx, te.Ep, &agentclient.InvokeRequest{
		RequestID: rid, Tool: "gated", Version: te.Version, ManifestHash: te.Hash, Arguments: json.RawMessage(`{"n":2}`),
	})
	if e2e.ErrCondition(err) != "conflict" {
		t.Fatalf("same request-id, other arguments: err = %v, want conflict", err)
	}

	testkit.WaitFor(t, 30*time.Second, "the execution to start", func() bool { return len(te.X.Calls()) > 0 })
	close(gate)
	// Events go to whichever connection was admitted first; the others
	// recover through task-state.
	out, err := conns[2].Follow(te.Ctx, te.Ep, first, agentclient.CallOptions{RecoverAfter: 300 * time.Millisecond})
	if err != nil || out.State != "completed" {
		t.Fatalf("follow: %+v, %v", out, err)
	}
	// A replay after completion still returns the same task and runs
	// nothing.
	late, err := conns[3].Invoke(te.Ctx, te.Ep, &agentclient.InvokeRequest{
		RequestID: rid, Tool: "gated", Version: te.Version, ManifestHash: te.Hash, Arguments: json.RawMessage(`{"n":1}`),
	})
	if err != nil || late.TaskID != first.TaskID {
		t.Fatalf("replay after completion: %+v, %v", late, err)
	}
	calls := te.X.Calls()
	if len(calls) != 1 || calls[0].TaskID != first.TaskID {
		t.Fatalf("executions = %+v, want exactly one for %s", calls, first.TaskID)
	}
}

// TestTaskE2ECancelRace cancels a running task with stale and future
// expected revisions (conflict, nothing changes), then with many
// concurrent requests of which exactly one tuple wins.
func TestTaskE2ECancelRace(t *testing.T) {
	t.Parallel()
	te := startTaskEnv(t, []string{"alice"}, nil)
	c := te.Dial("alice")
	acc := te.Invoke(t, c, "wait", `{}`)
	st := te.WaitState(t, c, acc.TaskID, "running")
	rev := st.Revision

	// The spec identifies a cancellation by its expected revision; the
	// engine refuses any but the current one with conflict, and the task
	// is untouched.
	for _, bad := range []int64{rev - 1, rev + 1, rev + 100} {
		if _, err := c.Cancel(te.Ctx, te.Ep, acc.TaskID, bad, nil); e2e.ErrCondition(err) != "conflict" {
			t.Fatalf("cancel with expected-revision %d (current %d): err = %v, want conflict", bad, rev, err)
		}
	}
	if now, err := c.State(te.Ctx, te.Ep, acc.TaskID); err != nil || now.State != "running" || now.Revision != rev {
		t.Fatalf("stale cancels changed the task: %+v, %v", now, err)
	}

	// Sixteen concurrent cancels: eight identical, eight with their own
	// reasons. One tuple is accepted; every request with that tuple gets
	// the same revision, every other one conflict.
	type outcome struct {
		reason string
		rev    int64
		err    error
	}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		res []outcome
	)
	conns := []*agentclient.Client{c, te.Dial("alice")}
	start := make(chan struct{})
	for i := 0; i < 16; i++ {
		reason := "shared"
		if i%2 == 1 {
			reason = fmt.Sprintf("own-%d", i)
		}
		wg.Add(1)
		go func(cl *agentclient.Client, reason string) {
			defer wg.Done()
			<-start
			r := reason
			got, err := cl.Cancel(te.Ctx, te.Ep, acc.TaskID, rev, &r)
			mu.Lock()
			res = append(res, outcome{reason, got, err})
			mu.Unlock()
		}(conns[i%2], reason)
	}
	close(start)
	wg.Wait()
	winner := ""
	for _, o := range res {
		switch {
		case o.err == nil:
			if winner != "" && winner != o.reason {
				t.Fatalf("two different cancellations were accepted: %q and %q", winner, o.reason)
			}
			winner = o.reason
			if o.rev != rev+1 {
				t.Fatalf("cancel-accepted revision %d, want %d", o.rev, rev+1)
			}
		case e2e.ErrCondition(o.err) != "conflict":
			t.Fatalf("cancel %q: %v, want conflict", o.reason, o.err)
		}
	}
	if winner == "" {
		t.Fatal("no cancellation was accepted")
	}
	for _, o := range res {
		if o.reason == winner && o.err != nil {
			t.Fatalf("an identical cancellation of the winning tuple failed: %v", o.err)
		}
	}

	out, err := c.Follow(te.Ctx, te.Ep, acc, agentclient.CallOptions{})
	if err != nil || out.State != "cancelled" || out.Revision != rev+2 {
		t.Fatalf("follow: %+v, %v (want cancelled at %d)", out, err, rev+2)
	}
	// The identical replay after the terminal state returns the original
	// acceptance; anything else conflicts.
	w := winner
	if got, err := c.Cancel(te.Ctx, te.Ep, acc.TaskID, rev, &w); err != nil || got != rev+1 {
		t.Fatalf("identical replay after cancelled: %d, %v; want %d", got, err, rev+1)
	}
	if _, err := c.Cancel(te.Ctx, te.Ep, acc.TaskID, out.Revision, nil); e2e.ErrCondition(err) != "conflict" {
		t.Fatalf("new cancel after cancelled: %v, want conflict", err)
	}
	// Exactly one cancellation reached the executor: it settled once.
	if calls := te.X.Calls(); len(calls) != 1 {
		t.Fatalf("executions = %d, want 1", len(calls))
	}
	rec := te.X.Record(acc.TaskID)
	<-rec.Done
	for i, err := range rec.Errors {
		if err != nil {
			t.Fatalf("step %d of the wait script failed: %v", i, err)
		}
	}
}

// TestTaskE2ETerminalImmutable: a tool keeps producing output after it
// settled cancelled. The engine refuses it and neither task-state nor
// task-result changes.
func TestTaskE2ETerminalImmutable(t *testing.T) {
	t.Parallel()
	settled := make(chan struct{})
	proceed := make(chan struct{})
	late := make(chan []error, 1)
	during := make(chan error, 1)
	te := startTaskEnv(t, []string{"alice"}, func(x *taskstest.Executor) {
		x.Script("stubborn", taskstest.Step{Do: func(ctx context.Context, call tasks.Call, run tasks.Run) error {
			select {
			case <-run.CancelRequested():
			case <-ctx.Done():
				return ctx.Err()
			}
			// Cancelling is not terminal: output is still accepted.
			during <- run.Progress(tasks.Progress{Percent: taskstest.Percent(90), Message: "finishing up"})
			if err := run.Cancelled("honoured"); err != nil {
				return err
			}
			close(settled)
			// A misbehaving tool: it ignores that the engine ended its
			// context on settlement and carries on.
			<-proceed
			late <- []error{
				run.Progress(tasks.Progress{Percent: taskstest.Percent(99), Message: "still going"}),
				run.Complete(*taskstest.Text("late result")),
				run.Fail(tasks.Failure{Code: "com.example:late", Message: "Late failure."}),
				run.Cancelled("again"),
			}
			return nil
		}})
	}, e2e.Tool("stubborn", "Stubborn", "Ignores its own cancellation.", `{"type":"object"}`, false))
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(proceed) }) })
	c := te.Dial("alice")
	acc := te.Invoke(t, c, "stubborn", `{}`)
	st := te.WaitState(t, c, acc.TaskID, "running")
	crev, err := c.Cancel(te.Ctx, te.Ep, acc.TaskID, st.Revision, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-during; err != nil {
		t.Fatalf("progress while cancelling was refused: %v", err)
	}
	select {
	case <-settled:
	case <-te.Ctx.Done():
		t.Fatal("the tool did not settle")
	}
	before, err := c.State(te.Ctx, te.Ep, acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	// running, cancelling, progress, cancelled.
	if before.State != "cancelled" || before.Revision != crev+2 || !before.ResultAvailable {
		t.Fatalf("state after settlement = %+v, want cancelled at %d", before, crev+2)
	}
	resBefore, err := c.Result(te.Ctx, te.Ep, acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	once.Do(func() { close(proceed) })
	var errs []error
	select {
	case errs = <-late:
	case <-te.Ctx.Done():
		t.Fatal("the tool did not report its late output")
	}
	for i, err := range errs {
		if !errors.Is(err, tasks.ErrSettled) {
			t.Errorf("late output %d: err = %v, want ErrSettled", i, err)
		}
	}
	after, err := c.State(te.Ctx, te.Ep, acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	resAfter, err := c.Result(te.Ctx, te.Ep, acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", before) != fmt.Sprintf("%+v", after) {
		t.Fatalf("task-state changed after terminal:\nbefore %+v\nafter  %+v", before, after)
	}
	if resBefore.State != resAfter.State || resBefore.Revision != resAfter.Revision || string(resBefore.Payload) != string(resAfter.Payload) {
		t.Fatalf("task-result changed after terminal:\nbefore %+v\nafter  %+v", resBefore, resAfter)
	}
	if resAfter.State != "cancelled" || string(resAfter.Payload) != `{"reason":"honoured"}` {
		t.Fatalf("task-result = %s %s", resAfter.State, resAfter.Payload)
	}
}

// TestTaskE2ERecoveryErrors: result of a running task, malformed ids, and
// another user's task, which must be indistinguishable from a task that
// never existed.
func TestTaskE2ERecoveryErrors(t *testing.T) {
	t.Parallel()
	te := startTaskEnv(t, []string{"alice", "bob"}, nil)
	alice := te.Dial("alice")
	acc := te.Invoke(t, alice, "wait", `{}`)
	te.WaitState(t, alice, acc.TaskID, "running")

	if _, err := alice.Result(te.Ctx, te.Ep, acc.TaskID); e2e.ErrCondition(err) != "unexpected-request" {
		t.Fatalf("task-result of a running task: %v, want unexpected-request", err)
	}
	for _, bad := range []string{"bad id", "short", "task-", "task-ünïcode-ünïcode-ünïcode"} {
		if _, err := alice.State(te.Ctx, te.Ep, bad); e2e.ErrCondition(err) != "bad-request" {
			t.Fatalf("task-state of %q: %v, want bad-request", bad, err)
		}
		if _, err := alice.Result(te.Ctx, te.Ep, bad); e2e.ErrCondition(err) != "bad-request" {
			t.Fatalf("task-result of %q: %v, want bad-request", bad, err)
		}
	}

	_, bobConn := te.DialConn("bob")
	missing := ids.New("task-")
	ops := map[string]func(taskID string) (string, *xmltree.Element){
		"task-state": func(id string) (string, *xmltree.Element) {
			return "get", xmltree.New(ns.Task, "task-state-request", "task-id", id)
		},
		"task-result": func(id string) (string, *xmltree.Element) {
			return "get", xmltree.New(ns.Task, "task-result-request", "task-id", id)
		},
		"cancel": func(id string) (string, *xmltree.Element) {
			return "set", xmltree.New(ns.Task, "cancel", "expected-revision", "1", "task-id", id)
		},
		"provide-input": func(id string) (string, *xmltree.Element) {
			el := xmltree.New(ns.Task, "provide-input", "expected-revision", "1", "request-id", ids.New("input-"), "task-id", id)
			el.Add(xmltree.New(ns.Task, "input", "media-type", ns.MediaJSON).WithText(`{"unit":"C"}`))
			return "set", el
		},
	}
	for name, op := range ops {
		ask := func(conn *xmppclient.Client, id string) string {
			typ, payload := op(id)
			iq := xmltree.New("jabber:client", "iq", "type", typ, "id", "probe-"+name, "to", te.Ep.String())
			iq.Add(payload)
			reply, err := conn.SendIQ(te.Ctx, iq)
			if err != nil {
				t.Fatal(err)
			}
			reply.SetAttr("from", "")
			reply.SetAttr("to", "")
			return reply.String()
		}
		foreign, none := ask(bobConn, acc.TaskID), ask(bobConn, missing)
		if foreign != none || !strings.Contains(foreign, "item-not-found") {
			t.Fatalf("%s: another user's task and a nonexistent one differ:\nforeign %s\nmissing %s", name, foreign, none)
		}
	}
	// Bob's probes did not touch alice's task.
	if st, err := alice.State(te.Ctx, te.Ep, acc.TaskID); err != nil || st.State != "running" {
		t.Fatalf("alice's task after bob's probes: %+v, %v", st, err)
	}
}
