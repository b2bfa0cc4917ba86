package accbridge

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/accbridge/acctest"
	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
)

func TestRunProgressThenCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clog := &syncBuf{}
	e.connect(e.enroll("farm"), clog)
	e.ready()
	var m map[string]any
	if err := json.Unmarshal(e.agent.Manifest(), &m); err != nil {
		t.Fatal(err)
	}
	tool := m["tools"].([]any)[0].(map[string]any)
	if tool["name"] != "run" {
		t.Fatalf("tool %v", tool["name"])
	}
	enum := tool["inputSchema"].(map[string]any)["properties"].(map[string]any)["constraints"].(map[string]any)["properties"].(map[string]any)["tools"].(map[string]any)["items"].(map[string]any)["enum"]
	if b, _ := json.Marshal(enum); string(b) != `["browser","terminal"]` {
		t.Fatalf("constraints.tools enum %s, want the declared tools", b)
	}
	r := taskstest.NewRun()
	c := call(`{"goal":"echo hello world","constraints":{"tools":["terminal"],"timeout_seconds":60}}`)
	e.exec(c, r)
	res, fail, _, ups := r.Snapshot()
	if res == nil {
		t.Fatalf("not completed: %s", r.Outcome())
	}
	_ = fail
	var sc map[string]any
	json.Unmarshal(res.StructuredContent, &sc)
	if sc["summary"] != "hello world" {
		t.Fatalf("structuredContent %s", res.StructuredContent)
	}
	var sawHalf bool
	for _, u := range ups {
		if u.Percent != nil && *u.Percent == 50 {
			sawHalf = true
		}
	}
	if !sawHalf {
		t.Fatalf("no 50%% progress in %+v", ups)
	}
	run, ok, _ := e.store.RunByTask(context.Background(), c.TaskID)
	if !ok || run.State != accdb.RunDone {
		t.Fatalf("run mapping %+v %v", run, ok)
	}
	if n := clog.count("create_run", run.RunID); n != 1 {
		t.Fatalf("create_run sent %d times", n)
	}
}

func TestUndeclaredToolRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.connect(e.enroll("farm"), &syncBuf{})
	e.ready()
	r := taskstest.NewRun()
	e.exec(call(`{"goal":"echo x","constraints":{"tools":["rootkit"]}}`), r)
	if _, f, _, _ := r.Snapshot(); f == nil || f.Code != agentproto.CodeACCToolNotDeclared {
		t.Fatalf("outcome %s", r.Outcome())
	}
}

func TestEventsStagesWithoutRawOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.connect(e.enroll("farm"), &syncBuf{})
	e.ready()
	r := taskstest.NewRun()
	e.exec(call(goal("events")), r)
	res, _, _, ups := r.Snapshot()
	if res == nil {
		t.Fatalf("outcome %s", r.Outcome())
	}
	stages := map[string]bool{}
	for _, u := range ups {
		stages[u.Stage] = true
		if strings.Contains(u.Message, "RAW-TOOL-OUTPUT") || strings.Contains(u.Message, "/secret-dir") {
			t.Fatalf("raw tool output reached progress: %q", u.Message)
		}
	}
	// Informational events coalesce (latest wins), so not every stage
	// need appear; at least one must, and progress carries no raw output.
	if len(stages) < 2 {
		t.Fatalf("stages %v", stages)
	}
}

func TestOneRunPerTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clog := &syncBuf{}
	e.connect(e.enroll("farm"), clog)
	e.ready()
	c := call(goal("echo once"))
	r := taskstest.NewRun()
	e.exec(c, r)
	r2 := taskstest.NewRun()
	e.exec(c, r2)
	if _, f, _, _ := r2.Snapshot(); f == nil || f.Code != agentproto.CodeInterrupted {
		t.Fatalf("second execution of one task: %s", r2.Outcome())
	}
	if n := clog.count("create_run", ""); n != 1 {
		t.Fatalf("create_run sent %d times for one task", n)
	}
}

func TestApproveDenyAndRisk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.HighRiskApprovers = []string{"boss@example.test"} })
	clog := &syncBuf{}
	e.connect(e.enroll("farm"), clog)
	e.ready()
	for _, tc := range []struct {
		goal, answer string
		approved     bool
	}{
		{"approve medium rm -rf /tmp/build <b>x</b>", `{"decision":"approve"}`, true},
		{"approve low curl example.test", `{"decision":"deny","reason":"no"}`, false},
		{"approve high rm -rf /", `{"decision":"approve"}`, false}, // alice is not a listed approver
	} {
		r := taskstest.NewRun()
		r.Answer = func(req tasks.InputRequest) (json.RawMessage, error) {
			if !strings.Contains(req.Question, `"`) || !strings.Contains(req.Question, "risk") {
				t.Errorf("question does not quote the action and risk: %q", req.Question)
			}
			return json.RawMessage(tc.answer), nil
		}
		e.exec(call(goal(tc.goal)), r)
		res, _, _, _ := r.Snapshot()
		if res == nil {
			t.Fatalf("%s: %s", tc.goal, r.Outcome())
		}
		var sc map[string]any
		json.Unmarshal(res.StructuredContent, &sc)
		if sc["approved"] != tc.approved {
			t.Fatalf("%s: approved %v, want %v (%s)", tc.goal, sc["approved"], tc.approved, res.StructuredContent)
		}
		if tc.approved && sc["approved_by"] != "alice@example.test" {
			t.Fatalf("approved_by %v", sc["approved_by"])
		}
		if !tc.approved && tc.answer != `{"decision":"approve"}` && sc["denied_by"] != "alice@example.test" {
			t.Fatalf("denied_by %v", sc["denied_by"])
		}
		if strings.HasPrefix(tc.goal, "approve high") && len(r.Inputs) != 0 {
			t.Fatal("a high-risk approval was asked of a caller who is not a listed approver")
		}
	}
}

func TestApprovalExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.ApprovalTimeout = 300 * time.Millisecond })
	clog := &syncBuf{}
	e.connect(e.enroll("farm"), clog)
	e.ready()
	r := taskstest.NewRun()
	var exp time.Time
	r.Answer = func(req tasks.InputRequest) (json.RawMessage, error) {
		exp = req.ExpiresAt
		time.Sleep(time.Until(req.ExpiresAt))
		return nil, tasks.ErrInputExpired
	}
	done := make(chan struct{})
	go func() { e.agent.Execute(context.Background(), call(goal("approve medium something")), r); close(done) }()
	testkit.WaitFor(t, 5*time.Second, "approval_denied expired", func() bool {
		for _, m := range clog.got() {
			if m["got"] == "approval_denied" && m["reason"] == "expired" {
				return true
			}
		}
		return false
	})
	if exp.IsZero() || time.Until(exp) > time.Second {
		t.Fatalf("approval expiry %v not the configured 300ms", exp)
	}
	r.Fail(tasks.Failure{Code: agentproto.CodeInputExpired, Message: "x"}) // as the engine would
	<-done
}

func TestCancelConfirmedAndIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clog := &syncBuf{}
	e.connect(e.enroll("farm"), clog)
	e.ready()
	for _, tc := range []struct{ goal, want string }{{"hang", "confirmed"}, {"ignore-cancel", "did not confirm"}} {
		r := taskstest.NewRun()
		done := make(chan struct{})
		go func() { e.agent.Execute(context.Background(), call(goal(tc.goal)), r); close(done) }()
		<-r.FirstProgress // accepted
		close(r.CancelReq)
		r.Wait(t, 5*time.Second)
		<-done
		_, _, reason, _ := r.Snapshot()
		if !strings.Contains(reason, tc.want) {
			t.Fatalf("%s: cancel reason %q (%s)", tc.goal, reason, r.Outcome())
		}
	}
}

func TestDeadlineSendsCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clog := &syncBuf{}
	e.connect(e.enroll("farm"), clog)
	e.ready()
	c := call(goal("hang"))
	c.Deadline = time.Now().Add(500 * time.Millisecond)
	r := taskstest.NewRun()
	e.exec(c, r)
	if _, f, _, _ := r.Snapshot(); f == nil || f.Code != agentproto.CodeDeadlineExpired {
		t.Fatalf("outcome %s", r.Outcome())
	}
	run, _, _ := e.store.RunByTask(context.Background(), c.TaskID)
	testkit.WaitFor(t, 2*time.Second, "cancel_run on deadline", func() bool { return clog.count("cancel_run", run.RunID) == 1 })
}

func TestErrorCodesAndRetryPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clog := &syncBuf{}
	e.connect(e.enroll("farm"), clog)
	e.ready()
	for _, tc := range []struct {
		goal      string
		code      string
		creates   int
		completed bool
	}{
		{"error 5001", agentproto.CodeACCConnectorError, 4, false},
		{"error 5002", agentproto.CodeACCAdapterError, 4, false},
		{"error-once 5001", "", 2, true},
		{"busy-once", "", 2, true},
		{"error 4006", agentproto.CodeACCQuotaExceeded, 1, false},
		{"error 4003", agentproto.CodeACCAgentNotFound, 1, false},
		{"error 4001", agentproto.CodeACCInvalidRequest, 1, false},
		{"error 4002", agentproto.CodeACCUnknownType, 1, false},
		{"error 4004", agentproto.CodeACCRunNotFound, 1, false},
		{"error 4007", agentproto.CodeACCUnauthorized, 1, false},
		{"error 4008", agentproto.CodeACCApprovalDenied, 1, false},
		{"error 4999", agentproto.CodeACCUnknownError, 1, false},
	} {
		c := call(goal(tc.goal))
		r := taskstest.NewRun()
		e.exec(c, r)
		res, f, _, _ := r.Snapshot()
		if tc.completed != (res != nil) || (!tc.completed && (f == nil || f.Code != tc.code)) {
			t.Fatalf("%s: %s", tc.goal, r.Outcome())
		}
		run, _, _ := e.store.RunByTask(context.Background(), c.TaskID)
		if n := clog.count("create_run", run.RunID); n != tc.creates {
			t.Fatalf("%s: create_run sent %d times, want %d (same run_id)", tc.goal, n, tc.creates)
		}
	}
	if !strings.Contains(e.log.String(), "OPERATOR") {
		t.Fatal("4006 did not tell the operator")
	}
}

func TestHeartbeatLossDegradesThenUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.Heartbeat = 150 * time.Millisecond })
	e.connect(e.enroll("farm"), &syncBuf{})
	e.ready()
	r := taskstest.NewRun()
	go e.agent.Execute(context.Background(), call(goal("stop-heartbeats")), r)
	testkit.WaitFor(t, 5*time.Second, "degraded status", func() bool {
		up, st := e.avail.get(testEndpoint)
		return up && strings.Contains(st, "degraded")
	})
	testkit.WaitFor(t, 5*time.Second, "unavailable after 10 missed", func() bool {
		up, _ := e.avail.get(testEndpoint)
		return !up
	})
	close(r.CancelReq)
	r.Wait(t, 5*time.Second)
}

func TestReplacementAndRevocation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	dir := e.enroll("farm")
	l1 := &syncBuf{}
	c1, _ := e.connect(dir, l1)
	e.ready()
	e.connect(dir, &syncBuf{})
	testkit.WaitFor(t, 5*time.Second, "replacement logged", func() bool { return strings.Contains(e.log.String(), "replaces the old one") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c1.Serve(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("the replaced connection is still open: %v", err)
	}
	e.ready()
	if ok, err := e.store.Revoke(context.Background(), "farm", "2026-01-02T00:00:00Z"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	testkit.WaitFor(t, 3*time.Second, "revoked connection closed", func() bool {
		up, _ := e.avail.get(testEndpoint)
		return !up
	})
	if _, err := acctest.Dial(context.Background(), acctest.Options{Dir: dir, Agents: defaultAgents}); err == nil {
		t.Fatal("a revoked connector connected again")
	}
}

// chatRec is a recording backendkit.Chat.
type chatRec struct {
	mu   sync.Mutex
	sent []backendkit.Message
}

func (c *chatRec) Send(ctx context.Context, m backendkit.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, m)
	return nil
}
func (c *chatRec) Ack(context.Context, backendkit.Ack) error           { return nil }
func (c *chatRec) Activity(context.Context, backendkit.Activity) error { return nil }
func (c *chatRec) bodies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.sent {
		out = append(out, m.Body)
	}
	return out
}

func TestConverseRunsTheMessageOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	chat := &chatRec{}
	e.agent.AttachChat(chat)
	if e.agent.CanConverse(testEndpoint) {
		t.Fatal("chat offered before the connector declared the agent")
	}
	clog := &syncBuf{}
	e.connect(e.enroll("farm"), clog)
	e.ready()
	turn := backendkit.Turn{Endpoint: testEndpoint, From: "alice@example.test/phone", ID: "m1", Body: "echo hi there"}
	for i := 0; i < 2; i++ {
		if err := e.agent.Converse(context.Background(), turn); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 5*time.Second, "the reply", func() bool { return len(chat.bodies()) >= 1 })
	}
	time.Sleep(200 * time.Millisecond)
	if b := chat.bodies(); len(b) != 1 || b[0] != "hi there" {
		t.Fatalf("replies %q, want one \"hi there\"", b)
	}
	if n := clog.count("create_run", ""); n != 1 {
		t.Fatalf("create_run %d times for one turn", n)
	}
}

// A new capabilities message republishes the endpoint's manifest as a new
// version; an identical one publishes nothing.
func TestCapabilitiesRepublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c, _ := e.connect(e.enroll("farm"), &syncBuf{})
	e.ready()
	first := string(e.agent.Manifest())
	c.Send(map[string]any{"type": "capabilities", "agents": defaultAgents})
	time.Sleep(100 * time.Millisecond)
	if string(e.agent.Manifest()) != first {
		t.Fatal("an identical declaration changed the manifest")
	}
	c.Send(map[string]any{"type": "capabilities", "agents": []acctest.Agent{{AgentID: "agent-1", Runtime: "hermes", Tools: []string{"terminal"}}}})
	testkit.WaitFor(t, 5*time.Second, "a new manifest", func() bool { return string(e.agent.Manifest()) != first })
	var m map[string]any
	json.Unmarshal(e.agent.Manifest(), &m)
	var old map[string]any
	json.Unmarshal([]byte(first), &old)
	if m["agent"].(map[string]any)["version"] == old["agent"].(map[string]any)["version"] {
		t.Fatal("the new manifest kept the old version")
	}
	if got := e.agent.Declared(); len(got) != 1 || got[0] != "terminal" {
		t.Fatalf("declared %v", got)
	}
	// An agent declared by nobody's mapping is logged, not published.
	c.Send(map[string]any{"type": "capabilities", "agents": []acctest.Agent{{AgentID: "agent-1", Tools: []string{"terminal"}}, {AgentID: "stray"}}})
	testkit.WaitFor(t, 5*time.Second, "the unmapped agent logged", func() bool { return strings.Contains(e.log.String(), "no endpoint maps") })
}
