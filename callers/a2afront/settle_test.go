package a2afront

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentgw/agentgw/agentproto"
)

// A completed XMPP task whose result the front cannot read (a federated
// gateway's malformed payload) is an A2A failure with agentgw:a2a-protocol,
// never a completed task without artifacts; a readable one is carried.
func TestSettleUnreadableResultIsNotEmptySuccess(t *testing.T) {
	t.Parallel()
	var f Front
	for name, payload := range map[string]string{
		"not JSON":             `{"result":`,
		"content not objects":  `{"result":{"content":["text"]}}`,
		"result not an object": `{"result":42}`,
	} {
		tk := &a2a.Task{ID: "task-x"}
		f.settle(tk, agentproto.StateCompleted, json.RawMessage(payload))
		if tk.Status.State != a2a.TaskStateFailed || len(tk.Artifacts) != 0 || tk.Status.Message == nil ||
			!strings.Contains(fmtParts(tk.Status.Message.Parts), "agentgw:a2a-protocol") {
			t.Errorf("%s: state %s, %d artifacts, message %v", name, tk.Status.State, len(tk.Artifacts), tk.Status.Message)
		}
	}
	tk := &a2a.Task{ID: "task-y"}
	f.settle(tk, agentproto.StateCompleted, json.RawMessage(`{"result":{"content":[{"type":"text","text":"ok"}]}}`))
	if tk.Status.State != a2a.TaskStateCompleted || len(tk.Artifacts) != 1 {
		t.Errorf("readable result: state %s, %d artifacts", tk.Status.State, len(tk.Artifacts))
	}
}

func fmtParts(ps []a2a.Part) string {
	var b strings.Builder
	for _, p := range ps {
		if tp, ok := p.(a2a.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	return b.String()
}
