package tasks_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// crashTasks names the tasks the crashing child leaves in each state.
type crashTasks struct {
	Running, Input, Cancelling, Accepted, Done string
	Revisions                                  map[string]int64
}

// TestCrashChild is the child process of TestCrashRecovery: it drives tasks
// into every non-terminal state, records them, and waits to be killed.
func TestCrashChild(t *testing.T) {
	dbPath := os.Getenv("TASKS_CRASH_DB")
	if dbPath == "" {
		t.Skip("child process of TestCrashRecovery")
	}
	h := newHarnessAt(t, dbPath)
	forever := make(chan struct{})
	h.exec.Script("forecast.get", taskstest.Step{Gate: forever})
	h.exec.Script("echo", inputStep(time.Time{}))
	h.exec.Script("approve.me", taskstest.Step{AwaitCancel: true}, taskstest.Step{Gate: forever})
	h.apr.Approve(alice, weather, "approve.me")
	var ct crashTasks
	ct.Revisions = map[string]int64{}

	h.apr.Grant(alice, "weather.read")
	h.apr.Grant(alice, "weather.write")
	ct.Done = h.admit(h.inv("perm.me", `{}`)).TaskID
	h.terminal(ct.Done)

	ct.Running = h.admit(h.inv("forecast.get", `{"city":"Riga"}`)).TaskID
	h.waitState(ct.Running, agentproto.StateRunning)
	ct.Input = h.admit(h.inv("echo", `{}`)).TaskID
	h.pendingInput(ct.Input)
	ct.Cancelling = h.admit(h.inv("approve.me", `{}`)).TaskID
	s := h.waitState(ct.Cancelling, agentproto.StateRunning)
	if _, _, err := h.eng.Cancel(context.Background(), tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: ct.Cancelling, ExpectedRevision: s.Revision}); err != nil {
		t.Fatal(err)
	}
	tasks.HoldDispatch(h.eng, true)
	ct.Accepted = h.admit(h.inv("echo", `{"late":true}`)).TaskID
	for _, id := range []string{ct.Running, ct.Input, ct.Cancelling, ct.Accepted, ct.Done} {
		ct.Revisions[id] = h.state(id).Revision
	}
	b, _ := json.Marshal(ct)
	if err := os.WriteFile(dbPath+".tasks", b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("\nREADY\n")
	<-forever
}

// TestCrashRecovery kills a gateway process with SIGKILL while tasks are in
// every non-terminal state, reopens the same database and starts a new
// engine: tasks whose backend call may have begun are settled failed
// agentgw:interrupted (retryable), the accepted one is dispatched and runs
// once, and every history stays gap-free.
func TestCrashRecovery(t *testing.T) {
	if os.Getenv("TASKS_CRASH_DB") != "" {
		t.Skip("in the child")
	}
	dbPath := filepath.Join(t.TempDir(), "agentgw.db")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), "TASKS_CRASH_DB="+dbPath)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	ready := false
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == "READY" {
			ready = true
			break
		}
	}
	if !ready {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not get ready: %s", strings.Join(lines, "\n"))
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no deferred code runs
		t.Fatal(err)
	}
	cmd.Wait()

	var ct crashTasks
	b, err := os.ReadFile(dbPath + ".tasks")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ct); err != nil {
		t.Fatal(err)
	}

	h := newHarnessAt(t, dbPath)
	h.restarted = true
	if err := h.db.IntegrityCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]string{"running": ct.Running, "input_required": ct.Input, "cancelling": ct.Cancelling} {
		s := h.state(id)
		if s.State != agentproto.StateFailed || s.Revision != ct.Revisions[id]+1 {
			t.Fatalf("%s: %s@%d (was @%d)", name, s.State, s.Revision, ct.Revisions[id])
		}
		r, _ := h.eng.Result(context.Background(), alice, weather, id)
		if string(r.Payload) != `{"error":{"code":"agentgw:interrupted","message":"The gateway restarted while the task was running.","retryable":true}}` {
			t.Fatalf("%s: %s", name, r.Payload)
		}
		h.checkHistory(id)
		// The interruption was notified after commit.
		if _, err := h.rec.WaitRevision(ctxT(t), id, s.Revision); err != nil {
			t.Fatal(err)
		}
		if s.PendingInput != nil {
			t.Fatalf("%s: pending input survived settlement", name)
		}
	}
	ev := h.terminal(ct.Accepted)
	if ev.Type != agentproto.EventCompleted {
		t.Fatalf("accepted task settled %s", ev.Type)
	}
	if calls := h.exec.Calls(); len(calls) != 1 || calls[0].TaskID != ct.Accepted {
		t.Fatalf("after restart the backend ran %+v", calls)
	}
	h.checkHistory(ct.Accepted)
	if s := h.state(ct.Done); s.State != agentproto.StateCompleted || s.Revision != ct.Revisions[ct.Done] {
		t.Fatalf("settled task changed: %s@%d", s.State, s.Revision)
	}
	h.checkHistory(ct.Done)
	// Nothing more to recover on a second restart.
	h.eng.Close()
	h.db.Close()
	h.open()
	for _, id := range []string{ct.Running, ct.Input, ct.Cancelling, ct.Accepted, ct.Done} {
		h.checkHistory(id)
	}
}

