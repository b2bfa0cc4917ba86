package tasks_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

const (
	alice      = "alice@example.test"
	aliceRoute = "alice@example.test/laptop"
	mallory    = "mallory@example.test"
	weather    = "weather@agents.example.test"
	other      = "other@agents.example.test"
	version    = "1.4.0"
)

var t0 = time.Date(2026, 7, 27, 19, 14, 1, 0, time.UTC)

// testClock is a fake clock whose timers can be switched off, so the
// commit-boundary checks can be tested without a timer settling first.
type testClock struct {
	*clock.Fake
	timersOff atomic.Bool
}

type noTimer struct{}

func (noTimer) Stop() bool { return false }

func (c *testClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if c.timersOff.Load() {
		return noTimer{}
	}
	return c.Fake.AfterFunc(d, f)
}

const cityInput = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
const summaryOutput = `{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`

func weatherManifest(ver string) *directory.Manifest {
	return taskstest.Manifest(weather, ver,
		taskstest.ToolSpec{Name: "forecast.get", InputSchema: cityInput, OutputSchema: summaryOutput,
			Ext: directory.ToolExt{MaximumTimeoutSeconds: 120, DefaultTimeoutSeconds: 30}},
		taskstest.ToolSpec{Name: "echo"},
		taskstest.ToolSpec{Name: "approve.me", Ext: directory.ToolExt{ApprovalRequired: true}},
		taskstest.ToolSpec{Name: "perm.me", Ext: directory.ToolExt{RequiredPermissions: []string{"weather.read", "weather.write"}}},
	)
}

type harness struct {
	t     testing.TB
	path  string
	db    harnessDB
	clk   *testClock
	dir   *taskstest.Directory
	pol   *taskstest.Policy
	apr   *taskstest.Approvals
	exec  *taskstest.Executor
	rec   *taskstest.Recorder
	eng   *tasks.Engine
	m     *directory.Manifest
	cfg   tasks.Config
	noBkd atomic.Bool
	// wrap, when set, wraps the store's driver (fault injection).
	wrap func(taskdb.Driver) taskdb.Driver
	// restarted: the recorder saw only events since the last open.
	restarted bool
}

type option func(*tasks.Config)

func newHarness(t testing.TB, opts ...option) *harness {
	t.Helper()
	return newHarnessAt(t, filepath.Join(t.TempDir(), "agentgw.db"), opts...)
}

// newHarnessAt starts an engine on the database file at path.
func newHarnessAt(t testing.TB, path string, opts ...option) *harness {
	t.Helper()
	h := &harness{
		t:    t,
		path: path,
		clk:  &testClock{Fake: clock.NewFake(t0)},
		dir:  taskstest.NewDirectory(),
		pol:  taskstest.NewPolicy([2]string{alice, weather}, [2]string{mallory, other}),
		apr:  taskstest.NewApprovals(),
		exec: taskstest.New(tasks.Features{Progress: true, Cancel: true, Input: true}),
		rec:  taskstest.NewRecorder(),
		m:    weatherManifest(version),
	}
	h.dir.Add(h.m, true)
	h.dir.Add(taskstest.Manifest(other, "1", taskstest.ToolSpec{Name: "echo"}), true)
	h.cfg = tasks.Config{
		Directory: h.dir,
		Policy:    h.pol,
		Backends: func(endpoint string) (tasks.Backend, bool) {
			if h.noBkd.Load() || (endpoint != weather && endpoint != other) {
				return nil, false
			}
			return h.exec, true
		},
		Notifier:  h.rec,
		Clock:     h.clk,
		Approvals: h.apr,
	}
	for _, o := range opts {
		o(&h.cfg)
	}
	h.open()
	t.Cleanup(func() {
		if h.eng != nil {
			h.eng.Close()
		}
		if h.db != nil {
			h.db.Close()
		}
	})
	return h
}

