package accbridge

import (
	"encoding/json"
	"testing"

	"github.com/agentgw/agentgw/backendkit"
)

// A completion payload that cannot be read once its secrets are redacted
// (a secret outside a JSON string breaks the document) is an error, never
// the empty result {} it used to become; a readable one is carried.
func TestCompletionResultUnreadableIsNotEmpty(t *testing.T) {
	t.Parallel()
	red := backendkit.NewRedactor(nil)
	red.Add("8675309123")
	if r, err := completionResult(red, json.RawMessage(`{"pin":8675309123,"note":"\u0041"}`)); err == nil {
		t.Fatalf("unreadable payload carried as %s / %s", r.Content, r.StructuredContent)
	}
	r, err := completionResult(red, json.RawMessage(`{"summary":"key 8675309123 \u0041"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.StructuredContent) == "{}" || !json.Valid(r.StructuredContent) {
		t.Fatalf("readable payload became %s", r.StructuredContent)
	}
	var sc map[string]string
	json.Unmarshal(r.StructuredContent, &sc)
	if sc["summary"] != "key "+backendkit.Redacted+" A" {
		t.Fatalf("summary %q", sc["summary"])
	}
}
