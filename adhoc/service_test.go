package adhoc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/xep/xmltree"
)

const (
	weather = "weather@agents.example"
	alice   = "alice@example.net"
	bob     = "bob@example.net"
)

type env struct {
	t   *testing.T
	eng *tasks.Engine
	dir *taskstest.Directory
	pol *taskstest.Policy
	s   *Service

	progress *ProgressCache
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	dir := taskstest.NewDirectory()
	ext := directory.ToolExt{SupportsCancellation: true, SupportsInput: true}
	dir.Add(taskstest.Manifest(weather, "1", taskstest.ToolSpec{Name: "echo",
		InputSchema: `{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`},
		taskstest.ToolSpec{Name: "fail"}, taskstest.ToolSpec{Name: "ask", Ext: ext}, taskstest.ToolSpec{Name: "wait", Ext: ext}, taskstest.ToolSpec{Name: "slow", Ext: ext}), true)
	pol := taskstest.NewPolicy([2]string{alice, weather}, [2]string{bob, weather})
	backend := taskstest.New(tasks.Features{Cancel: true, Input: true})
	backend.Script("fail", taskstest.Step{Fail: &tasks.Failure{Code: "com.example:broken", Message: "The widget broke."}})
	backend.Script("ask", taskstest.Step{Do: func(ctx context.Context, _ tasks.Call, run tasks.Run) error {
		ans, err := run.RequestInput(ctx, tasks.InputRequest{Question: "Which unit?",
			Schema: []byte(`{"type":"object","properties":{"unit":{"enum":["C","F"]}},"required":["unit"]}`)})
		if err != nil {
			return err
		}
		b, _ := json.Marshal("answer " + string(ans))
		return run.Complete(tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":` + string(b) + `}]`)})
	}})
	reason := "stopped"
	backend.Script("wait", taskstest.Step{AwaitCancel: true}, taskstest.Step{Cancelled: &reason})
	backend.Script("slow", taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(40), Stage: "fetch", Message: "2 of 5"}},
		taskstest.Step{AwaitCancel: true}, taskstest.Step{Cancelled: &reason})
	progress := NewProgressCache(0)
	eng, err := tasks.New(tasks.Config{Driver: sqlite.NewTasks(db), Directory: dir, Policy: pol,
		Backends: func(ep string) (tasks.Backend, bool) { return backend, ep == weather }, Notifier: progress})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	e := &env{t: t, eng: eng, dir: dir, pol: pol, progress: progress}
	e.s = e.service()
	return e
}

func (e *env) service() *Service {
	return New(Deps{Reader: e.dir, Policy: e.pol, Engine: e.eng, Progress: e.progress})
}

// cmd sends one command stage as from; fields are submitted when non-nil.
func (e *env) cmd(s *Service, from, node, sid, action string, fields map[string]string) (*xmltree.Element, error) {
	e.t.Helper()
	c := xmltree.New(ns.Commands, "command", "node", node, "action", action)
	if sid != "" {
		c.SetAttr("sessionid", sid)
	}
	if fields != nil {
		x := xmltree.New(ns.Data, "x", "type", "submit")
		for k, v := range fields {
			x.Add(xmltree.New(ns.Data, "field", "var", k).Add(xmltree.New(ns.Data, "value").WithText(v)))
		}
		c.Add(x)
	}
	return s.command(context.Background(), component.IQ{Type: "set", ID: "1",
		From: jid.MustParse(from + "/r"), To: jid.MustParse(weather), Payload: c})
}

func (e *env) until(s *Service, from, sid, status string) *xmltree.Element {
	e.t.Helper()
	return e.untilOn(s, from, "echo", sid, func(r *xmltree.Element) bool { return r.AttrValue("status") == status })
}

func (e *env) untilOn(s *Service, from, node, sid string, pred func(*xmltree.Element) bool) *xmltree.Element {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r, err := e.cmd(s, from, node, sid, "next", nil)
		if err != nil {
			e.t.Fatal(err)
		}
		if pred(r) {
			return r
		}
	}
	e.t.Fatalf("session %s never got there", sid)
	return nil
}

