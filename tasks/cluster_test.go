package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// clusterBackend is one backend shared by every instance of a test
// cluster, counting executions per task: the evidence that no task runs
// twice.
type clusterBackend struct {
	mu      sync.Mutex
	runs    map[string]int
	where   map[string]string
	release chan struct{}
}

func newClusterBackend() *clusterBackend {
	return &clusterBackend{runs: map[string]int{}, where: map[string]string{}, release: make(chan struct{})}
}

func (b *clusterBackend) Features() tasks.Features {
	return tasks.Features{Progress: true, Cancel: true, Input: true}
}

func (b *clusterBackend) executions(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[id]
}

// on returns the backend as instance name sees it.
func (b *clusterBackend) on(name string) tasks.Backend { return &instanceBackend{b, name} }

type instanceBackend struct {
	*clusterBackend
	name string
}

// Execute: "echo" completes at once, or with {"ask":1} asks for a city
// and echoes it; "forecast.get" blocks until released, cancelled or cut off.
func (b *instanceBackend) Execute(ctx context.Context, call tasks.Call, run tasks.Run) {
	b.mu.Lock()
	b.runs[call.TaskID]++
	b.where[call.TaskID] = b.name
	b.mu.Unlock()
	switch {
	case call.Tool == "echo" && string(call.Arguments) != `{"ask":1}`:
		run.Complete(*taskstest.Text("ok from " + b.name))
	case call.Tool == "echo": // asks for input
		ans, err := run.RequestInput(ctx, tasks.InputRequest{Question: "city?", Schema: json.RawMessage(cityInput)})
		if err != nil {
			run.Fail(tasks.Failure{Code: agentproto.CodeInternalError, Message: err.Error()})
			return
		}
		run.Complete(*taskstest.Text("answer " + string(ans)))
	default:
		select {
		case <-b.release:
			run.Complete(tasks.ToolResult{Content: json.RawMessage(`[]`), StructuredContent: json.RawMessage(`{"summary":"done"}`)})
		case <-run.CancelRequested():
			run.Cancelled("asked")
		case <-ctx.Done():
		}
	}
}

type member struct {
	name string
	eng  *tasks.Engine
	rec  *taskstest.Recorder
	db   *pg.DB
	bus  *pg.Cluster
	pool *pgxpool.Pool
}

type testCluster struct {
	t       testing.TB
	dsn     string
	be      *clusterBackend
	dir     *taskstest.Directory
	m       member
	members []*member
	// mutate adjusts each member's engine config (benchmarks lift limits).
	mutate func(*tasks.Config)
}

func newTestCluster(t testing.TB) *testCluster {
	return newTestClusterOn(t, pgharness.Start(t))
}

func newTestClusterOn(t testing.TB, srv *pgharness.Server) *testCluster {
	c := &testCluster{t: t, dsn: srv.NewDatabase(t), be: newClusterBackend(), dir: taskstest.NewDirectory()}
	c.dir.Add(weatherManifest(version), true)
	return c
}

// start adds an instance; limit bounds its running tasks per backend.
func (c *testCluster) start(name string, limit int, hold bool) *member {
	return c.startWith(name, limit, hold, nil)
}

func (c *testCluster) startWith(name string, limit int, hold bool, ownerOf func(string) string) *member {
	return c.startFull(name, limit, hold, ownerOf, nil)
}