// open opens the store and starts a fresh engine on it.
func (h *harness) open() {
	h.t.Helper()
	cfg := h.cfg
	if pgMode() {
		// AGENTGW_TASKS_DRIVER=postgres: the same tests on store/pg, one
		// database per harness path (a restart reopens it).
		db := openPG(h.t, h.path)
		h.db, cfg.Driver = pgHarnessDB{db}, pg.NewTasks(db)
	} else {
		db, err := sqlite.Open(context.Background(), h.path)
		if err != nil {
			h.t.Fatal(err)
		}
		h.db, cfg.Driver = db, sqlite.NewTasks(db)
	}
	if h.wrap != nil {
		cfg.Driver = h.wrap(cfg.Driver)
	}
	eng, err := tasks.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.eng = eng
	if err := eng.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// crash abandons the engine without settling anything and closes the store.
func (h *harness) crash() {
	tasks.Abandon(h.eng)
	h.db.Close()
	h.eng, h.db = nil, nil
}

func (h *harness) inv(tool, args string) tasks.Invocation {
	return tasks.Invocation{
		Caller: alice, Route: aliceRoute, Endpoint: weather, RequestID: ids.New("req-"),
		Tool: tool, APIVersion: version, ManifestHash: h.m.Hash, Arguments: []byte(args),
		MediaType: "application/json",
	}
}

func (h *harness) admit(inv tasks.Invocation) tasks.Accepted {
	h.t.Helper()
	acc, err := h.eng.Admit(context.Background(), inv)
	if err != nil {
		h.t.Fatalf("admit: %v", err)
	}
	return acc
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (h *harness) terminal(id string) tasks.Event {
	h.t.Helper()
	ev, err := h.rec.Terminal(ctxT(h.t), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return ev
}

func (h *harness) waitType(id string, typ agentproto.EventType) tasks.Event {
	h.t.Helper()
	ev, err := h.rec.Wait(ctxT(h.t), id, typ)
	if err != nil {
		h.t.Fatal(err)
	}
	return ev
}

func (h *harness) state(id string) *tasks.Snapshot {
	h.t.Helper()
	s, err := h.eng.State(context.Background(), alice, weather, id)
	if err != nil {
		h.t.Fatalf("state: %v", err)
	}
	return s
}

// waitState polls committed state until the task reaches st.
func (h *harness) waitState(id string, st agentproto.State) *tasks.Snapshot {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := h.state(id)
		if s.State == st {
			return s
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("task stayed %s, want %s", s.State, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func wantErr(t testing.TB, err, cond error) {
	t.Helper()
	if !errors.Is(err, cond) {
		t.Fatalf("err = %v, want %v", err, cond)
	}
}

// checkHistory verifies the committed history of a task: revisions 1..n
// with no gap, one event each, unique valid event IDs, every payload valid
// against the normative lifecycle schema, the state's revision equal to
// the last event's, the result equal to the terminal event's payload, and
// the notifier having seen exactly the stored events in order.
func (h *harness) checkHistory(id string) []tasks.StoredEvent {
	h.t.Helper()
	evs, err := h.eng.Events(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	lc, err := tasks.NewLifecycle()
	if err != nil {
		h.t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, ev := range evs {
		if ev.Revision != int64(i+1) {
			h.t.Fatalf("event %d has revision %d: gap", i, ev.Revision)
		}
		if !ids.Valid(ev.EventID) || seen[ev.EventID] {
			h.t.Fatalf("bad or repeated event id %q", ev.EventID)
		}
		seen[ev.EventID] = true
		if err := lc.ValidateJSON(ev.Type, ev.Payload); err != nil {
			h.t.Fatalf("revision %d %s payload invalid: %v: %s", ev.Revision, ev.Type, err, ev.Payload)
		}
	}
	s := h.state(id)
	if s.Revision != int64(len(evs)) {
		h.t.Fatalf("state revision %d, %d events", s.Revision, len(evs))
	}
	if s.State.Terminal() {
		last := evs[len(evs)-1]
		if string(last.Type) != string(s.State) {
			h.t.Fatalf("last event %s, state %s", last.Type, s.State)
		}
		res, err := h.eng.Result(context.Background(), alice, weather, id)
		if err != nil {
			h.t.Fatal(err)
		}
		if !bytes.Equal(res.Payload, last.Payload) || res.Revision != last.Revision || res.State != s.State {
			h.t.Fatalf("result %s@%d differs from terminal event", res.State, res.Revision)
		}
		if !s.ResultAvailable {
			h.t.Fatal("terminal state without result-available")
		}
	}
	// Notifications follow commits asynchronously; wait for all of them.
	// After a restart only the events committed since were notified.
	if h.restarted {
		return evs
	}
	if len(evs) > 0 {
		if _, err := h.rec.WaitRevision(ctxT(h.t), id, int64(len(evs))); err != nil {
			h.t.Fatal(err)
		}
	}
	got := h.rec.Events(id)
	if len(got) != len(evs) {
		h.t.Fatalf("notified %d events, stored %d", len(got), len(evs))
	}
	for i := range got {
		if got[i].EventID != evs[i].EventID || got[i].Revision != evs[i].Revision || !bytes.Equal(got[i].Payload, evs[i].Payload) {
			h.t.Fatalf("notification %d differs from stored event", i)
		}
		if got[i].Route != aliceRoute || got[i].Caller != alice || got[i].Endpoint != weather {
			h.t.Fatalf("notification %d addressed to %s/%s from %s", i, got[i].Route, got[i].Caller, got[i].Endpoint)
		}
	}
	return evs
}

func types(evs []tasks.StoredEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Type)+":"+string(statusOf(e)))
	}
	return out
}

func statusOf(e tasks.StoredEvent) string {
	if e.Type == agentproto.EventStatus {
		s, _ := taskstest.Field(e.Payload, "state").(string)
		return s
	}
	return ""
}
