package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

func TestAdmitRunsAndCompletes(t *testing.T) {
	h := newHarness(t)
	inv := h.inv("forecast.get", `{ "city" : "Riga" }`)
	h.exec.Script("forecast.get",
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(50), Stage: "fetch", Message: "Forecast received"}},
		taskstest.Step{Complete: &tasks.ToolResult{
			Content:           json.RawMessage(`[{"type":"text","text":"Light rain, 18 C"}]`),
			StructuredContent: json.RawMessage(`{"summary":"Light rain, 18 C"}`),
			IsError:           new(bool),
		}})
	acc := h.admit(inv)
	if !ids.Valid(acc.TaskID) || acc.RequestID != inv.RequestID || acc.Revision != 0 {
		t.Fatalf("accepted = %+v", acc)
	}
	if !acc.Created.Equal(t0) || !acc.RetainUntil.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("created %v retain-until %v", acc.Created, acc.RetainUntil)
	}
	ev := h.terminal(acc.TaskID)
	if ev.Type != agentproto.EventCompleted {
		t.Fatalf("terminal %s: %s", ev.Type, ev.Payload)
	}
	want := `{"result":{"content":[{"text":"Light rain, 18 C","type":"text"}],"isError":false,"structuredContent":{"summary":"Light rain, 18 C"}}}`
	if string(ev.Payload) != want {
		t.Fatalf("payload %s", ev.Payload)
	}
	evs := h.checkHistory(acc.TaskID)
	got := strings.Join(types(evs), " ")
	if got != "status:running progress: completed:" {
		t.Fatalf("history %s", got)
	}
	if string(evs[1].Payload) != `{"message":"Forecast received","percent":50,"stage":"fetch"}` {
		t.Fatalf("progress %s", evs[1].Payload)
	}
	calls := h.exec.Calls()
	if len(calls) != 1 || string(calls[0].Arguments) != `{"city":"Riga"}` || calls[0].Caller != alice ||
		calls[0].Version != version || calls[0].ManifestHash != h.m.Hash {
		t.Fatalf("calls %+v", calls)
	}
	// The tool's defaultTimeoutSeconds (30) applies without an invoke deadline.
	s := h.state(acc.TaskID)
	if s.Deadline != "2026-07-27T19:14:31Z" || s.APIVersion != version || s.ManifestHash != h.m.Hash || s.Endpoint != weather {
		t.Fatalf("snapshot %+v", s)
	}
	if ok, err := h.eng.VersionReferenced(weather, version); err != nil || !ok {
		t.Fatalf("version referenced = %v, %v", ok, err)
	}
	if ok, _ := h.eng.VersionReferenced(weather, "9.9"); ok {
		t.Fatal("unused version referenced")
	}
}

// Authorization precedes every other answer: an unauthorized caller learns
// nothing about the endpoint, version, hash, tool or arguments.
func TestAdmitUnauthorizedIsNotFound(t *testing.T) {
	h := newHarness(t)
	cases := map[string]func(*tasks.Invocation){
		"unauthorized caller":           func(i *tasks.Invocation) { i.Caller = mallory },
		"unauthorized with bad args":    func(i *tasks.Invocation) { i.Caller = mallory; i.Arguments = []byte(`{"x":1}`) },
		"unauthorized with stale hash":  func(i *tasks.Invocation) { i.Caller = mallory; i.ManifestHash = "AAAA" },
		"unauthorized with no backend":  func(i *tasks.Invocation) { i.Caller = mallory; i.Endpoint = "nobody@agents.example.test" },
		"unknown endpoint":              func(i *tasks.Invocation) { i.Endpoint = "nobody@agents.example.test" },
		"unknown tool":                  func(i *tasks.Invocation) { i.Tool = "forecast.set" },
		"unknown version":               func(i *tasks.Invocation) { i.APIVersion = "9.9.9" },
		"authorized elsewhere only":     func(i *tasks.Invocation) { i.Caller = mallory; i.Endpoint = weather },
		"approval without policy grant": func(i *tasks.Invocation) { i.Tool = "approve.me"; i.Arguments = []byte(`{}`) },
		"permission without grant":      func(i *tasks.Invocation) { i.Tool = "perm.me"; i.Arguments = []byte(`{}`) },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			inv := h.inv("forecast.get", `{"city":"Riga"}`)
			mut(&inv)
			_, err := h.eng.Admit(context.Background(), inv)
			wantErr(t, err, tasks.ErrNotFound)
		})
	}
	if n := len(h.exec.Calls()); n != 0 {
		t.Fatalf("%d executions", n)
	}
}