// start runs a command's first stage and submits fields.
func (e *env) start(node string, fields map[string]string) string {
	e.t.Helper()
	r, err := e.cmd(e.s, alice, node, "", "execute", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	sid := r.AttrValue("sessionid")
	if _, err := e.cmd(e.s, alice, node, sid, "complete", fields); err != nil {
		e.t.Fatal(err)
	}
	return sid
}

func noteOf(r *xmltree.Element, typ string) string {
	for _, n := range r.ChildrenNamed(ns.Commands, "note") {
		if n.AttrValue("type") == typ {
			return n.Text
		}
	}
	return ""
}

func TestFailureInputCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sid := e.start("fail", map[string]string{})
	r := e.untilOn(e.s, alice, "fail", sid, func(r *xmltree.Element) bool { return r.AttrValue("status") == "completed" })
	if n := noteOf(r, "error"); !strings.Contains(n, "The widget broke.") || !strings.Contains(n, "com.example:broken") {
		t.Fatalf("failure stage: %s", r)
	}

	sid = e.start("ask", map[string]string{})
	r = e.untilOn(e.s, alice, "ask", sid, func(r *xmltree.Element) bool { return r.Child(ns.Data, "x") != nil })
	x := r.Child(ns.Data, "x")
	if !strings.Contains(x.String(), "Which unit?") || !strings.Contains(x.String(), `type="list-single"`) {
		t.Fatalf("input stage: %s", r)
	}
	var stage string
	for _, f := range x.ChildrenNamed(ns.Data, "field") {
		if f.AttrValue("var") == StageVar {
			stage = f.Child(ns.Data, "value").Text
		}
	}
	if _, _, ok := parseInputStage(stage); !ok {
		t.Fatalf("stage %q", stage)
	}
	if _, err := e.cmd(e.s, alice, "ask", sid, "complete", map[string]string{StageVar: stage, "unit": "K"}); appCondition(err) != "bad-payload" {
		t.Fatalf("an answer outside the options: %v", err)
	}
	answer := map[string]string{StageVar: stage, "unit": "F"}
	if _, err := e.cmd(e.s, alice, "ask", sid, "complete", answer); err != nil {
		t.Fatal(err)
	}
	r = e.untilOn(e.s, alice, "ask", sid, func(r *xmltree.Element) bool { return r.AttrValue("status") == "completed" })
	if !strings.Contains(r.String(), `answer {&#34;unit&#34;:&#34;F&#34;}`) && !strings.Contains(r.String(), `answer {"unit":"F"}`) {
		t.Fatalf("answered task result: %s", r)
	}
	// The answered stage again is replayed; another answer is refused.
	if again, err := e.cmd(e.s, alice, "ask", sid, "complete", answer); err != nil || again.AttrValue("status") != "completed" {
		t.Fatalf("re-submitted answer: %v %v", again, err)
	}
	if _, err := e.cmd(e.s, alice, "ask", sid, "complete", map[string]string{StageVar: stage, "unit": "C"}); !isCond(err, agentproto.CondConflict) {
		t.Fatalf("another answer: %v", err)
	}

	sid = e.start("wait", map[string]string{})
	e.untilOn(e.s, alice, "wait", sid, func(r *xmltree.Element) bool { return strings.Contains(noteOf(r, "info"), "running") })
	c, err := e.cmd(e.s, alice, "wait", sid, "cancel", nil)
	if err != nil || c.AttrValue("status") != "canceled" {
		t.Fatalf("cancel: %v %v", c, err)
	}
	// The task was running: whether the backend stopped before the state
	// was read again or not, this cancel did it, and the note must not
	// say the task had already finished.
	if n := noteOf(c, "info"); !strings.HasPrefix(n, "Cancellation requested") {
		t.Fatalf("the cancel's note: %q", n)
	}
	r = e.untilOn(e.s, alice, "wait", sid, func(r *xmltree.Element) bool { return r.AttrValue("status") == "canceled" })
	if !strings.Contains(noteOf(r, "info"), "was cancelled") {
		t.Fatalf("cancelled stage: %s", r)
	}
}

func appCondition(err error) string {
	se, ok := err.(*agentproto.StanzaError)
	if !ok || se.App == nil {
		return ""
	}
	return se.App.Name.Local
}

