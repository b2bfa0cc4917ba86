package mcpfront

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
)

// An elicitation form is what the front asks an MCP host for when an XMPP
// task is input_required. MCP form elicitation accepts only a flat object
// of primitive properties (string, number, integer, boolean, and enums of
// strings); an XMPP input schema may be any JSON Schema 2020-12 document.
//
// When the XMPP schema fits that subset, the form carries the same
// properties with only the keywords MCP allows; other keywords (pattern,
// exclusiveMinimum, additionalProperties, ...) are dropped from the form
// and enforced afterwards, because every answer is validated against the
// original XMPP schema before it is sent. When it does not fit (nested
// objects, arrays of non-enum items, $ref, oneOf at the root, type unions,
// a non-object root), the form has a single string property "json" whose
// description holds the XMPP schema, and the answer is that text parsed
// as JSON.
type elicitForm struct {
	Schema  map[string]any // the MCP requestedSchema
	Wrapped bool           // the answer is JSON text in property "json"
}

// wrappedProperty is the one property of a wrapped form.
const wrappedProperty = "json"

// maxSchemaInDescription bounds the XMPP schema quoted in a wrapped form.
const maxSchemaInDescription = 4000

// formFor converts an XMPP input schema into an MCP elicitation form.
func formFor(xmppSchema json.RawMessage) elicitForm {
	if f, ok := flatForm(xmppSchema); ok {
		return elicitForm{Schema: f}
	}
	desc := "Enter a JSON value matching this JSON Schema: " + compactSchema(xmppSchema)
	return elicitForm{
		Wrapped: true,
		Schema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				wrappedProperty: map[string]any{
					"type":        "string",
					"title":       "Answer (JSON)",
					"description": desc,
				},
			},
			"required": []any{wrappedProperty},
		},
	}
}

func compactSchema(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "{}"
	}
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > maxSchemaInDescription {
		s = truncateUTF8(s, maxSchemaInDescription) + "…"
	}
	return s
}

// Keywords that only annotate a schema; they may appear anywhere without
// changing which values are valid.
var annotationKeywords = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"examples": true, "default": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

// Root keywords a flat form can live with: they either annotate, or only
// narrow what is valid and are checked on the answer.
var flatRootKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"minProperties": true, "maxProperties": true, "propertyNames": true, "unevaluatedProperties": true,
}

// Property keywords that only narrow a primitive; dropped from the form and
// checked on the answer.
var narrowingKeywords = map[string]bool{
	"pattern": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"const": true, "uniqueItems": true, "contentMediaType": true, "contentEncoding": true,
}

var mcpFormats = map[string]bool{"email": true, "uri": true, "date": true, "date-time": true}