func TestAdmitApprovalAndPermissionsFailClosed(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) { c.Approvals = nil })
	_, err := h.eng.Admit(context.Background(), h.inv("approve.me", `{}`))
	wantErr(t, err, tasks.ErrNotFound)

	h2 := newHarness(t)
	h2.apr.Approve(alice, weather, "approve.me")
	h2.admit(h2.inv("approve.me", `{}`))
	h2.apr.Grant(alice, "weather.read")
	_, err = h2.eng.Admit(context.Background(), h2.inv("perm.me", `{}`))
	wantErr(t, err, tasks.ErrNotFound) // one of two permissions is not enough
	h2.apr.Grant(alice, "weather.write")
	h2.admit(h2.inv("perm.me", `{}`))
}

func TestAdmitRejections(t *testing.T) {
	h := newHarness(t)
	old := weatherManifest("1.3.0")
	h.dir.Add(old, false)
	cases := []struct {
		name string
		mut  func(*tasks.Invocation)
		want error
	}{
		{"bad request id", func(i *tasks.Invocation) { i.RequestID = "short" }, tasks.ErrBadRequest},
		{"request id alphabet", func(i *tasks.Invocation) { i.RequestID = strings.Repeat("a", 21) + "/" }, tasks.ErrBadRequest},
		{"bad version", func(i *tasks.Invocation) { i.APIVersion = "1 4" }, tasks.ErrBadRequest},
		{"empty tool", func(i *tasks.Invocation) { i.Tool = "" }, tasks.ErrBadRequest},
		{"bad deadline", func(i *tasks.Invocation) { i.Deadline = "tomorrow" }, tasks.ErrBadRequest},
		{"inactive version", func(i *tasks.Invocation) { i.APIVersion = "1.3.0"; i.ManifestHash = old.Hash }, tasks.ErrConflict},
		{"stale hash", func(i *tasks.Invocation) { i.ManifestHash = old.Hash }, tasks.ErrConflict},
		{"media type", func(i *tasks.Invocation) { i.MediaType = "text/plain" }, tasks.ErrNotAcceptable},
		{"schema", func(i *tasks.Invocation) { i.Arguments = []byte(`{"city":7}`) }, tasks.ErrNotAcceptable},
		{"extra member", func(i *tasks.Invocation) { i.Arguments = []byte(`{"city":"a","x":1}`) }, tasks.ErrNotAcceptable},
		{"duplicate key", func(i *tasks.Invocation) { i.Arguments = []byte(`{"city":"a","city":"b"}`) }, tasks.ErrNotAcceptable},
		{"lone surrogate", func(i *tasks.Invocation) { i.Arguments = []byte(`{"city":"\ud800"}`) }, tasks.ErrNotAcceptable},
		{"not json", func(i *tasks.Invocation) { i.Arguments = []byte(`{"city":`) }, tasks.ErrNotAcceptable},
		{"too large", func(i *tasks.Invocation) {
			i.Arguments = []byte(`{"city":"` + strings.Repeat("x", 2<<20) + `"}`)
		}, tasks.ErrResourceConstraint},
		{"too deep", func(i *tasks.Invocation) {
			i.Arguments = []byte(strings.Repeat("[", 100) + strings.Repeat("]", 100))
		}, tasks.ErrResourceConstraint},
		{"deadline passed", func(i *tasks.Invocation) { i.Deadline = "2026-07-27T19:14:00Z" }, tasks.ErrNotAcceptable},
		{"deadline now", func(i *tasks.Invocation) { i.Deadline = "2026-07-27T19:14:01Z" }, tasks.ErrNotAcceptable},
		{"deadline now with offset", func(i *tasks.Invocation) { i.Deadline = "2026-07-27T21:14:01.000+02:00" }, tasks.ErrNotAcceptable},
		{"deadline beyond maximum", func(i *tasks.Invocation) { i.Deadline = "2026-07-27T19:16:01.0000000001Z" }, tasks.ErrNotAcceptable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inv := h.inv("forecast.get", `{"city":"Riga"}`)
			c.mut(&inv)
			_, err := h.eng.Admit(context.Background(), inv)
			wantErr(t, err, c.want)
		})
	}
	h.dir.Activate(weather, "")
	_, err := h.eng.Admit(context.Background(), h.inv("forecast.get", `{"city":"Riga"}`))
	wantErr(t, err, tasks.ErrConflict) // deactivated: no active version to pin
	h.dir.Activate(weather, version)
	h.noBkd.Store(true)
	_, err = h.eng.Admit(context.Background(), h.inv("forecast.get", `{"city":"Riga"}`))
	wantErr(t, err, tasks.ErrServiceUnavailable)

	// Nothing was admitted: no version is pinned by a task.
	if ok, _ := h.eng.VersionReferenced(weather, version); ok {
		t.Fatal("a rejected invocation created a task")
	}
	if n := len(h.exec.Calls()); n != 0 {
		t.Fatalf("%d executions", n)
	}
}