func (c *testCluster) startFull(name string, limit int, hold bool, ownerOf func(string) string, lost func()) *member {
	t := c.t
	ctx := context.Background()
	db, err := pg.Open(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	bus, err := pg.OpenCluster(ctx, db.Pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &member{name: name, rec: taskstest.NewRecorder(), db: db, bus: bus}
	cfg := tasks.Config{
		Driver: pg.NewTasks(db), Directory: c.dir,
		Policy:   taskstest.NewPolicy([2]string{alice, weather}),
		Backends: func(string) (tasks.Backend, bool) { return c.be.on(name), true },
		Notifier: m.rec, MaxRunningPerBackend: limit,
		// A 3 s lease: with 900 ms a loaded 2-core runner stalled a
		// renewal past the lease now and then, fencing a member mid-test
		// ("engine not running"); takeovers still follow within 4 s.
		Cluster: &tasks.ClusterConfig{Instance: name, Bus: bus, LeaseTTL: 3 * time.Second,
			OwnerOf: ownerOf, OnLeaseLost: lost},
	}
	if c.mutate != nil {
		c.mutate(&cfg)
	}
	m.eng, err = tasks.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tasks.HoldDispatch(m.eng, hold)
	if err := m.eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.members = append(c.members, m)
	t.Cleanup(func() {
		m.eng.Close()
		bus.Close()
		db.Close()
	})
	return m
}

// crash stops m as kill -9 would: nothing settled, the lease left to expire.
func (c *testCluster) crash(m *member) { tasks.Abandon(m.eng) }

func (c *testCluster) inv(tool, args string) tasks.Invocation {
	return tasks.Invocation{
		Caller: alice, Route: aliceRoute, Endpoint: weather, RequestID: ids.New("req-"),
		Tool: tool, APIVersion: version, ManifestHash: weatherManifest(version).Hash, Arguments: []byte(args),
		MediaType: "application/json",
	}
}

// settled waits until every task is terminal in the store and returns the
// final snapshots.
func (c *testCluster) settled(on *member, ids []string) map[string]*tasks.Snapshot {
	c.t.Helper()
	out := map[string]*tasks.Snapshot{}
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			s, err := on.eng.State(context.Background(), alice, weather, id)
			if err != nil {
				c.t.Fatal(err)
			}
			if s.State.Terminal() {
				out[id] = s
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("task %s still %s", id, s.State)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out
}

// noGap checks that a task's events are revisions 1..n, one each.
func (c *testCluster) noGap(on *member, id string, final int64) {
	c.t.Helper()
	evs, err := on.eng.Events(context.Background(), id)
	if err != nil {
		c.t.Fatal(err)
	}
	if int64(len(evs)) != final {
		c.t.Fatalf("task %s: %d events for revision %d", id, len(evs), final)
	}
	for i, ev := range evs {
		if ev.Revision != int64(i+1) {
			c.t.Fatalf("task %s: event %d has revision %d", id, i, ev.Revision)
		}
	}
}

func failureCode(payload []byte) (string, bool) {
	var v struct {
		Error struct {
			Code      string `json:"code"`
			Retryable bool   `json:"retryable"`
		} `json:"error"`
	}
	json.Unmarshal(payload, &v)
	return v.Error.Code, v.Error.Retryable
}

// A crashed instance's running tasks settle interrupted and its accepted
// ones run once on a survivor; none runs twice, every revision is there.
func TestClusterTakeOver(t *testing.T) {
	c := newTestCluster(t)
	a := c.start("gw-a", 3, false)
	b := c.start("gw-b", 0, false)
	c.start("gw-c", 0, false)
	var running, waiting []string
	for i := range 3 {
		acc, err := a.eng.Admit(context.Background(), c.inv("forecast.get", fmt.Sprintf(`{"city":"c%d"}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, acc.TaskID)
	}
	for range 3 {
		<-waitExec(c.be, running)
		break
	}
	for range 20 {
		acc, err := a.eng.Admit(context.Background(), c.inv("echo", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, acc.TaskID)
	}
	// The three running tasks hold a's backend limit; the twenty wait.
	for _, id := range waiting {
		if n := c.be.executions(id); n != 0 {
			t.Fatalf("held task %s executed %d times before the crash", id, n)
		}
	}
	c.crash(a)
	final := c.settled(b, append(append([]string{}, running...), waiting...))
	for _, id := range running {
		s := final[id]
		r, _ := b.eng.Result(context.Background(), alice, weather, id)
		code, retry := failureCode(r.Payload)
		if s.State != agentproto.StateFailed || code != agentproto.CodeInterrupted || !retry {
			t.Fatalf("running task %s: %s %s retryable=%v", id, s.State, code, retry)
		}
		if n := c.be.executions(id); n != 1 {
			t.Fatalf("running task %s executed %d times", id, n)
		}
		c.noGap(b, id, s.Revision)
	}
	for _, id := range waiting {
		s := final[id]
		if s.State != agentproto.StateCompleted {
			t.Fatalf("accepted task %s: %s", id, s.State)
		}
		if n := c.be.executions(id); n != 1 {
			t.Fatalf("accepted task %s executed %d times", id, n)
		}
		c.noGap(b, id, s.Revision)
	}
	if got := c.members[1].eng.TakenOver() + c.members[2].eng.TakenOver(); got != 23 {
		t.Fatalf("survivors took over %d tasks, want 23", got)
	}
}

// waitExec returns a channel closed once every id has executed.
func waitExec(b *clusterBackend, ids []string) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			all := true
			for _, id := range ids {
				if b.executions(id) == 0 {
					all = false
				}
			}
			if all {
				close(ch)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return ch
}

// Cancel and provide-input committed on an instance that does not own the
// task reach the owner's backend call at once.
func TestClusterSignalsViaNonOwner(t *testing.T) {
	c := newTestCluster(t)
	a := c.start("gw-a", 0, false)
	b := c.start("gw-b", 0, false)
	ctx := context.Background()

	blocked, err := a.eng.Admit(ctx, c.inv("forecast.get", `{"city":"Paris"}`))
	if err != nil {
		t.Fatal(err)
	}
	<-waitExec(c.be, []string{blocked.TaskID})
	s, _ := b.eng.State(ctx, alice, weather, blocked.TaskID)
	if _, _, err := b.eng.Cancel(ctx, tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: blocked.TaskID, ExpectedRevision: s.Revision}); err != nil {
		t.Fatal(err)
	}
	if fin := c.settled(a, []string{blocked.TaskID})[blocked.TaskID]; fin.State != agentproto.StateCancelled {
		t.Fatalf("cancelled through b: %s", fin.State)
	}

	asking, err := a.eng.Admit(ctx, c.inv("echo", `{"ask":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var snap *tasks.Snapshot
	for deadline := time.Now().Add(20 * time.Second); ; {
		snap, _ = b.eng.State(ctx, alice, weather, asking.TaskID)
		if snap.State == agentproto.StateInputRequired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task never asked for input: %s", snap.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var req struct {
		RequestID string `json:"requestId"`
	}
	json.Unmarshal(snap.PendingInput, &req)
	if _, _, err := b.eng.ProvideInput(ctx, tasks.InputSubmission{Caller: alice, Endpoint: weather, TaskID: asking.TaskID,
		RequestID: req.RequestID, ExpectedRevision: snap.Revision, MediaType: "application/json", Input: []byte(`{"city":"Oslo"}`)}); err != nil {
		t.Fatal(err)
	}
	if fin := c.settled(a, []string{asking.TaskID})[asking.TaskID]; fin.State != agentproto.StateCompleted {
		t.Fatalf("answered through b: %s", fin.State)
	}
	r, _ := a.eng.Result(ctx, alice, weather, asking.TaskID)
	if !strings.Contains(string(r.Payload), `Oslo`) {
		t.Fatalf("the owner's call did not get the answer: %s", r.Payload)
	}

	// An accepted, never dispatched task cancelled through b settles
	// cancelled on its owner without calling the backend.
	tasks.HoldDispatch(a.eng, true)
	held, err := a.eng.Admit(ctx, c.inv("echo", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.eng.Cancel(ctx, tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: held.TaskID}); err != nil {
		t.Fatal(err)
	}
	if fin := c.settled(b, []string{held.TaskID})[held.TaskID]; fin.State != agentproto.StateCancelled || c.be.executions(held.TaskID) != 0 {
		t.Fatalf("held task cancelled through b: %s, %d executions", fin.State, c.be.executions(held.TaskID))
	}
}

// The same request-id admitted on two instances at once is one task.
func TestClusterReplayAcrossInstances(t *testing.T) {
	c := newTestCluster(t)
	a := c.start("gw-a", 0, false)
	b := c.start("gw-b", 0, false)
	for range 20 {
		inv := c.inv("echo", `{}`)
		var (
			wg   sync.WaitGroup
			accs [2]tasks.Accepted
			errs [2]error
		)
		for i, m := range []*member{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); accs[i], errs[i] = m.eng.Admit(context.Background(), inv) }()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || accs[0].TaskID != accs[1].TaskID {
			t.Fatalf("one request-id on two instances: %+v %v / %+v %v", accs[0], errs[0], accs[1], errs[1])
		}
		c.settled(a, []string{accs[0].TaskID})
		if n := c.be.executions(accs[0].TaskID); n != 1 {
			t.Fatalf("replayed task executed %d times", n)
		}
	}
}

// A task for an endpoint whose connection another instance holds is owned
// and executed there from admission on.
func TestClusterRoutedToHolder(t *testing.T) {
	c := newTestCluster(t)
	a := c.startWith("gw-a", 0, false, func(string) string { return "gw-b" })
	b := c.start("gw-b", 0, false)
	var ids []string
	for range 5 {
		acc, err := a.eng.Admit(context.Background(), c.inv("echo", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, acc.TaskID)
	}
	for id, s := range c.settled(a, ids) {
		c.be.mu.Lock()
		where := c.be.where[id]
		c.be.mu.Unlock()
		if s.State != agentproto.StateCompleted || where != "gw-b" || c.be.executions(id) != 1 {
			t.Fatalf("routed task %s: %s on %q, %d executions", id, s.State, where, c.be.executions(id))
		}
	}
	_ = b
}

// An instance whose lease expired while it still ran (cut off from the
// database, frozen) is fenced: its next renewal fails, it stops executing
// and says so, and a survivor settles its tasks, none run twice.
func TestClusterFencing(t *testing.T) {
	c := newTestCluster(t)
	lost := make(chan struct{})
	a := c.startFull("gw-a", 0, false, nil, func() { close(lost) })
	b := c.start("gw-b", 0, false)
	acc, err := a.eng.Admit(context.Background(), c.inv("forecast.get", `{"city":"Rome"}`))
	if err != nil {
		t.Fatal(err)
	}
	<-waitExec(c.be, []string{acc.TaskID})
	// The lease runs out under a's feet.
	if err := pg.NewTasks(b.db).Leave(context.Background(), "gw-a"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(20 * time.Second):
		t.Fatal("a never noticed that its lease was gone")
	}
	if _, err := a.eng.Admit(context.Background(), c.inv("echo", `{}`)); err == nil {
		t.Fatal("a fenced instance still admits")
	}
	fin := c.settled(b, []string{acc.TaskID})[acc.TaskID]
	r, _ := b.eng.Result(context.Background(), alice, weather, acc.TaskID)
	if code, _ := failureCode(r.Payload); fin.State != agentproto.StateFailed || code != agentproto.CodeInterrupted || c.be.executions(acc.TaskID) != 1 {
		t.Fatalf("the fenced instance's task: %s %s, %d executions", fin.State, code, c.be.executions(acc.TaskID))
	}
}