func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, err := e.cmd(e.s, alice, "echo", "", "execute", nil)
	if err != nil {
		t.Fatal(err)
	}
	sid := r.AttrValue("sessionid")
	if r.AttrValue("status") != "executing" || r.Child(ns.Data, "x") == nil || !validSessionID(sid) {
		t.Fatalf("first stage: %s", r)
	}
	if _, err := e.cmd(e.s, bob, "echo", sid, "complete", map[string]string{"message": "x"}); appCondition(err) != "bad-sessionid" {
		t.Fatalf("bob submitting alice's first stage: %v", err)
	}
	form := map[string]string{StageVar: "start", "message": "hi"}
	if _, err := e.cmd(e.s, alice, "echo", sid, "complete", form); err != nil {
		t.Fatal(err)
	}
	done := e.until(e.s, alice, sid, "completed")
	if !strings.Contains(done.String(), "hi") {
		t.Fatalf("completed stage lacks the echo: %s", done)
	}
	// The same stage again: the same task (one task, as the store says).
	again, err := e.cmd(e.s, alice, "echo", sid, "complete", form)
	if err != nil || again.AttrValue("status") != "completed" {
		t.Fatalf("re-submitted stage: %v %v", again, err)
	}
	if !strings.Contains(again.String(), taskNote(t, done)) {
		t.Fatalf("re-submission reached another task: %s vs %s", again, done)
	}
	if _, err := e.cmd(e.s, alice, "echo", sid, "complete", map[string]string{StageVar: "start", "message": "other"}); !isCond(err, agentproto.CondConflict) {
		t.Fatalf("other values: %v", err)
	}
	// bob: alice's session is a stale one, with the same error.
	_, stale := e.cmd(e.s, bob, "echo", "cmd-AAAAAAAAAAAAAAAAAAAAAA", "next", nil)
	_, foreign := e.cmd(e.s, bob, "echo", sid, "next", nil)
	if appCondition(stale) != "bad-sessionid" || stale.Error() != foreign.Error() {
		t.Fatalf("foreign %v, stale %v", foreign, stale)
	}
	// A restart: a fresh service finds the submitted session in the task
	// store; an unsubmitted first stage is gone.
	open, err := e.cmd(e.s, alice, "echo", "", "execute", nil)
	if err != nil {
		t.Fatal(err)
	}
	s2 := e.service()
	if r := e.until(s2, alice, sid, "completed"); !strings.Contains(r.String(), taskNote(t, done)) {
		t.Fatalf("after the restart: %s", r)
	}
	if _, err := e.cmd(s2, alice, "echo", open.AttrValue("sessionid"), "next", nil); appCondition(err) != "bad-sessionid" {
		t.Fatalf("unsubmitted stage after the restart: %v", err)
	}
}

func taskNote(t *testing.T, r *xmltree.Element) string {
	t.Helper()
	for _, n := range r.ChildrenNamed(ns.Commands, "note") {
		if f := strings.Fields(n.Text); len(f) > 1 && f[0] == "Task" {
			return f[1]
		}
	}
	t.Fatalf("no task note: %s", r)
	return ""
}

func isCond(err error, c agentproto.Condition) bool {
	se, ok := err.(*agentproto.StanzaError)
	return ok && se.Condition == c
}

func TestNotRunnableOrNotInvocable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if q, _ := e.s.NodeItems(alice, weather, ns.Commands); len(q.Children) != 5 {
		t.Fatalf("alice's commands: %s", q)
	}
	e.pol.Revoke(bob, weather)
	if q, _ := e.s.NodeItems(bob, weather, ns.Commands); len(q.Children) != 0 {
		t.Fatalf("bob without invocation lists %s", q)
	}
	if _, err := e.cmd(e.s, bob, "echo", "", "execute", nil); !isCond(err, agentproto.CondItemNotFound) {
		t.Fatalf("bob executing: %v", err)
	}
	s := New(Deps{Reader: e.dir, Policy: e.pol, Engine: e.eng, Runnable: func(string) bool { return false }})
	if f := s.Features(weather); len(f) != 0 {
		t.Fatalf("features without a backend: %v", f)
	}
	if q, _ := s.NodeItems(alice, weather, ns.Commands); len(q.Children) != 0 {
		t.Fatalf("commands without a backend: %s", q)
	}
	if _, err := e.cmd(e.s, alice, "nope", "", "execute", nil); !isCond(err, agentproto.CondItemNotFound) {
		t.Fatalf("unknown command: %v", err)
	}
	if _, err := e.cmd(e.s, alice, "echo", "", "fly", nil); appCondition(err) != "malformed-action" {
		t.Fatalf("bad action: %v", err)
	}
}

