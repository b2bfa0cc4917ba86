package mcpfront

import (
	"encoding/json"
	"strings"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
)

func TestTaskIDRoundTrip(t *testing.T) {
	ep := jid.MustParse("weather@agents.example.test/res")
	id := encodeTaskID(ep, "task-0123456789abcdefghijkl", "forecast.get")
	if !strings.HasPrefix(id, "xmpp1.") {
		t.Fatalf("id %q", id)
	}
	ref, err := decodeTaskID(id)
	if err != nil || ref.ep.String() != "weather@agents.example.test" || ref.taskID != "task-0123456789abcdefghijkl" || ref.tool != "forecast.get" {
		t.Fatalf("decode = %+v, %v", ref, err)
	}
}

func TestTaskIDRejectsForgeries(t *testing.T) {
	enc := func(parts ...string) string {
		out := []string{}
		for _, p := range parts {
			out = append(out, b64.EncodeToString([]byte(p)))
		}
		return taskIDPrefix + strings.Join(out, ".")
	}
	for name, id := range map[string]string{
		"empty":         "",
		"no prefix":     "786512e2-9e0d-44bd-8f29-789f320fe840",
		"two parts":     enc("a@b", "task-0123456789abcdefghijkl"),
		"four parts":    enc("a@b", "task-0123456789abcdefghijkl", "t", "x"),
		"not base64":    taskIDPrefix + "!!.!!.!!",
		"domain jid":    enc("agents.example.test", "task-0123456789abcdefghijkl", "t"),
		"full jid":      enc("a@b/res", "task-0123456789abcdefghijkl", "t"),
		"bad jid":       enc("a@@b", "task-0123456789abcdefghijkl", "t"),
		"task alphabet": enc("a@b", "task id with spaces", "t"),
		"task too long": enc("a@b", strings.Repeat("x", 129), "t"),
		"no tool":       enc("a@b", "task-0123456789abcdefghijkl", ""),
		"too long":      taskIDPrefix + strings.Repeat("A", maxTaskIDLen),
	} {
		if _, err := decodeTaskID(id); err != errNoTask {
			t.Errorf("%s: decode = %v, want errNoTask", name, err)
		}
	}
	if strings.Contains(errNoTask.Error(), "xmpp1") {
		t.Error("the error names an id")
	}
}

func TestLiftTaskParam(t *testing.T) {
	in := json.RawMessage(`{"name":"w.echo","arguments":{"message":"task"},"task":{"ttl":60000},"_meta":{"progressToken":7}}`)
	var got struct {
		Name string                     `json:"name"`
		Task json.RawMessage            `json:"task"`
		Meta map[string]json.RawMessage `json:"_meta"`
		Args map[string]string          `json:"arguments"`
	}
	if err := json.Unmarshal(liftTaskParam(in), &got); err != nil {
		t.Fatal(err)
	}
	if got.Task != nil || string(got.Meta[metaTaskParams]) != `{"ttl":60000}` || string(got.Meta["progressToken"]) != "7" || got.Args["message"] != "task" {
		t.Fatalf("lifted = %+v", got)
	}
	// No task member (an argument named "task" does not count): unchanged.
	for _, raw := range []string{`{"name":"x","arguments":{"task":1}}`, `not json "task"`, `{"task":{},"_meta":[1]}`} {
		if out := liftTaskParam(json.RawMessage(raw)); string(out) != raw {
			t.Errorf("%s → %s", raw, out)
		}
	}
	body := liftHTTPBody([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{}}}`))
	if !strings.Contains(string(body), metaTaskParams) || strings.Contains(string(body), `"task":{}`) {
		t.Fatalf("http body = %s", body)
	}
	other := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"task"}}`)
	if string(liftHTTPBody(other)) != string(other) {
		t.Error("a tasks/get body was rewritten")
	}
}

func TestTaskParamsNeverFailNorEcho(t *testing.T) {
	for raw, want := range map[string]string{
		`{"taskId":42}`:                     "params.taskId must be a string",
		`"<script>"`:                        "params must be an object",
		`{"cursor":{"x":"<script>"}}`:       "params.cursor must be a string",
		`{"inputResponses":"<script>"}`:     "params.inputResponses must be an object",
		`{"_meta":"<script>","taskId":"a"}`: "params._meta must be an object",
		`{"taskId":"a"}`:                    "",
	} {
		var p taskParams
		if err := json.Unmarshal([]byte(raw), &p); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if p.bad != want {
			t.Errorf("%s: bad = %q, want %q", raw, p.bad, want)
		}
	}
}

func TestTaskSupportFromManifest(t *testing.T) {
	for exec, want := range map[string]string{
		"":                            "optional",
		`{"taskSupport":"optional"}`:  "optional",
		`{"taskSupport":"required"}`:  "optional",
		`{"taskSupport":"forbidden"}`: "forbidden",
		`[1]`:                         "optional",
	} {
		b := &binding{}
		b.tool.Execution = json.RawMessage(exec)
		if exec == "" {
			b.tool.Execution = nil
		}
		if got := b.taskSupport(); got != want {
			t.Errorf("%s: %s, want %s", exec, got, want)
		}
	}
}

func TestStatusMapping(t *testing.T) {
	for x, want := range map[string]string{
		"accepted": "working", "running": "working", "cancelling": "working",
		"input_required": "input_required", "completed": "completed", "failed": "failed", "cancelled": "cancelled",
	} {
		if got := status(agentprotoState(x)); got != want {
			t.Errorf("%s → %s, want %s", x, got, want)
		}
	}
}

func agentprotoState(s string) agentproto.State { return agentproto.State(s) }
