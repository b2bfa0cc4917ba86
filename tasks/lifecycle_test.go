package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

func TestProgressIsClampedAndNondecreasing(t *testing.T) {
	h := newHarness(t)
	p := func(pct float64) taskstest.Step {
		return taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(pct)}}
	}
	h.exec.Script("echo",
		p(10), p(5), p(150), p(-3), p(math.NaN()),
		taskstest.Step{Progress: &tasks.Progress{}}, // nothing to report
		taskstest.Step{Progress: &tasks.Progress{Stage: strings.Repeat("s", 300), Message: "m"}},
		taskstest.Step{Echo: true})
	acc := h.admit(h.inv("echo", `{}`))
	h.terminal(acc.TaskID)
	evs := h.checkHistory(acc.TaskID)
	var got []string
	for _, e := range evs {
		if e.Type == agentproto.EventProgress {
			got = append(got, string(e.Payload))
		}
	}
	// A clamped value equal to the last committed one commits nothing;
	// canonical member order puts message before stage.
	want := []string{`{"percent":10}`, `{"percent":100}`,
		`{"message":"m","stage":"` + strings.Repeat("s", 256) + `"}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("progress events:\n%s", strings.Join(got, "\n"))
	}
}

func TestCompletedResultRules(t *testing.T) {
	tru := true
	cases := []struct {
		name     string
		tool     string
		res      tasks.ToolResult
		state    agentproto.State
		code     string
		maxBytes int
	}{
		{"valid structured", "forecast.get", tasks.ToolResult{Content: json.RawMessage(`[]`), StructuredContent: json.RawMessage(`{"summary":"ok"}`), Meta: json.RawMessage(`{"k":1}`)}, agentproto.StateCompleted, "", 0},
		{"missing structured", "forecast.get", tasks.ToolResult{Content: json.RawMessage(`[]`)}, agentproto.StateFailed, agentproto.CodeInvalidOutput, 0},
		{"structured mismatch", "forecast.get", tasks.ToolResult{Content: json.RawMessage(`[]`), StructuredContent: json.RawMessage(`{"summary":3}`)}, agentproto.StateFailed, agentproto.CodeInvalidOutput, 0},
		{"isError still completes", "forecast.get", tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":"no such city"}]`), IsError: &tru}, agentproto.StateCompleted, "", 0},
		{"content not array", "echo", tasks.ToolResult{Content: json.RawMessage(`{}`)}, agentproto.StateFailed, agentproto.CodeInvalidOutput, 0},
		{"content missing", "echo", tasks.ToolResult{}, agentproto.StateFailed, agentproto.CodeInvalidOutput, 0},
		{"meta not object", "echo", tasks.ToolResult{Content: json.RawMessage(`[]`), Meta: json.RawMessage(`[]`)}, agentproto.StateFailed, agentproto.CodeInvalidOutput, 0},
		{"not I-JSON", "echo", tasks.ToolResult{Content: json.RawMessage(`[{"a":1,"a":2}]`)}, agentproto.StateFailed, agentproto.CodeInvalidOutput, 0},
		{"too large", "echo", tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":"` + strings.Repeat("x", 5000) + `"}]`)}, agentproto.StateFailed, agentproto.CodeResultTooLarge, 4096},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *tasks.Config) { cfg.MaxResultBytes = c.maxBytes })
			res := c.res
			h.exec.Script(c.tool, taskstest.Step{Complete: &res})
			args := `{}`
			if c.tool == "forecast.get" {
				args = `{"city":"Riga"}`
			}
			acc := h.admit(h.inv(c.tool, args))
			ev := h.terminal(acc.TaskID)
			if string(ev.Type) != string(c.state) {
				t.Fatalf("settled %s: %s", ev.Type, ev.Payload)
			}
			if c.code != "" {
				e, _ := taskstest.Field(ev.Payload, "error").(map[string]any)
				if e["code"] != c.code || e["retryable"] != false {
					t.Fatalf("failure %s", ev.Payload)
				}
			} else {
				r, _ := taskstest.Field(ev.Payload, "result").(map[string]any)
				want := map[string]any{}
				json.Unmarshal(mustJSON(t, res), &want)
				if mustString(t, r) != mustString(t, want) {
					t.Fatalf("result %s, want whole %s", ev.Payload, mustJSON(t, res))
				}
			}
			h.checkHistory(acc.TaskID)
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustString(t *testing.T, v any) string { return string(mustJSON(t, v)) }

func TestFailureAndExecutorMisbehaviour(t *testing.T) {
	h := newHarness(t)
	h.exec.Script("echo", taskstest.Step{Fail: &tasks.Failure{Code: "com.example:quota", Message: "Quota exceeded.", Retryable: true}})
	acc := h.admit(h.inv("echo", `{}`))
	if ev := h.terminal(acc.TaskID); string(ev.Payload) != `{"error":{"code":"com.example:quota","message":"Quota exceeded.","retryable":true}}` {
		t.Fatalf("failed %s", ev.Payload)
	}
	h.checkHistory(acc.TaskID)

	h.exec.Script("echo", taskstest.Step{Fail: &tasks.Failure{Code: "bad code with spaces"}})
	acc = h.admit(h.inv("echo", `{}`))
	if ev := h.terminal(acc.TaskID); !strings.Contains(string(ev.Payload), `"code":"internal-error"`) || !strings.Contains(string(ev.Payload), `"message":"The task failed."`) {
		t.Fatalf("failed %s", ev.Payload)
	}

	h.exec.Script("echo", taskstest.Step{Return: true})
	acc = h.admit(h.inv("echo", `{}`))
	if ev := h.terminal(acc.TaskID); string(ev.Payload) != `{"error":{"code":"internal-error","message":"The tool ended without a result.","retryable":false}}` {
		t.Fatalf("returned without settling: %s", ev.Payload)
	}
	h.checkHistory(acc.TaskID)

	h.exec.Script("echo", taskstest.Step{Panic: true})
	acc = h.admit(h.inv("echo", `{}`))
	if ev := h.terminal(acc.TaskID); !strings.Contains(string(ev.Payload), agentproto.CodeInternalError) {
		t.Fatalf("panicked: %s", ev.Payload)
	}
	h.checkHistory(acc.TaskID)

	// Settling twice: the second settlement is refused and changes nothing.
	h.exec.Script("echo", taskstest.Step{Echo: true}, taskstest.Step{Fail: &tasks.Failure{Code: "x:y", Message: "late"}})
	acc = h.admit(h.inv("echo", `{}`))
	h.terminal(acc.TaskID)
	rec := h.exec.Record(acc.TaskID)
	<-rec.Done
	if !errors.Is(rec.Errors[1], tasks.ErrSettled) {
		t.Fatalf("second settlement: %v", rec.Errors[1])
	}
	if s := h.state(acc.TaskID); s.State != agentproto.StateCompleted || s.Revision != 2 {
		t.Fatalf("state %s@%d", s.State, s.Revision)
	}
}

func inputStep(expires time.Time) taskstest.Step {
	return taskstest.Step{Input: &tasks.InputRequest{
		Question:  "Which forecast unit should be used?",
		Schema:    json.RawMessage(`{"type":"object","properties":{"unit":{"enum":["C","F"]}},"required":["unit"]}`),
		ExpiresAt: expires,
	}}
}

type pending struct {
	RequestID   string          `json:"requestId"`
	Question    string          `json:"question"`
	InputSchema json.RawMessage `json:"inputSchema"`
	CreatedAt   string          `json:"createdAt"`
	ExpiresAt   string          `json:"expiresAt"`
}

func (h *harness) pendingInput(id string) (pending, *tasks.Snapshot) {
	h.t.Helper()
	h.waitType(id, agentproto.EventInputRequired)
	s := h.waitState(id, agentproto.StateInputRequired)
	var p pending
	if err := json.Unmarshal(s.PendingInput, &p); err != nil {
		h.t.Fatalf("pending input %q: %v", s.PendingInput, err)
	}
	return p, s
}

func (h *harness) answer(id string, p pending, rev int64, input string) (int64, error) {
	_, r, err := h.eng.ProvideInput(context.Background(), tasks.InputSubmission{
		Caller: alice, Endpoint: weather, TaskID: id, RequestID: p.RequestID,
		ExpectedRevision: rev, MediaType: "application/json", Input: []byte(input),
	})
	return r, err
}

func TestInteractiveInput(t *testing.T) {
	h := newHarness(t)
	h.exec.Script("echo", inputStep(t0.Add(5*time.Minute)), taskstest.Step{Echo: true})
	acc := h.admit(h.inv("echo", `{}`))
	p, s := h.pendingInput(acc.TaskID)
	if !ids.Valid(p.RequestID) || p.CreatedAt != "2026-07-27T19:14:01Z" || p.ExpiresAt != "2026-07-27T19:19:01Z" || s.Revision != 2 {
		t.Fatalf("pending %+v at revision %d", p, s.Revision)
	}
	ev := h.waitType(acc.TaskID, agentproto.EventInputRequired)
	if !bytes.Equal(ev.Payload, s.PendingInput) {
		t.Fatalf("state's pending input differs from the event:\n%s\n%s", s.PendingInput, ev.Payload)
	}
	if _, err := h.eng.Result(context.Background(), alice, weather, acc.TaskID); !errors.Is(err, tasks.ErrUnexpectedRequest) {
		t.Fatalf("result while pending: %v", err)
	}

	sub := func(mut func(*tasks.InputSubmission)) error {
		in := tasks.InputSubmission{Caller: alice, Endpoint: weather, TaskID: acc.TaskID, RequestID: p.RequestID,
			ExpectedRevision: 2, MediaType: "application/json", Input: []byte(`{"unit":"C"}`)}
		mut(&in)
		_, _, err := h.eng.ProvideInput(context.Background(), in)
		return err
	}
	wantErr(t, sub(func(i *tasks.InputSubmission) { i.Caller = mallory }), tasks.ErrNotFound)
	wantErr(t, sub(func(i *tasks.InputSubmission) { i.Endpoint = other }), tasks.ErrNotFound)
	wantErr(t, sub(func(i *tasks.InputSubmission) { i.RequestID = ids.New("input-") }), tasks.ErrNotFound)
	wantErr(t, sub(func(i *tasks.InputSubmission) { i.TaskID = ids.New("task-") }), tasks.ErrNotFound)
	wantErr(t, sub(func(i *tasks.InputSubmission) { i.TaskID = "bad" }), tasks.ErrBadRequest)
	wantErr(t, sub(func(i *tasks.InputSubmission) { i.Input = []byte(`{"unit":"K"}`) }), tasks.ErrNotAcceptable)
	wantErr(t, sub(func(i *tasks.InputSubmission) { i.Input = []byte(`{"unit":"C","unit":"F"}`) }), tasks.ErrNotAcceptable)
	wantErr(t, sub(func(i *tasks.InputSubmission) { i.MediaType = "text/plain" }), tasks.ErrNotAcceptable)
	wantErr(t, sub(func(i *tasks.InputSubmission) { i.ExpectedRevision = 1 }), tasks.ErrConflict)
	wantErr(t, sub(func(i *tasks.InputSubmission) { i.Caller = mallory; i.Input = []byte(`x`) }), tasks.ErrNotFound)

	rev, err := h.answer(acc.TaskID, p, 2, ` { "unit" : "C" } `)
	if err != nil || rev != 3 {
		t.Fatalf("accepted at %d: %v", rev, err)
	}
	ev = h.terminal(acc.TaskID)
	meta := taskstest.Field(ev.Payload, "result").(map[string]any)["_meta"]
	if mustString(t, meta) != `{"inputs":[{"unit":"C"}]}` {
		t.Fatalf("executor received %v", meta)
	}
	// Identical replay after the task completed: the original acceptance.
	if rev, err := h.answer(acc.TaskID, p, 2, `{"unit":"C"}`); err != nil || rev != 3 {
		t.Fatalf("replay: %d, %v", rev, err)
	}
	// Any other tuple: conflict.
	if _, err := h.answer(acc.TaskID, p, 2, `{"unit":"F"}`); !errors.Is(err, tasks.ErrConflict) {
		t.Fatalf("different input: %v", err)
	}
	if _, err := h.answer(acc.TaskID, p, 3, `{"unit":"C"}`); !errors.Is(err, tasks.ErrConflict) {
		t.Fatalf("different revision: %v", err)
	}
	evs := h.checkHistory(acc.TaskID)
	if got := strings.Join(types(evs), " "); got != "status:running input_required: status:running completed:" {
		t.Fatalf("history %s", got)
	}
	if rec := h.exec.Record(acc.TaskID); len(rec.Inputs) != 1 {
		t.Fatalf("input delivered %d times", len(rec.Inputs))
	}
}

// expiresAt is compared exactly at the commit boundary: an answer one
// nanosecond (or a fraction of one) before it is accepted, an answer at it
// is refused and the task settles input-expired.
func TestInputExpiryBoundary(t *testing.T) {
	for _, c := range []struct {
		name   string
		at     time.Duration // clock offset from expiresAt at answer time
		accept bool
	}{
		{"one nanosecond before", -time.Nanosecond, true},
		{"exactly at", 0, false},
		{"after", time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.clk.timersOff.Store(true) // only the commit-boundary check
			expires := t0.Add(10*time.Minute + 123456789*time.Nanosecond)
			h.exec.Script("echo", inputStep(expires), taskstest.Step{Echo: true})
			acc := h.admit(h.inv("echo", `{}`))
			p, s := h.pendingInput(acc.TaskID)
			if p.ExpiresAt != "2026-07-27T19:24:01.123456789Z" {
				t.Fatalf("expiresAt %s", p.ExpiresAt)
			}
			h.clk.Set(expires.Add(c.at))
			_, err := h.answer(acc.TaskID, p, s.Revision, `{"unit":"F"}`)
			ev := h.terminal(acc.TaskID)
			if c.accept {
				if err != nil || ev.Type != agentproto.EventCompleted {
					t.Fatalf("answer: %v, settled %s", err, ev.Type)
				}
			} else {
				wantErr(t, err, tasks.ErrConflict)
				if ev.Type != agentproto.EventFailed || !strings.Contains(string(ev.Payload), agentproto.CodeInputExpired) {
					t.Fatalf("settled %s %s", ev.Type, ev.Payload)
				}
				// A late answer to the expired request stays a conflict.
				_, err := h.answer(acc.TaskID, p, s.Revision, `{"unit":"F"}`)
				wantErr(t, err, tasks.ErrConflict)
				rec := h.exec.Record(acc.TaskID)
				<-rec.Done
				if !errors.Is(rec.Errors[0], tasks.ErrInputExpired) {
					t.Fatalf("RequestInput returned %v", rec.Errors[0])
				}
			}
			h.checkHistory(acc.TaskID)
		})
	}
}