// Close settles what it interrupted and leaves undispatched tasks for the
// next start.
func TestGracefulCloseAndRestart(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) { c.ShutdownGrace = 2 * time.Second })
	h.exec.Script("forecast.get", taskstest.Step{Gate: make(chan struct{})})
	running := h.admit(h.inv("forecast.get", `{"city":"Riga"}`))
	h.waitState(running.TaskID, agentproto.StateRunning)
	tasks.HoldDispatch(h.eng, true)
	accepted := h.admit(h.inv("echo", `{}`))
	if err := h.eng.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Admit(context.Background(), h.inv("echo", `{}`)); !errors.Is(err, tasks.ErrServiceUnavailable) {
		t.Fatalf("admit after close: %v", err)
	}
	if s := h.state(running.TaskID); s.State != agentproto.StateFailed {
		t.Fatalf("running task after close: %s", s.State)
	}
	if s := h.state(accepted.TaskID); s.State != agentproto.StateAccepted {
		t.Fatalf("accepted task after close: %s", s.State)
	}
	h.db.Close()
	h.open()
	if ev := h.terminal(accepted.TaskID); ev.Type != agentproto.EventCompleted {
		t.Fatalf("accepted task after restart: %s", ev.Type)
	}
	h.checkHistory(running.TaskID)
	h.checkHistory(accepted.TaskID)
}

func TestRetentionPurge(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) {
		c.Retention = 2 * time.Hour
		c.ReplayWindow = 3 * time.Hour
		c.DefaultTimeout = 10 * time.Hour
	})
	inv := h.inv("echo", `{}`)
	acc := h.admit(inv)
	h.terminal(acc.TaskID)
	gate := make(chan struct{})
	defer close(gate)
	h.exec.Script("approve.me", taskstest.Step{Gate: gate})
	h.apr.Approve(alice, weather, "approve.me")
	long := h.admit(h.inv("approve.me", `{}`))
	h.waitState(long.TaskID, agentproto.StateRunning)
	if !acc.RetainUntil.Equal(t0.Add(2 * time.Hour)) {
		t.Fatalf("retain-until %v", acc.RetainUntil)
	}
	ctx := context.Background()
	// Retention alone does not end the replay record: the replay window is
	// longer, so the state stays too.
	h.clk.Set(t0.Add(3*time.Hour - time.Nanosecond))
	if n, err := h.eng.PurgeExpired(ctx); err != nil || n != 0 {
		t.Fatalf("purged %d early: %v", n, err)
	}
	replay := acc
	replay.Replay = true
	if got := h.admit(inv); got != replay {
		t.Fatalf("replay inside the window: %+v", got)
	}
	h.clk.Set(t0.Add(3 * time.Hour))
	if n, err := h.eng.PurgeExpired(ctx); err != nil || n != 1 {
		t.Fatalf("purged %d: %v", n, err)
	}
	if _, err := h.eng.State(ctx, alice, weather, acc.TaskID); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("purged state: %v", err)
	}
	if evs, _ := h.eng.Events(ctx, acc.TaskID); len(evs) != 0 {
		t.Fatalf("%d events left", len(evs))
	}
	// Non-terminal tasks are never purged.
	if s := h.state(long.TaskID); s.State != agentproto.StateRunning {
		t.Fatalf("long task %s", s.State)
	}
	if ok, _ := h.eng.VersionReferenced(weather, version); !ok {
		t.Fatal("running task does not pin its version")
	}
	// After the window the request ID may be admitted as new work.
	if got := h.admit(inv); got.TaskID == acc.TaskID {
		t.Fatal("purged replay record still answered")
	}
}

func TestPurgeLoopRunsOnTheClock(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) {
		c.Retention = time.Hour
		c.ReplayWindow = time.Hour
		c.PurgeInterval = 10 * time.Minute
	})
	acc := h.admit(h.inv("echo", `{}`))
	h.terminal(acc.TaskID)
	for i := 0; i < 7; i++ {
		h.clk.Advance(10 * time.Minute)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := h.eng.State(context.Background(), alice, weather, acc.TaskID)
		if errors.Is(err, tasks.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not purged: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ok, _ := h.eng.VersionReferenced(weather, version); ok {
		t.Fatal("purged task still pins its version")
	}
}