// Deadlines are compared as exact instants: offsets applied, every
// fractional digit kept, equality counting as reached.
func TestAdmitDeadlineBoundaries(t *testing.T) {
	h := newHarness(t)
	h.clk.timersOff.Store(true)
	h.exec.Script("forecast.get", taskstest.Step{Gate: make(chan struct{})})
	ok := []string{
		"2026-07-27T19:14:01.0000000001Z",     // a tenth of a nanosecond after now
		"2026-07-27T21:14:01.000000001+02:00", // one nanosecond after, offset
		"2026-07-27T19:16:01Z",                // exactly the 120 s maximum
		"2026-07-27T19:16:00.9999999999999Z",  // just inside the maximum
	}
	for _, d := range ok {
		inv := h.inv("forecast.get", `{"city":"Riga"}`)
		inv.Deadline = d
		acc := h.admit(inv)
		s := h.state(acc.TaskID)
		if s.Deadline == "" || strings.ContainsAny(s.Deadline, "+") {
			t.Fatalf("deadline %q stored as %q", d, s.Deadline)
		}
	}
	inv := h.inv("forecast.get", `{"city":"Riga"}`)
	inv.Deadline = "2026-07-27T19:14:01.0000000001Z"
	acc := h.admit(inv)
	if s := h.state(acc.TaskID); s.Deadline != "2026-07-27T19:14:01.0000000001Z" {
		t.Fatalf("deadline digits lost: %q", s.Deadline)
	}
}

// A lost IQ result is retried with the same request: the original
// acceptance comes back, nothing runs twice, and any difference in the
// fingerprint is a conflict.
func TestAdmitReplay(t *testing.T) {
	h := newHarness(t)
	inv := h.inv("forecast.get", `{"city":"Riga"}`)
	inv.Deadline = "2026-07-27T19:15:00Z"
	inv.Extensions = map[string]string{"urn:example:sec": "a"}
	first := h.admit(inv)
	if first.Replay {
		t.Fatalf("first admission reported as a replay: %+v", first)
	}
	h.terminal(first.TaskID)
	// The retry gets the original acceptance, marked as a replay (the
	// metrics count it as one).
	replay := first
	replay.Replay = true

	h.clk.Advance(30 * time.Second)
	again := inv
	again.Arguments = []byte(`{"city" : "Riga"}`)                // same canonical arguments
	again.Deadline = "2026-07-27T21:15:00.000+02:00"             // same instant
	again.Route = "alice@example.test/phone"                     // another resource
	again.Extensions = map[string]string{"urn:example:sec": "a"} // same extension
	got := h.admit(again)
	if got != replay {
		t.Fatalf("replay %+v, original %+v", got, first)
	}

	// The replay is recognized even after the deadline passed and the
	// active version changed.
	h.clk.Advance(2 * time.Minute)
	newer := weatherManifest("1.5.0")
	h.dir.Add(newer, true)
	if got := h.admit(again); got != replay {
		t.Fatalf("late replay %+v", got)
	}

	conflicts := map[string]func(*tasks.Invocation){
		"arguments":    func(i *tasks.Invocation) { i.Arguments = []byte(`{"city":"Oslo"}`) },
		"deadline":     func(i *tasks.Invocation) { i.Deadline = "2026-07-27T19:15:00.5Z" },
		"no deadline":  func(i *tasks.Invocation) { i.Deadline = "" },
		"tool":         func(i *tasks.Invocation) { i.Tool = "echo" },
		"extension":    func(i *tasks.Invocation) { i.Extensions = map[string]string{"urn:example:sec": "b"} },
		"no extension": func(i *tasks.Invocation) { i.Extensions = nil },
		"version":      func(i *tasks.Invocation) { i.APIVersion = "1.5.0"; i.ManifestHash = newer.Hash },
	}
	for name, mut := range conflicts {
		t.Run(name, func(t *testing.T) {
			c := inv
			mut(&c)
			_, err := h.eng.Admit(context.Background(), c)
			wantErr(t, err, tasks.ErrConflict)
		})
	}
	if n := len(h.exec.Calls()); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
	// The request ID is scoped to the caller: another caller may use it.
	h.pol.Allow(mallory, weather)
	m := inv
	m.Caller, m.Route = mallory, mallory+"/x"
	m.APIVersion, m.ManifestHash = "1.5.0", newer.Hash
	m.Deadline = ""
	if acc := h.admit(m); acc.TaskID == first.TaskID {
		t.Fatal("request id not scoped to the caller")
	}
}