func TestInputExpiryTimer(t *testing.T) {
	h := newHarness(t, func(c *tasks.Config) { c.DefaultTimeout = 2 * time.Hour })
	h.exec.Script("echo", inputStep(time.Time{}), taskstest.Step{Echo: true})
	acc := h.admit(h.inv("echo", `{}`))
	p, _ := h.pendingInput(acc.TaskID)
	if p.ExpiresAt != "2026-07-27T20:14:01Z" { // the configured default InputTimeout
		t.Fatalf("default expiry %s", p.ExpiresAt)
	}
	h.clk.Advance(time.Hour - time.Nanosecond)
	if s := h.state(acc.TaskID); s.State != agentproto.StateInputRequired {
		t.Fatalf("expired early: %s", s.State)
	}
	h.clk.Advance(time.Nanosecond)
	ev := h.terminal(acc.TaskID)
	if !strings.Contains(string(ev.Payload), agentproto.CodeInputExpired) {
		t.Fatalf("settled %s", ev.Payload)
	}
	h.checkHistory(acc.TaskID)
}

func TestCancellation(t *testing.T) {
	h := newHarness(t)
	h.exec.Script("echo",
		taskstest.Step{AwaitCancel: true},
		taskstest.Step{Cancelled: taskstest.Reason("Trip was cancelled")},
		taskstest.Step{Echo: true}, // output after the terminal cancellation
	)
	acc := h.admit(h.inv("echo", `{}`))
	s := h.waitState(acc.TaskID, agentproto.StateRunning)
	cancel := func(mut func(*tasks.CancelRequest)) (int64, error) {
		c := tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: acc.TaskID, ExpectedRevision: s.Revision,
			HasReason: true, Reason: "Trip was cancelled"}
		mut(&c)
		_, rev, err := h.eng.Cancel(context.Background(), c)
		return rev, err
	}
	_, err := cancel(func(c *tasks.CancelRequest) { c.Caller = mallory })
	wantErr(t, err, tasks.ErrNotFound)
	_, err = cancel(func(c *tasks.CancelRequest) { c.ExpectedRevision = 0 })
	wantErr(t, err, tasks.ErrConflict)
	_, err = cancel(func(c *tasks.CancelRequest) { c.TaskID = "x" })
	wantErr(t, err, tasks.ErrBadRequest)

	rev, err := cancel(func(*tasks.CancelRequest) {})
	if err != nil || rev != 2 {
		t.Fatalf("cancel: %d, %v", rev, err)
	}
	ev := h.terminal(acc.TaskID)
	if ev.Type != agentproto.EventCancelled || string(ev.Payload) != `{"reason":"Trip was cancelled"}` {
		t.Fatalf("settled %s %s", ev.Type, ev.Payload)
	}
	rec := h.exec.Record(acc.TaskID)
	<-rec.Done
	if !errors.Is(rec.Errors[2], tasks.ErrSettled) {
		t.Fatalf("output after cancelled: %v", rec.Errors[2])
	}
	// Identical replay after settlement: the original acceptance.
	if rev, err := cancel(func(*tasks.CancelRequest) {}); err != nil || rev != 2 {
		t.Fatalf("replay: %d, %v", rev, err)
	}
	for name, mut := range map[string]func(*tasks.CancelRequest){
		"other reason": func(c *tasks.CancelRequest) { c.Reason = "trip was cancelled" },
		"no reason":    func(c *tasks.CancelRequest) { c.HasReason, c.Reason = false, "" },
		"empty reason": func(c *tasks.CancelRequest) { c.Reason = "" },
		"revision":     func(c *tasks.CancelRequest) { c.ExpectedRevision = 3 },
	} {
		if _, err := cancel(mut); !errors.Is(err, tasks.ErrConflict) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	evs := h.checkHistory(acc.TaskID)
	if got := strings.Join(types(evs), " "); got != "status:running status:cancelling cancelled:" {
		t.Fatalf("history %s", got)
	}
	r, _ := h.eng.Result(context.Background(), alice, weather, acc.TaskID)
	if r.State != agentproto.StateCancelled || r.Revision != 3 {
		t.Fatalf("result %+v", r)
	}
}

