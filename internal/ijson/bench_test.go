package ijson

import (
	"encoding/json"
	"strconv"
	"testing"
)

// manifest200 builds a manifest of 200 tools, each with a five-property
// input schema, serialized by encoding/json.
func manifest200(tb testing.TB) []byte {
	tools := make([]any, 0, 200)
	for i := range 200 {
		props := map[string]any{}
		for j := range 5 {
			props["param"+strconv.Itoa(j)] = map[string]any{
				"type":        []string{"string", "integer", "number", "boolean", "string"}[j],
				"description": "Parameter " + strconv.Itoa(j) + " of tool " + strconv.Itoa(i) + " — ünïcödé text",
				"maximum":     1e6 + float64(j)/3,
			}
		}
		tools = append(tools, map[string]any{
			"name":        "tool." + strconv.Itoa(i),
			"title":       "Tool number " + strconv.Itoa(i),
			"description": "Does thing " + strconv.Itoa(i) + " with care.",
			"inputSchema": map[string]any{
				"type": "object", "properties": props,
				"required": []string{"param0", "param1"}, "additionalProperties": false,
			},
			"annotations": map[string]any{"readOnlyHint": i%2 == 0, "idempotentHint": true},
		})
	}
	doc, err := json.Marshal(map[string]any{
		"manifestSpecVersion": "0",
		"agent":               map[string]any{"jid": "weather@agents.example", "name": "weather", "version": "1.4.0"},
		"tools":               tools,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return doc
}

func BenchmarkCanonicalizeHashManifest200(b *testing.B) {
	doc := manifest200(b)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		canon, _, err := Canonicalize(doc, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		_ = Hash(canon)
	}
}

func TestManifest200(t *testing.T) {
	doc := manifest200(t)
	canon, v, err := Canonicalize(doc, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.(map[string]any)["tools"].([]any)) != 200 {
		t.Fatal("tools lost")
	}
	// encoding/json sorts keys by bytes; with ASCII keys that equals JCS order.
	if string(canon) != string(doc) {
		t.Errorf("canonical form differs from sorted encoding/json output")
	}
}
