package acc

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// setTOML replaces one line of the environment's config file.
func setTOML(t *testing.T, e *e2e.Env, from, to string) {
	t.Helper()
	b, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), from) {
		t.Fatalf("config has no %q", from)
	}
	if err := os.WriteFile(e.ConfigPath, []byte(strings.Replace(string(b), from, to, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// invokeRun invokes run with goal (and an optional deadline) and returns
// the task id; the outcome arrives on the channel.
func invokeRun(t *testing.T, ctx context.Context, c *agentclient.Client, ep, goal, deadline string, onInput func(context.Context, agentclient.InputRequest) (json.RawMessage, error)) (string, chan *agentclient.Outcome) {
	t.Helper()
	accepted := make(chan string, 1)
	done := make(chan *agentclient.Outcome, 1)
	args, _ := json.Marshal(map[string]string{"goal": goal})
	go func() {
		out, _ := c.Call(ctx, e2e.MustJID(ep), "run", args, agentclient.CallOptions{
			Deadline: deadline, OnInput: onInput,
			OnAccepted: func(a *agentclient.Accepted) { accepted <- a.TaskID },
		})
		done <- out
	}()
	select {
	case id := <-accepted:
		return id, done
	case <-time.After(30 * time.Second):
		t.Fatal("run not accepted")
	}
	return "", nil
}

// lastRun waits for a create_run with goal and returns its run_id.
func lastRun(t *testing.T, conn *e2e.RefProc, goal string) string {
	t.Helper()
	var id string
	testkit.WaitFor(t, 30*time.Second, "create_run of "+goal, func() bool {
		for _, m := range conn.Frames() {
			if m["got"] == "create_run" && m["goal"] == goal {
				id, _ = m["run_id"].(string)
			}
		}
		return id != ""
	})
	return id
}

func settledState(t *testing.T, ctx context.Context, c *agentclient.Client, ep, id string) *agentclient.TaskState {
	t.Helper()
	var st *agentclient.TaskState
	testkit.WaitFor(t, 60*time.Second, "the task settled", func() bool {
		s, err := c.State(ctx, e2e.MustJID(ep), id)
		if err == nil && s.State.Terminal() {
			st = s
			return true
		}
		return false
	})
	return st
}

func has4004(frames []string) bool {
	for _, f := range frames {
		if f == "error:4004" {
			return true
		}
	}
	return false
}

// TestACCSettleFrames checks, through Prosody and the reference connector
// (its own process), the exact frames the connector receives when a run
// ends on the gateway's side (issue 27 §5):
//   - an approval that expires: approval_denied {denied_by "", reason
//     "expired"} and then cancel_run;
//   - the caller cancelling while an approval is pending: cancel_run only
//     (the approval ends with the run; it never "expired");
//   - a run_cancelled for a run the gateway already settled (a deadline, a
//     cancel the connector confirmed too late, the gateway's restart) is
//     taken silently: never error 4004;
//   - after a cancel the connector confirms late, the next run to the agent
//     bounces 4005 and is re-sent as soon as the confirmation arrives, not
//     after busy_retry_seconds (60 s here).
func TestACCSettleFrames(t *testing.T) {
	t.Parallel()
	e, dir := prepareACC(t)
	setTOML(t, e, "busy_retry_seconds = 1", "busy_retry_seconds = 60")
	ep := "hermes@" + e.Domain
	gw := e.Serve("gw1")
	conn := e2e.StartRefConnector(t, dir, "--heartbeat", "500ms", "--one-run")
	gw.WaitLog("acc: published agent version", 30*time.Second)
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("approval-expiry", func(t *testing.T) {
		id, _ := invokeRun(t, ctx, c, ep, "approve medium touch /tmp/expiry", "", func(ctx context.Context, _ agentclient.InputRequest) (json.RawMessage, error) {
			<-ctx.Done() // never answered: the approval expires (3 s)
			return nil, ctx.Err()
		})
		run := lastRun(t, conn, "approve medium touch /tmp/expiry")
		testkit.WaitFor(t, 40*time.Second, "cancel_run after the expiry", func() bool { return conn.Got("cancel_run", run) >= 1 })
		got := conn.RunFrames(run)
		want := []string{"create_run", "approval_denied:expired:by=", "cancel_run"}
		if !strings.HasPrefix(strings.Join(got, ",")+",", strings.Join(want, ",")+",") {
			t.Fatalf("frames for an expired approval: %v, want %v", got, want)
		}
		st := settledState(t, ctx, c, ep, id)
		if st.State != agentproto.StateFailed {
			t.Fatalf("task after the expiry: %s", st.State)
		}
	})

	t.Run("caller-cancel-during-approval", func(t *testing.T) {
		id, _ := invokeRun(t, ctx, c, ep, "approve medium touch /tmp/cancel", "", nil) // nil: the client cancels on input
		run := lastRun(t, conn, "approve medium touch /tmp/cancel")
		st := settledState(t, ctx, c, ep, id)
		if st.State != agentproto.StateCancelled {
			t.Fatalf("task cancelled during its approval: %s", st.State)
		}
		time.Sleep(time.Second) // nothing more may follow
		got := conn.RunFrames(run)
		want := []string{"create_run", "cancel_run"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("frames for a cancel during an approval: %v, want %v", got, want)
		}
	})

	t.Run("deadline-then-late-confirmation", func(t *testing.T) {
		at := time.Now().Add(4 * time.Second).UTC().Format("2006-01-02T15:04:05.000Z")
		id, _ := invokeRun(t, ctx, c, ep, "hang deadline", at, nil)
		run := lastRun(t, conn, "hang deadline")
		st := settledState(t, ctx, c, ep, id)
		if st.State != agentproto.StateFailed {
			t.Fatalf("task past its deadline: %s", st.State)
		}
		testkit.WaitFor(t, 30*time.Second, "cancel_run at the deadline", func() bool { return conn.Got("cancel_run", run) >= 1 })
		time.Sleep(2 * time.Second) // the connector's run_cancelled has been answered, if at all
		if got := conn.RunFrames(run); has4004(got) {
			t.Fatalf("the connector's run_cancelled after a deadline was refused: %v", got)
		}
	})

	t.Run("unconfirmed-cancel-then-next-run", func(t *testing.T) {
		// The first run confirms cancel_run 8 s late: the gateway settles
		// it cancelled after cancel_timeout_seconds (2 s) meanwhile.
		id, _ := invokeRun(t, ctx, c, ep, "late-cancel 8", "", nil)
		old := lastRun(t, conn, "late-cancel 8")
		testkit.WaitFor(t, 30*time.Second, "run_accepted", func() bool {
			st, err := c.State(ctx, e2e.MustJID(ep), id)
			return err == nil && st.State == agentproto.StateRunning
		})
		time.Sleep(500 * time.Millisecond)
		cancelTask(t, ctx, c, ep, id)
		st := settledState(t, ctx, c, ep, id)
		if st.State != agentproto.StateCancelled {
			t.Fatalf("first run: %s", st.State)
		}
		// The next run to the agent: the connector still holds the old one.
		start := time.Now()
		id2, done := invokeRun(t, ctx, c, ep, "echo next", "", nil)
		next := lastRun(t, conn, "echo next")
		var out *agentclient.Outcome
		select {
		case out = <-done:
		case <-time.After(40 * time.Second):
			t.Fatalf("the next run did not complete within 40 s (busy_retry_seconds is 60); frames %v", conn.RunFrames(next))
		}
		if out == nil || out.State != agentproto.StateCompleted {
			t.Fatalf("next run %s: %+v", id2, out)
		}
		t.Logf("the next run completed %v after its invoke; its frames %v", time.Since(start).Round(100*time.Millisecond), conn.RunFrames(next))
		if got := conn.RunFrames(old); has4004(got) {
			t.Fatalf("the late run_cancelled was refused: %v", got)
		}
	})

	t.Run("never-confirmed-cancel-then-next-run", func(t *testing.T) {
		// The first run frees its agent 5 s after cancel_run and never
		// says so: the next run bounces 4005 and is re-sent at the 30 s
		// release bound (acc-notes), not after busy_retry_seconds (60 s).
		id, _ := invokeRun(t, ctx, c, ep, "quiet-release 5", "", nil)
		testkit.WaitFor(t, 30*time.Second, "run_accepted", func() bool {
			st, err := c.State(ctx, e2e.MustJID(ep), id)
			return err == nil && st.State == agentproto.StateRunning
		})
		time.Sleep(500 * time.Millisecond)
		cancelTask(t, ctx, c, ep, id)
		cancelledAt := time.Now()
		if st := settledState(t, ctx, c, ep, id); st.State != agentproto.StateCancelled {
			t.Fatalf("first run: %s", st.State)
		}
		var queued []string
		var mu sync.Mutex
		args, _ := json.Marshal(map[string]string{"goal": "echo after-quiet"})
		done := make(chan *agentclient.Outcome, 1)
		go func() {
			out, _ := c.Call(ctx, e2e.MustJID(ep), "run", args, agentclient.CallOptions{OnProgress: func(p agentclient.Progress) {
				mu.Lock()
				queued = append(queued, p.Stage+": "+p.Message)
				mu.Unlock()
			}})
			done <- out
		}()
		var out *agentclient.Outcome
		select {
		case out = <-done:
		case <-time.After(55 * time.Second):
			t.Fatalf("the next run did not complete within 55 s of the cancel (busy_retry_seconds is 60)")
		}
		if out == nil || out.State != agentproto.StateCompleted {
			t.Fatalf("next run: %+v", out)
		}
		mu.Lock()
		defer mu.Unlock()
		saw := false
		for _, q := range queued {
			if strings.Contains(q, "still busy with a cancelled run") {
				saw = true
			}
		}
		if !saw {
			t.Fatalf("the caller was not told why the run waits: %v", queued)
		}
		t.Logf("the next run completed %v after the cancel; the caller saw %v", time.Since(cancelledAt).Round(100*time.Millisecond), queued)
	})

	t.Run("restart-then-confirmation", func(t *testing.T) {
		id, _ := invokeRun(t, ctx, c, ep, "hang restart", "", nil)
		run := lastRun(t, conn, "hang restart")
		testkit.WaitFor(t, 30*time.Second, "run_accepted", func() bool {
			st, err := c.State(ctx, e2e.MustJID(ep), id)
			return err == nil && st.State == agentproto.StateRunning
		})
		gw.Kill()
		gw2 := e.Serve("gw2")
		gw2.WaitLog("acc connector registered", 60*time.Second)
		testkit.WaitFor(t, 30*time.Second, "cancel_run for the interrupted run", func() bool { return conn.Got("cancel_run", run) == 1 })
		time.Sleep(2 * time.Second)
		if got := conn.RunFrames(run); has4004(got) {
			t.Fatalf("the connector's run_cancelled after the gateway's restart was refused: %v", got)
		}
	})
}