// Cancellation is advisory: the executor may still complete.
func TestCancellationIsAdvisory(t *testing.T) {
	h := newHarness(t)
	h.exec.Script("echo", taskstest.Step{AwaitCancel: true}, taskstest.Step{Echo: true})
	acc := h.admit(h.inv("echo", `{}`))
	s := h.waitState(acc.TaskID, agentproto.StateRunning)
	if _, _, err := h.eng.Cancel(context.Background(), tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: acc.TaskID, ExpectedRevision: s.Revision}); err != nil {
		t.Fatal(err)
	}
	if ev := h.terminal(acc.TaskID); ev.Type != agentproto.EventCompleted {
		t.Fatalf("settled %s", ev.Type)
	}
	h.checkHistory(acc.TaskID)
}

func TestCancelAfterSettlementConflicts(t *testing.T) {
	h := newHarness(t)
	acc := h.admit(h.inv("echo", `{}`))
	h.terminal(acc.TaskID)
	_, _, err := h.eng.Cancel(context.Background(), tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: acc.TaskID, ExpectedRevision: 2})
	wantErr(t, err, tasks.ErrConflict)
}

func TestCancelUnsupportedByBackend(t *testing.T) {
	h := newHarness(t)
	h.exec = taskstest.New(tasks.Features{})
	h.exec.Script("echo", taskstest.Step{Gate: make(chan struct{})})
	acc := h.admit(h.inv("echo", `{}`))
	s := h.waitState(acc.TaskID, agentproto.StateRunning)
	_, _, err := h.eng.Cancel(context.Background(), tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: acc.TaskID, ExpectedRevision: s.Revision})
	wantErr(t, err, tasks.ErrServiceUnavailable)
}

