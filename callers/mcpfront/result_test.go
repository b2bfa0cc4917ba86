package mcpfront

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCompletedResultPassedThrough(t *testing.T) {
	t.Parallel()
	payload := `{"summary":"ok","result":{
	 "content":[
	  {"type":"text","text":"hello","annotations":{"audience":["user"],"priority":0.5}},
	  {"type":"image","data":"aGk=","mimeType":"image/png"},
	  {"type":"resource_link","uri":"file:///a","name":"a"},
	  {"type":"resource","resource":{"uri":"file:///b","text":"b"}},
	  {"type":"hologram","data":"x"}],
	 "structuredContent":{"big":9007199254740993,"f":1.5},
	 "isError":true,
	 "_meta":{"vendor/k":{"n":12345678901234567890}}}}`
	res, err := completedResult(json.RawMessage(payload), taskMeta{TaskID: "task-1"}, true)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		`"structuredContent":{"big":9007199254740993,"f":1.5}`,
		`"vendor/k":{"n":12345678901234567890}`,
		`"isError":true`,
		`"annotations":{"audience":["user"],"priority":0.5}`,
		`"type":"resource_link"`,
		`"type":"resource"`,
		`"mimeType":"image/png"`,
		`"agentgw/task":{`,
		`"convertedContent":1`,
		`"summary":"ok"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s in\n%s", want, s)
		}
	}
	if tc, ok := res.Content[4].(*mcp.TextContent); !ok || tc.Text != `{"type":"hologram","data":"x"}` {
		t.Errorf("unknown content = %#v", res.Content[4])
	}
}

func TestCompletedNonObjectStructured(t *testing.T) {
	t.Parallel()
	p := json.RawMessage(`{"result":{"content":[],"structuredContent":[1,2]}}`)
	old, _ := completedResult(p, taskMeta{}, true)
	if old.StructuredContent != nil || len(old.Content) != 1 || old.Meta[MetaTask].(taskMeta).DroppedStructured != true {
		t.Errorf("pre-2026 host: %+v", old)
	}
	cur, _ := completedResult(p, taskMeta{}, false)
	if b, _ := json.Marshal(cur.StructuredContent); string(b) != "[1,2]" {
		t.Errorf("2026 host: %s", b)
	}
}

func TestCompletedWithoutResult(t *testing.T) {
	t.Parallel()
	for _, p := range []string{`{}`, `[]`, `{"result":[1]}`} {
		if _, err := completedResult(json.RawMessage(p), taskMeta{}, true); err == nil {
			t.Errorf("%s accepted", p)
		}
	}
}

func TestFailedAndCancelledText(t *testing.T) {
	t.Parallel()
	r := failedResult(json.RawMessage(`{"error":{"code":"unavailable","message":"down\u0007 now","retryable":true}}`), taskMeta{})
	// The control character is replaced under the one display-text rule
	// (internal/displaytext: U+FFFD; the front used to write a space).
	if !r.IsError || r.Content[0].(*mcp.TextContent).Text != "The XMPP task failed: unavailable: down\uFFFD now (retryable)" {
		t.Errorf("failed = %+v", r.Content[0])
	}
	e := cancelledError(json.RawMessage(`{"reason":"`+strings.Repeat("r", 5000)+`"}`), taskMeta{TaskID: "task-1"})
	if e.Code != CodeTaskCancelled || len(e.Message) > maxMessageText+100 {
		t.Errorf("cancelled = %d %d", e.Code, len(e.Message))
	}
	if !strings.Contains(string(e.Data), `"taskId":"task-1"`) {
		t.Errorf("data = %s", e.Data)
	}
}