// Progress notes come from the cache fed by the engine's events, and,
// without it (a restart), once from the stored events.
func TestProgressNotes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sid := e.start("slow", map[string]string{})
	want := "Progress: 40% — fetch — 2 of 5."
	e.untilOn(e.s, alice, "slow", sid, func(r *xmltree.Element) bool { return strings.Contains(noteOf(r, "info"), want) })
	if _, ok := e.progress.get(taskNote(t, e.untilOn(e.s, alice, "slow", sid, func(*xmltree.Element) bool { return true }))); !ok {
		t.Fatal("the progress cache has no entry for the running task")
	}
	cold := New(Deps{Reader: e.dir, Policy: e.pol, Engine: e.eng})
	if r, err := e.cmd(cold, alice, "slow", sid, "next", nil); err != nil || !strings.Contains(noteOf(r, "info"), want) {
		t.Fatalf("from the stored events: %v %v", r, err)
	}
	if _, err := e.cmd(e.s, alice, "slow", sid, "cancel", nil); err != nil {
		t.Fatal(err)
	}
	e.untilOn(e.s, alice, "slow", sid, func(r *xmltree.Element) bool { return r.AttrValue("status") == "canceled" })
}

func TestProgressCacheBound(t *testing.T) {
	t.Parallel()
	c := NewProgressCache(2)
	ev := func(id string, typ agentproto.EventType, p string) tasks.Event {
		return tasks.Event{TaskID: id, Type: typ, Payload: []byte(p)}
	}
	c.Notify(ev("a", agentproto.EventProgress, `{"percent":10}`))
	c.Notify(ev("b", agentproto.EventProgress, `{"stage":"x"}`))
	c.Notify(ev("c", agentproto.EventProgress, `{"message":"m"}`))
	if _, ok := c.get("a"); ok {
		t.Error("the oldest entry survived the bound")
	}
	if v, _ := c.get("b"); v != "x" {
		t.Errorf("b = %q", v)
	}
	c.Notify(ev("b", agentproto.EventCompleted, `{}`))
	if _, ok := c.get("b"); ok {
		t.Error("a settled task is still cached")
	}
	c.put("c", "stale", false)
	if v, _ := c.get("c"); v != "m" {
		t.Errorf("a stored value overwrote a newer event: %q", v)
	}
}

// A cancel that meets a progress event's new revision is retried, so an
// answer of "canceled" always means the task was really cancelled (or is
// being cancelled); when the task keeps moving, the caller is told to
// send cancel again instead. Before, the conflict was taken for a
// settlement and "canceled" answered while the task ran on.
func TestCancelRacingProgressIsNeverLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	backend := taskstest.New(tasks.Features{Cancel: true, Input: true})
	reason := "stopped"
	backend.Script("slow", taskstest.Step{Do: func(ctx context.Context, _ tasks.Call, run tasks.Run) error {
		for i := 0; ; i++ {
			select {
			case <-run.CancelRequested():
				return run.Cancelled(reason)
			case <-ctx.Done():
				return ctx.Err()
			default:
			}
			_ = run.Progress(tasks.Progress{Message: fmt.Sprintf("step %d", i)})
		}
	}})
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "race.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng, err := tasks.New(tasks.Config{Driver: sqlite.NewTasks(db), Directory: e.dir, Policy: e.pol, ProgressPerSecond: 100000,
		Backends: func(ep string) (tasks.Backend, bool) { return backend, ep == weather }, Notifier: e.progress})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	e.eng = eng
	e.s = e.service()
	for round := 0; round < 8; round++ {
		sid := e.start("slow", map[string]string{})
		e.untilOn(e.s, alice, "slow", sid, func(r *xmltree.Element) bool { return strings.Contains(noteOf(r, "info"), "step") })
		c, err := e.cmd(e.s, alice, "slow", sid, "cancel", nil)
		if err != nil {
			var se *agentproto.StanzaError
			if !errors.As(err, &se) || se.Condition != agentproto.CondResourceConstraint {
				t.Fatalf("round %d: cancel: %v", round, err)
			}
			continue // told to send cancel again: honest
		}
		if c.AttrValue("status") != "canceled" {
			t.Fatalf("round %d: cancel answered %s", round, c)
		}
		e.untilOn(e.s, alice, "slow", sid, func(r *xmltree.Element) bool {
			return r.AttrValue("status") == "canceled" && strings.Contains(noteOf(r, "info"), "was cancelled")
		})
	}
}