// Cancelling a task before dispatch settles it without calling the backend.
func TestCancelBeforeDispatch(t *testing.T) {
	h := newHarness(t)
	tasks.HoldDispatch(h.eng, true)
	acc := h.admit(h.inv("echo", `{}`))
	_, rev, err := h.eng.Cancel(context.Background(), tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: acc.TaskID, ExpectedRevision: 0})
	if err != nil || rev != 1 {
		t.Fatalf("cancel: %d %v", rev, err)
	}
	if ev := h.terminal(acc.TaskID); ev.Type != agentproto.EventCancelled {
		t.Fatalf("settled %s", ev.Type)
	}
	if err := tasks.Dispatch(h.eng, acc.TaskID); err != nil {
		t.Fatal(err)
	}
	if n := len(h.exec.Calls()); n != 0 {
		t.Fatalf("backend called %d times", n)
	}
	h.checkHistory(acc.TaskID)
}

// A cancellation accepted while input is pending supersedes the request:
// a late answer is a conflict, not not-found, and the executor learns it.
func TestCancelSupersedesInput(t *testing.T) {
	h := newHarness(t)
	h.exec.Script("echo", inputStep(t0.Add(time.Hour)), taskstest.Step{Cancelled: taskstest.Reason("")})
	acc := h.admit(h.inv("echo", `{}`))
	p, s := h.pendingInput(acc.TaskID)
	_, rev, err := h.eng.Cancel(context.Background(), tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: acc.TaskID, ExpectedRevision: s.Revision})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.answer(acc.TaskID, p, rev, `{"unit":"C"}`); !errors.Is(err, tasks.ErrConflict) {
		t.Fatalf("answer after cancel: %v", err)
	}
	if ev := h.terminal(acc.TaskID); ev.Type != agentproto.EventCancelled || string(ev.Payload) != `{}` {
		t.Fatalf("settled %s %s", ev.Type, ev.Payload)
	}
	rec := h.exec.Record(acc.TaskID)
	<-rec.Done
	if !errors.Is(rec.Errors[0], tasks.ErrInputSuperseded) {
		t.Fatalf("RequestInput returned %v", rec.Errors[0])
	}
	if _, err := h.answer(acc.TaskID, p, s.Revision, `{"unit":"C"}`); !errors.Is(err, tasks.ErrConflict) {
		t.Fatalf("answer after settlement: %v", err)
	}
	h.checkHistory(acc.TaskID)
}