func TestAdmitConcurrentIdenticalRunsOnce(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	h.exec.Script("echo", taskstest.Step{Gate: gate}, taskstest.Step{Echo: true})
	inv := h.inv("echo", `{"n":1}`)
	const n = 100
	var wg sync.WaitGroup
	res := make([]tasks.Accepted, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			res[i], errs[i] = h.eng.Admit(context.Background(), inv)
		}(i)
	}
	close(start)
	wg.Wait()
	// Exactly one admission committed the task; every other one is its
	// replay.
	fresh := 0
	for i := range res {
		if errs[i] != nil {
			t.Fatalf("admit %d: %v", i, errs[i])
		}
		if !res[i].Replay {
			fresh++
		}
		a, b := res[i], res[0]
		a.Replay, b.Replay = false, false
		if a != b {
			t.Fatalf("admit %d returned %+v, admit 0 %+v", i, res[i], res[0])
		}
	}
	if fresh != 1 {
		t.Fatalf("%d of %d concurrent identical admissions were not replays, want 1", fresh, n)
	}
	close(gate)
	h.terminal(res[0].TaskID)
	h.checkHistory(res[0].TaskID)
	if calls := h.exec.Calls(); len(calls) != 1 {
		t.Fatalf("%d executions, want 1", len(calls))
	}
	// Concurrent requests with different fingerprints: one wins, the rest
	// conflict.
	inv2 := h.inv("echo", `{}`)
	var won, conflicted int
	var mu sync.Mutex
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := inv2
			c.Arguments = []byte(`{"i":` + string(rune('0'+i%10)) + `}`)
			if i%10 == 0 {
				c.Arguments = []byte(`{"i":0}`)
			}
			_, err := h.eng.Admit(context.Background(), c)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won++
			} else if isConflict(err) {
				conflicted++
			} else {
				t.Errorf("admit: %v", err)
			}
		}(i)
	}
	wg.Wait()
	if conflicted < 18 || won+conflicted != 20 {
		t.Fatalf("won %d conflicted %d", won, conflicted)
	}
}

func isConflict(err error) bool { return err != nil && errors.Is(err, tasks.ErrConflict) }

func TestAdmitCapacity(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) { c.MaxActive = 2 })
	gate := make(chan struct{})
	h.exec.Script("echo", taskstest.Step{Gate: gate}, taskstest.Step{Echo: true})
	a := h.admit(h.inv("echo", `{}`))
	b := h.admit(h.inv("echo", `{}`))
	_, err := h.eng.Admit(context.Background(), h.inv("echo", `{}`))
	wantErr(t, err, tasks.ErrResourceConstraint)
	// A replay still answers while full.
	close(gate)
	h.terminal(a.TaskID)
	h.terminal(b.TaskID)
	h.admit(h.inv("echo", `{}`))
}

func TestToolsWithoutOutputSchemaAndDirectoryTypes(t *testing.T) {
	// Guard against the fake manifest drifting from the registered shape.
	m := weatherManifest(version)
	tool, ok := m.Tool("forecast.get")
	if !ok || tool.OutputSchema == nil || tool.Ext.MaximumTimeoutSeconds != 120 {
		t.Fatalf("tool %+v", tool)
	}
	var _ directory.ReferenceChecker = (*tasks.Engine)(nil)
}
