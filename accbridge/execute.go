package accbridge

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/tasks"
)

// Execute runs the run tool as one ACC run (create_run with a fresh
// run_id, recorded for the task before it is sent).
func (a *Agent) Execute(ctx context.Context, call tasks.Call, run tasks.Run) {
	ts := &taskSink{a: a, run: run, who: call.Caller, task: call.TaskID}
	if call.Tool != toolName {
		ts.fail(tasks.Failure{Code: agentproto.CodeInternalError, Message: "unknown tool"})
		return
	}
	var req runRequest
	if err := json.Unmarshal(call.Arguments, &req); err != nil || strings.TrimSpace(req.Goal) == "" {
		ts.fail(tasks.Failure{Code: agentproto.CodeInternalError, Message: "the arguments are not a run request"})
		return
	}
	a.execute(ctx, call.TaskID, req, call.Deadline, ts)
}

// taskSink reports a run to its task.
type taskSink struct {
	a    *Agent
	run  tasks.Run
	who  string
	task string
}

func (t *taskSink) caller() string                   { return t.who }
func (t *taskSink) cancelRequested() <-chan struct{} { return t.run.CancelRequested() }

func (t *taskSink) warn(what string, err error) {
	if err != nil && !errors.Is(err, tasks.ErrSettled) {
		t.a.s.log.Warn("acc: cannot report to the task", "task", t.task, "what", what, "error", err)
	}
}

func (t *taskSink) progress(p tasks.Progress) { t.warn("progress", t.run.Progress(p)) }
func (t *taskSink) fail(f tasks.Failure)      { t.warn("failure", t.run.Fail(f)) }
func (t *taskSink) cancelled(reason string)   { t.warn("cancellation", t.run.Cancelled(reason)) }

// complete carries the completion payload as structuredContent (an
// object; anything else is wrapped as {"value": …}) and as text.
func (t *taskSink) complete(payload json.RawMessage) {
	r, err := completionResult(t.a.s.o.Redactor, payload)
	if err != nil {
		t.fail(tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "The connector's completion payload cannot be carried: it is not valid JSON once secrets are redacted."})
		return
	}
	t.warn("completion", t.run.Complete(r))
}

// completionResult is the tool result of a completion payload. A payload
// that cannot be read once redacted is an error, never an empty result.
func completionResult(red *backendkit.Redactor, payload json.RawMessage) (tasks.ToolResult, error) {
	if len(payload) == 0 || string(payload) == "null" {
		payload = json.RawMessage(`{}`)
	}
	clean, err := scrubJSON(red, payload)
	if err != nil {
		return tasks.ToolResult{}, err
	}
	structured := json.RawMessage(clean)
	if clean[0] != '{' {
		structured = json.RawMessage(`{"value":` + string(clean) + `}`)
	}
	text := completionText(structured)
	tb, _ := json.Marshal(text)
	return tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":` + string(tb) + `}]`), StructuredContent: structured}, nil
}

// completionText is the human text of a completion: its summary, result,
// output or text member when there is one, else the JSON.
func completionText(structured json.RawMessage) string {
	var m map[string]any
	json.Unmarshal(structured, &m)
	for _, k := range []string{"summary", "result", "output", "text", "message", "value"} {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return string(structured)
}

// approvalSchema is the approve/deny form.
const approvalSchema = `{"type":"object","additionalProperties":false,"required":["decision"],"properties":{` +
	`"decision":{"type":"string","enum":["approve","deny"],"title":"Decision"},` +
	`"reason":{"type":"string","maxLength":500,"title":"Reason (optional)"}}}`

// approve asks the caller as input_required. The action is quoted as a
// JSON string: data, never markup.
func (t *taskSink) approve(ctx context.Context, ap approval) (bool, string, error) {
	q := "The agent asks for approval of a " + ap.risk + " risk action: " + strconv.Quote(clip(ap.action, 1000)) +
		". Answer decision approve or deny."
	ans, err := t.run.RequestInput(ctx, tasks.InputRequest{Question: q, Schema: json.RawMessage(approvalSchema), ExpiresAt: ap.expires})
	if err != nil {
		return false, "", err
	}
	var v struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}
	json.Unmarshal(ans, &v)
	return v.Decision == "approve", clip(v.Reason, 500), nil
}