// Input races are ordered by commit: an answer committed before the
// cancellation stays valid.
func TestInputBeforeCancel(t *testing.T) {
	h := newHarness(t)
	h.exec.Script("echo", inputStep(time.Time{}), taskstest.Step{AwaitCancel: true}, taskstest.Step{Cancelled: taskstest.Reason("")})
	acc := h.admit(h.inv("echo", `{}`))
	p, s := h.pendingInput(acc.TaskID)
	rev, err := h.answer(acc.TaskID, p, s.Revision, `{"unit":"C"}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.eng.Cancel(context.Background(), tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: acc.TaskID, ExpectedRevision: rev}); err != nil {
		t.Fatal(err)
	}
	h.terminal(acc.TaskID)
	if r, err := h.answer(acc.TaskID, p, s.Revision, `{"unit":"C"}`); err != nil || r != rev {
		t.Fatalf("replay after later transitions: %d %v", r, err)
	}
	h.checkHistory(acc.TaskID)
}

func TestDeadlineTimer(t *testing.T) {
	h := newHarness(t)
	h.exec.Script("forecast.get", taskstest.Step{Gate: make(chan struct{})})
	inv := h.inv("forecast.get", `{"city":"Riga"}`)
	inv.Deadline = "2026-07-27T19:15:01.0000000005Z"
	acc := h.admit(inv)
	h.waitState(acc.TaskID, agentproto.StateRunning)
	h.clk.Set(time.Date(2026, 7, 27, 19, 15, 1, 0, time.UTC))
	if s := h.state(acc.TaskID); s.State != agentproto.StateRunning {
		t.Fatalf("expired before the deadline: %s", s.State)
	}
	h.clk.Advance(time.Nanosecond)
	ev := h.terminal(acc.TaskID)
	if string(ev.Payload) != `{"error":{"code":"deadline-expired","message":"The task deadline passed before a result.","retryable":false}}` {
		t.Fatalf("settled %s", ev.Payload)
	}
	h.checkHistory(acc.TaskID)
	rec := h.exec.Record(acc.TaskID)
	<-rec.Done // the executor's context ended with the settlement
}

// At or after the deadline every attempted mutation settles the task
// deadline-expired instead, even when no timer has fired.
func TestDeadlineAtCommitBoundary(t *testing.T) {
	deadline := time.Date(2026, 7, 27, 19, 15, 0, 500, time.UTC)
	mutations := map[string]taskstest.Step{
		"progress":  {Progress: &tasks.Progress{Percent: taskstest.Percent(1)}},
		"complete":  {Echo: true},
		"fail":      {Fail: &tasks.Failure{Code: "x:y", Message: "m"}},
		"cancelled": {Cancelled: taskstest.Reason("")},
		"input":     inputStep(time.Time{}),
	}
	for name, step := range mutations {
		for _, at := range []time.Duration{-time.Nanosecond, 0} {
			t.Run(name+"/"+at.String(), func(t *testing.T) {
				h := newHarness(t)
				h.clk.timersOff.Store(true)
				gate := make(chan struct{})
				h.exec.Script("forecast.get", taskstest.Step{Gate: gate}, step, taskstest.Step{Fail: &tasks.Failure{Code: "x:after", Message: "m"}})
				inv := h.inv("forecast.get", `{"city":"Riga"}`)
				inv.Deadline = "2026-07-27T21:15:00.0000005+02:00"
				acc := h.admit(inv)
				h.waitState(acc.TaskID, agentproto.StateRunning)
				h.clk.Set(deadline.Add(at))
				close(gate)
				if name == "input" && at < 0 {
					h.waitType(acc.TaskID, agentproto.EventInputRequired)
					h.checkHistory(acc.TaskID)
					return
				}
				ev := h.terminal(acc.TaskID)
				expired := strings.Contains(string(ev.Payload), `"deadline-expired"`)
				if expired != (at == 0) {
					t.Fatalf("at %v settled %s", at, ev.Payload)
				}
				if at == 0 {
					evs := h.checkHistory(acc.TaskID)
					if len(evs) != 2 {
						t.Fatalf("a mutation committed at the deadline: %v", types(evs))
					}
				}
				h.checkHistory(acc.TaskID)
			})
		}
	}
}

// The deadline is checked before initial dispatch: the backend is never
// called for a task whose deadline passed while it waited.
func TestDeadlineBeforeDispatch(t *testing.T) {
	h := newHarness(t)
	h.clk.timersOff.Store(true)
	tasks.HoldDispatch(h.eng, true)
	inv := h.inv("forecast.get", `{"city":"Riga"}`)
	inv.Deadline = "2026-07-27T19:14:02Z"
	acc := h.admit(inv)
	h.clk.Advance(time.Second)
	if err := tasks.Dispatch(h.eng, acc.TaskID); err != nil {
		t.Fatal(err)
	}
	ev := h.terminal(acc.TaskID)
	if !strings.Contains(string(ev.Payload), "deadline-expired") || len(h.exec.Calls()) != 0 {
		t.Fatalf("settled %s after %d calls", ev.Payload, len(h.exec.Calls()))
	}
	// Cancel and input at the deadline settle instead, too.
	h2 := newHarness(t)
	h2.clk.timersOff.Store(true)
	h2.exec.Script("forecast.get", taskstest.Step{Gate: make(chan struct{})})
	inv = h2.inv("forecast.get", `{"city":"Riga"}`)
	inv.Deadline = "2026-07-27T19:14:02Z"
	acc = h2.admit(inv)
	s := h2.waitState(acc.TaskID, agentproto.StateRunning)
	h2.clk.Advance(time.Second)
	_, _, err := h2.eng.Cancel(context.Background(), tasks.CancelRequest{Caller: alice, Endpoint: weather, TaskID: acc.TaskID, ExpectedRevision: s.Revision})
	wantErr(t, err, tasks.ErrConflict)
	if ev := h2.terminal(acc.TaskID); !strings.Contains(string(ev.Payload), "deadline-expired") {
		t.Fatalf("settled %s", ev.Payload)
	}
	h2.checkHistory(acc.TaskID)
}

func TestRecoveryAuthorization(t *testing.T) {
	h := newHarness(t)
	gate := make(chan struct{})
	h.exec.Script("echo", taskstest.Step{Gate: gate}, taskstest.Step{Echo: true})
	acc := h.admit(h.inv("echo", `{}`))
	h.waitState(acc.TaskID, agentproto.StateRunning)
	ctx := context.Background()
	for name, q := range map[string][3]string{
		"other caller":   {mallory, weather, acc.TaskID},
		"other endpoint": {alice, other, acc.TaskID},
		"unknown task":   {alice, weather, ids.New("task-")},
	} {
		if _, err := h.eng.State(ctx, q[0], q[1], q[2]); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("%s state: %v", name, err)
		}
		if _, err := h.eng.Result(ctx, q[0], q[1], q[2]); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("%s result: %v", name, err)
		}
	}
	if _, err := h.eng.State(ctx, alice, weather, "task-1"); !errors.Is(err, tasks.ErrBadRequest) {
		t.Fatalf("invalid id: %v", err)
	}
	if _, err := h.eng.Result(ctx, alice, weather, acc.TaskID); !errors.Is(err, tasks.ErrUnexpectedRequest) {
		t.Fatalf("result while running: %v", err)
	}
	// Visibility or invocation policy changing later does not deny recovery.
	h.pol.Revoke(alice, weather)
	if s := h.state(acc.TaskID); s.State != agentproto.StateRunning || s.ResultAvailable {
		t.Fatalf("state %+v", s)
	}
	close(gate)
	h.terminal(acc.TaskID)
	h.checkHistory(acc.TaskID)
}
