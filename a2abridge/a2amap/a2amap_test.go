package a2amap

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentgw/agentgw/agentproto"
)

// Every task state maps to an A2A state, and back to a state of the same
// phase; terminal stays terminal.
func TestStatesBothWays(t *testing.T) {
	for _, s := range agentproto.States {
		a := State(s)
		if a == a2a.TaskStateUnknown {
			t.Errorf("%s has no A2A state", s)
		}
		back, ok := FromA2A(a)
		if !ok || back.Terminal() != s.Terminal() {
			t.Errorf("%s → %s → %s", s, a, back)
		}
	}
	for _, a := range []a2a.TaskState{a2a.TaskStateRejected, a2a.TaskStateAuthRequired} {
		if st, ok := FromA2A(a); !ok || st != agentproto.StateFailed || FailureCode(a) == CodeFailed {
			t.Errorf("%s → %s %v %s", a, st, ok, FailureCode(a))
		}
	}
	if _, ok := FromA2A("weird"); ok {
		t.Error("an unknown A2A state mapped")
	}
}

// A CallToolResult survives XMPP → A2A artifact → XMPP: text, structured
// content, and other blocks as data.
func TestResultRoundTrip(t *testing.T) {
	in := json.RawMessage(`{"content":[{"type":"text","text":"hi"},{"type":"image","data":"AAAA","mimeType":"image/png"}],"structuredContent":{"n":1},"isError":true}`)
	art, err := ResultArtifact(in, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if len(art.Parts) != 3 || art.Metadata[MetaIsError] != true {
		t.Fatalf("artifact %+v", art)
	}
	out, err := PartsResult(art.Parts, true)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
		IsError           bool             `json:"isError"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Content[0]["text"] != "hi" || r.StructuredContent["type"] != "image" || !r.IsError {
		// The first data part (the image block) becomes structuredContent.
		t.Errorf("round trip %s", out)
	}
	if _, err := ResultArtifact(json.RawMessage(`[1]`), "x"); err == nil {
		t.Error("a non-object result accepted")
	}
}

func TestBoundKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", 10)
	if b := Bound(s, 5); b != "éé" {
		t.Errorf("%q", b)
	}
	if got := Text([]a2a.Part{a2a.TextPart{Text: "a"}, a2a.DataPart{Data: map[string]any{}}, a2a.TextPart{Text: "b"}}); got != "a\nb" {
		t.Errorf("%q", got)
	}
}
