package mcpfront

import (
	"encoding/json"
	"errors"
	"testing"
)

// The schema server-everything's trigger-elicitation-request sends, as
// the MCP backend passes it into XMPP: every MCP form feature.
const everythingForm = `{"type":"object","properties":{
 "name":{"title":"String","type":"string","description":"Your full, legal name"},
 "check":{"title":"Boolean","type":"boolean"},
 "email":{"type":"string","format":"email"},
 "integer":{"type":"integer","minimum":1,"maximum":100,"default":42},
 "untitledSingleSelectEnum":{"type":"string","enum":["Monica","Rachel"],"default":"Monica"},
 "untitledMultipleSelectEnum":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","enum":["Guitar","Piano"]},"default":["Guitar"]},
 "titledSingleSelectEnum":{"type":"string","oneOf":[{"const":"hero-1","title":"Superman"}],"default":"hero-1"},
 "titledMultipleSelectEnum":{"type":"array","items":{"anyOf":[{"const":"fish-1","title":"Tuna"}]},"default":["fish-1"]},
 "legacyTitledEnum":{"type":"string","enum":["pet-1","pet-2"],"enumNames":["Cats","Dogs"]}
},"required":["name"]}`

func TestFormKeepsMCPFormsExactly(t *testing.T) {
	t.Parallel()
	f := formFor(json.RawMessage(everythingForm))
	if f.Wrapped {
		t.Fatal("an MCP-expressible schema was wrapped")
	}
	if !sameJSON(t, f.Schema, everythingForm) {
		b, _ := json.Marshal(f.Schema)
		t.Errorf("form differs from the original MCP form:\n%s", b)
	}
}

func TestFormDropsNarrowingKeywords(t *testing.T) {
	t.Parallel()
	f := formFor(json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"code":{"type":"string","pattern":"^[A-Z]+$","format":"hostname"},"n":{"type":"number","exclusiveMinimum":0}}}`))
	if f.Wrapped {
		t.Fatal("wrapped")
	}
	if !sameJSON(t, f.Schema, `{"type":"object","properties":{"code":{"type":"string"},"n":{"type":"number"}}}`) {
		t.Errorf("form = %v", f.Schema)
	}
	if _, err := f.answer(map[string]any{"code": "abc", "n": 1}, json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]+$"}}}`)); !errors.Is(err, errAnswerInvalid) {
		t.Errorf("answer breaking a dropped keyword: err = %v", err)
	}
}

func TestFormWrapsRicherSchemas(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"object"}}}`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}}`,
		`{"type":"object","properties":{"a":{"type":["string","null"]}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`,
		`{"oneOf":[{"type":"object"},{"type":"string"}]}`,
		`{"type":"string"}`,
		`{"type":"object","properties":{"a":{"type":"string","oneOf":[{"const":1}]}}}`,
	} {
		f := formFor(json.RawMessage(s))
		if !f.Wrapped {
			t.Errorf("%s: not wrapped: %v", s, f.Schema)
		}
	}
	f := formFor(json.RawMessage(`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]}`))
	v, err := f.answer(map[string]any{"json": `{"a":[1,2]}`}, json.RawMessage(`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]}`))
	if err != nil || string(v) != `{"a":[1,2]}` {
		t.Errorf("wrapped answer = %s, %v", v, err)
	}
	if _, err := f.answer(map[string]any{"json": `{"a":["x"]}`}, json.RawMessage(`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}}`)); !errors.Is(err, errAnswerInvalid) {
		t.Errorf("invalid wrapped answer: %v", err)
	}
	if _, err := f.answer(map[string]any{"json": `{not json`}, json.RawMessage(`{}`)); !errors.Is(err, errAnswerInvalid) {
		t.Errorf("non-JSON wrapped answer: %v", err)
	}
}

func TestFormPairsEnumNamesOnly(t *testing.T) {
	t.Parallel()
	f := formFor(json.RawMessage(`{"type":"object","properties":{"p":{"type":"string","enum":["a","b"],"enumNames":["A"]}}}`))
	if !sameJSON(t, f.Schema, `{"type":"object","properties":{"p":{"type":"string","enum":["a","b"]}}}`) {
		t.Errorf("form = %v", f.Schema)
	}
}