// flatForm returns the MCP form for a schema that fits MCP's subset.
func flatForm(raw json.RawMessage) (map[string]any, bool) {
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil || root == nil {
		return nil, false
	}
	for k := range root {
		if !annotationKeywords[k] && !flatRootKeywords[k] {
			return nil, false
		}
	}
	if t, ok := root["type"]; ok && t != "object" {
		return nil, false
	}
	props := map[string]any{}
	if p, ok := root["properties"]; ok {
		pm, ok := p.(map[string]any)
		if !ok {
			return nil, false
		}
		for name, ps := range pm {
			conv, ok := flatProperty(ps)
			if !ok {
				return nil, false
			}
			props[name] = conv
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if r, ok := root["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return nil, false
		}
		for _, v := range list {
			if _, ok := v.(string); !ok {
				return nil, false
			}
		}
		if len(list) > 0 {
			out["required"] = list
		}
	}
	return out, true
}

// flatProperty converts one property schema, keeping the keywords MCP
// allows for its kind.
func flatProperty(v any) (map[string]any, bool) {
	p, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	typ, _ := p["type"].(string)
	if _, has := p["type"]; has && typ == "" {
		return nil, false // a type union such as ["string","null"]
	}
	if typ == "" {
		// An untyped enum of strings is a string enum.
		if stringList(p["enum"]) == nil {
			return nil, false
		}
		typ = "string"
	}
	out := map[string]any{"type": typ}
	keep := func(keys ...string) {
		for _, k := range keys {
			if val, ok := p[k]; ok {
				out[k] = val
			}
		}
	}
	allowed := map[string]bool{"type": true}
	allow := func(keys ...string) {
		for _, k := range keys {
			allowed[k] = true
		}
	}
	switch typ {
	case "string":
		allow("title", "description", "minLength", "maxLength", "format", "default", "enum", "enumNames", "oneOf")
		keep("title", "description", "minLength", "maxLength")
		if f, ok := p["format"].(string); ok && mcpFormats[f] {
			out["format"] = f
		}
		if d, ok := p["default"].(string); ok {
			out["default"] = d
		}
		if e, has := p["enum"]; has {
			if stringList(e) == nil {
				return nil, false
			}
			out["enum"] = e
			// Display names only when they pair up with the values.
			if n := stringList(p["enumNames"]); n != nil && len(n) == len(stringList(e)) {
				out["enumNames"] = p["enumNames"]
			}
		}
		if o, has := p["oneOf"]; has {
			if !titledConsts(o) {
				return nil, false
			}
			out["oneOf"] = o
		}
	case "number", "integer":
		allow("title", "description", "minimum", "maximum", "default")
		keep("title", "description")
		for _, k := range []string{"minimum", "maximum", "default"} {
			if n, ok := p[k].(float64); ok {
				out[k] = n
			}
		}
	case "boolean":
		allow("title", "description", "default")
		keep("title", "description")
		if d, ok := p["default"].(bool); ok {
			out["default"] = d
		}
	case "array":
		allow("title", "description", "minItems", "maxItems", "items", "default")
		keep("title", "description", "minItems", "maxItems")
		items, ok := p["items"].(map[string]any)
		if !ok {
			return nil, false
		}
		switch {
		case items["type"] == "string" && stringList(items["enum"]) != nil && len(items) == 2:
			out["items"] = map[string]any{"type": "string", "enum": items["enum"]}
		case titledConsts(items["anyOf"]) && len(items) == 1:
			out["items"] = map[string]any{"anyOf": items["anyOf"]}
		default:
			return nil, false
		}
		if d := stringList(p["default"]); d != nil {
			out["default"] = p["default"]
		}
	default:
		return nil, false
	}
	for k := range p {
		if !allowed[k] && !annotationKeywords[k] && !narrowingKeywords[k] {
			return nil, false
		}
	}
	return out, true
}

// stringList returns v as a list of strings, or nil.
func stringList(v any) []string {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// titledConsts reports whether v is [{"const": string, "title": string}, ...].
func titledConsts(v any) bool {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return false
	}
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok || len(m) != 2 {
			return false
		}
		if _, ok := m["const"].(string); !ok {
			return false
		}
		if _, ok := m["title"].(string); !ok {
			return false
		}
	}
	return true
}

// errAnswerInvalid marks an accepted elicitation whose content does not
// satisfy the XMPP input schema.
var errAnswerInvalid = errors.New("the answer does not match the requested schema")

// answer turns accepted form content into canonical JSON that satisfies
// the XMPP schema.
func (f elicitForm) answer(content map[string]any, xmppSchema json.RawMessage) (json.RawMessage, error) {
	var raw []byte
	if f.Wrapped {
		s, _ := content[wrappedProperty].(string)
		raw = []byte(strings.TrimSpace(s))
	} else {
		if content == nil {
			content = map[string]any{}
		}
		b, err := json.Marshal(content)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errAnswerInvalid, err)
		}
		raw = b
	}
	canon, v, err := ijson.Canonicalize(raw, ijson.Limits{})
	if err != nil {
		return nil, fmt.Errorf("%w: not valid JSON", errAnswerInvalid)
	}
	sch, err := schema.Compile(xmppSchema)
	if err != nil {
		return nil, fmt.Errorf("the input request's schema cannot be used: %w", err)
	}
	if err := sch.Validate(v); err != nil {
		return nil, fmt.Errorf("%w: %v", errAnswerInvalid, err)
	}
	return canon, nil
}
