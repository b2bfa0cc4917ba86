package mcpbridge

import "strings"

// The protocol recognizes JSON Schema 2020-12 only, while many MCP servers
// (every one built on the TypeScript SDK with zod) declare draft-07. The
// bridge rewrites the few keywords whose meaning changed, so the schema
// validates the same instances under 2020-12, and records the rewrite as
// semantic loss ("schema-dialect"): the bytes are no longer the server's.

var legacyDialects = map[string]string{
	"http://json-schema.org/draft-04/schema":         "draft-04",
	"http://json-schema.org/draft-06/schema":         "draft-06",
	"http://json-schema.org/draft-07/schema":         "draft-07",
	"https://json-schema.org/draft/2019-09/schema":   "2019-09",
	"https://json-schema.org/draft/2020-12/schema":   "2020-12",
	"http://json-schema.org/draft-04/schema#":        "draft-04",
	"http://json-schema.org/draft-06/schema#":        "draft-06",
	"http://json-schema.org/draft-07/schema#":        "draft-07",
	"https://json-schema.org/draft/2019-09/schema#":  "2019-09",
	"https://json-schema.org/draft/2020-12/schema#":  "2020-12",
	"https://json-schema.org/draft-07/schema":        "draft-07",
	"https://json-schema.org/draft-07/schema#":       "draft-07",
	"https://json-schema.org/draft/2019-09/schema#/": "2019-09",
}

// dialectOf returns the dialect a root schema declares: "" when absent
// (2020-12 by the spec), a known name, or "unknown".
func dialectOf(s map[string]any) string {
	v, ok := s["$schema"]
	if !ok {
		return ""
	}
	u, _ := v.(string)
	if d, ok := legacyDialects[u]; ok {
		return d
	}
	return "unknown"
}

// to202012 rewrites a parsed schema declared in an older dialect to 2020-12
// in place. It reports false when the schema uses a construct it cannot
// translate faithfully.
func to202012(s map[string]any, dialect string) bool {
	switch dialect {
	case "", "2020-12":
		if _, ok := s["$schema"]; ok {
			delete(s, "$schema") // absence selects 2020-12
		}
		return true
	case "draft-04", "draft-06", "draft-07", "2019-09":
	default:
		return false
	}
	delete(s, "$schema")
	return rewrite(s, dialect, 0)
}

const maxSchemaDepth = 64

// Keywords whose value is one schema, a map of schemas, or an array of
// schemas, in the older dialects.
var (
	schemaKeywords    = []string{"additionalProperties", "contains", "propertyNames", "if", "then", "else", "not", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	schemaMapKeywords = []string{"properties", "patternProperties", "definitions", "$defs", "dependentSchemas"}
	schemaArrKeywords = []string{"allOf", "anyOf", "oneOf"}
)

func rewrite(s map[string]any, dialect string, depth int) bool {
	if depth > maxSchemaDepth {
		return false
	}
	if _, ok := s["$recursiveRef"]; ok {
		return false
	}
	if _, ok := s["$recursiveAnchor"]; ok {
		return false
	}
	delete(s, "$schema")

	// draft-04: id, and boolean exclusive bounds.
	if dialect == "draft-04" {
		if id, ok := s["id"].(string); ok {
			if _, has := s["$id"]; !has {
				s["$id"] = id
			}
			delete(s, "id")
		}
		for _, kw := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
			if b, ok := s[kw[0]].(bool); ok {
				if b {
					bound, ok := s[kw[1]]
					if !ok {
						return false
					}
					s[kw[0]] = bound
					delete(s, kw[1])
				} else {
					delete(s, kw[0])
				}
			}
		}
	}
	// "$id": "#name" was a plain-name anchor before 2019-09.
	if id, ok := s["$id"].(string); ok && strings.HasPrefix(id, "#") && dialect != "2019-09" {
		if _, has := s["$anchor"]; has || len(id) < 2 {
			return false
		}
		s["$anchor"] = id[1:]
		delete(s, "$id")
	}
	// $ref siblings were ignored before 2019-09; in 2020-12 they apply.
	if ref, ok := s["$ref"].(string); ok {
		if dialect != "2019-09" {
			for k := range s {
				if k != "$ref" && k != "definitions" && k != "$defs" && isAssertionKeyword(k) {
					return false
				}
			}
		}
		if strings.HasPrefix(ref, "#/definitions/") {
			s["$ref"] = "#/$defs/" + ref[len("#/definitions/"):]
		}
	}
	if defs, ok := s["definitions"]; ok {
		if _, has := s["$defs"]; has {
			return false
		}
		s["$defs"] = defs
		delete(s, "definitions")
	}
	// Tuple items.
	if arr, ok := s["items"].([]any); ok {
		s["prefixItems"] = arr
		if add, ok := s["additionalItems"]; ok {
			s["items"] = add
		} else {
			delete(s, "items")
		}
		delete(s, "additionalItems")
	} else {
		delete(s, "additionalItems") // ignored when items is one schema
	}
	// dependencies split into dependentRequired and dependentSchemas.
	if deps, ok := s["dependencies"].(map[string]any); ok {
		req, sch := map[string]any{}, map[string]any{}
		for k, v := range deps {
			switch v.(type) {
			case []any:
				req[k] = v
			default:
				sch[k] = v
			}
		}
		if len(req) > 0 {
			if _, has := s["dependentRequired"]; has {
				return false
			}
			s["dependentRequired"] = req
		}
		if len(sch) > 0 {
			if _, has := s["dependentSchemas"]; has {
				return false
			}
			s["dependentSchemas"] = sch
		}
		delete(s, "dependencies")
	}

	sub := func(v any) bool {
		m, ok := v.(map[string]any)
		if !ok {
			return true // boolean schemas need nothing
		}
		return rewrite(m, dialect, depth+1)
	}
	for _, k := range schemaKeywords {
		if v, ok := s[k]; ok && !sub(v) {
			return false
		}
	}
	if v, ok := s["items"]; ok && !sub(v) {
		return false
	}
	if arr, ok := s["prefixItems"].([]any); ok {
		for _, v := range arr {
			if !sub(v) {
				return false
			}
		}
	}
	for _, k := range schemaMapKeywords {
		if m, ok := s[k].(map[string]any); ok {
			for _, v := range m {
				if !sub(v) {
					return false
				}
			}
		}
	}
	for _, k := range schemaArrKeywords {
		if arr, ok := s[k].([]any); ok {
			for _, v := range arr {
				if !sub(v) {
					return false
				}
			}
		}
	}
	return true
}

// isAssertionKeyword reports whether k constrains instances (as opposed to
// annotating them).
func isAssertionKeyword(k string) bool {
	switch k {
	case "title", "description", "default", "examples", "$comment", "readOnly",
		"writeOnly", "deprecated", "$id", "$anchor", "format", "contentMediaType",
		"contentEncoding":
		return false
	}
	return !strings.HasPrefix(k, "x-")
}
