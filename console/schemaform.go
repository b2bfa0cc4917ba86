package console

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// The try-this-tool form from the tool's input schema: an object schema
// whose properties are all simple (string, number, integer, boolean, or an
// enum of strings, numbers or booleans) becomes one field per property;
// anything else keeps the JSON box. The form is built again from the
// active manifest when it is posted (never from what the browser sent
// about it), and the engine still validates the arguments against the
// schema: the fields only spare the operator writing JSON.

// maxFormFields bounds the fields one form shows; a larger schema keeps the
// JSON box.
const maxFormFields = 32

// formField is one property as a form field.
type formField struct {
	Name, Label, Description string
	// Kind is text, number, integer, boolean or enum.
	Kind     string
	Required bool
	// Options are an enum's values as shown (JSON text for non-strings);
	// the form posts an option's index.
	Options []string
	// Default is the schema's default as the field's initial value
	// (an enum's option index).
	Default string
	// Min and Max bound a number ("" when absent).
	Min, Max string
	// MaxLength bounds a string (0 when absent).
	MaxLength int

	enum []any
}

// fieldsOf returns the form fields of schema, ok false when it is not
// simple enough for fields.
func fieldsOf(schema []byte) (fields []formField, ok bool) {
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil || s.Type != "object" {
		return nil, false
	}
	var top map[string]json.RawMessage
	json.Unmarshal(schema, &top)
	for k := range top {
		switch k {
		case "type", "properties", "required", "additionalProperties", "title", "description", "$schema":
		default:
			return nil, false // allOf, oneOf, $ref, patternProperties …: the JSON box
		}
	}
	if len(s.Properties) > maxFormFields {
		return nil, false
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; !ok {
			return nil, false
		}
		req[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	// Required fields first, each group by name.
	sort.SliceStable(names, func(i, j int) bool { return req[names[i]] && !req[names[j]] })
	for _, n := range names {
		f, ok := fieldOf(n, s.Properties[n])
		if !ok {
			return nil, false
		}
		f.Required = req[n]
		fields = append(fields, f)
	}
	return fields, true
}

func fieldOf(name string, raw json.RawMessage) (formField, bool) {
	var p map[string]any
	if json.Unmarshal(raw, &p) != nil || name == "" || len(name) > 128 {
		return formField{}, false
	}
	f := formField{Name: name, Label: name}
	if t, ok := p["title"].(string); ok && t != "" {
		f.Label = t
	}
	if d, ok := p["description"].(string); ok {
		f.Description = d
	}
	for k := range p {
		switch k {
		case "type", "title", "description", "enum", "default", "minimum", "maximum", "minLength", "maxLength", "format", "examples":
		default:
			return formField{}, false // pattern, const, exclusive bounds, …: the JSON box shows them
		}
	}
	if e, ok := p["enum"].([]any); ok {
		if len(e) == 0 || len(e) > 100 {
			return formField{}, false
		}
		f.Kind, f.enum = "enum", e
		for i, v := range e {
			switch v.(type) {
			case string, float64, bool:
			default:
				return formField{}, false
			}
			if s, ok := v.(string); ok {
				f.Options = append(f.Options, s)
			} else {
				b, _ := json.Marshal(v)
				f.Options = append(f.Options, string(b))
			}
			if d, ok := p["default"]; ok && fmt.Sprint(d) == fmt.Sprint(v) {
				f.Default = strconv.Itoa(i)
			}
		}
		return f, true
	}
	switch p["type"] {
	case "string":
		f.Kind = "text"
		if d, ok := p["default"].(string); ok {
			f.Default = d
		}
		if m, ok := p["maxLength"].(float64); ok && m >= 0 && m <= 1e6 {
			f.MaxLength = int(m)
		}
	case "number", "integer":
		f.Kind = p["type"].(string)
		if d, ok := p["default"].(float64); ok {
			f.Default = strconv.FormatFloat(d, 'g', -1, 64)
		}
		if m, ok := p["minimum"].(float64); ok {
			f.Min = strconv.FormatFloat(m, 'g', -1, 64)
		}
		if m, ok := p["maximum"].(float64); ok {
			f.Max = strconv.FormatFloat(m, 'g', -1, 64)
		}
	case "boolean":
		f.Kind = "boolean"
		if d, ok := p["default"].(bool); ok {
			f.Default = strconv.FormatBool(d)
		}
	default:
		return formField{}, false
	}
	return f, true
}

// fieldPrefix names the posted fields: arg.<property>.
const fieldPrefix = "arg."

// fieldError is a field the operator filled wrongly; its message names
// the field, never quotes the value.
type fieldError string

func (e fieldError) Error() string { return string(e) }

// argumentsOf builds the arguments object from the posted fields. An empty
// optional field is left out; an empty required one is an error.
func argumentsOf(fields []formField, form url.Values) ([]byte, error) {
	args := map[string]any{}
	for _, f := range fields {
		v := form.Get(fieldPrefix + f.Name)
		if f.Kind != "text" {
			v = strings.TrimSpace(v)
		}
		if v == "" {
			if f.Required {
				return nil, fieldError(f.Label + " is required")
			}
			continue
		}
		switch f.Kind {
		case "text":
			args[f.Name] = v
		case "integer":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fieldError(f.Label + " must be a whole number")
			}
			args[f.Name] = n
		case "number":
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
				return nil, fieldError(f.Label + " must be a number")
			}
			args[f.Name] = n
		case "boolean":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fieldError(f.Label + " must be true or false")
			}
			args[f.Name] = b
		case "enum":
			i, err := strconv.Atoi(v)
			if err != nil || i < 0 || i >= len(f.enum) {
				return nil, fieldError(f.Label + " must be one of its options")
			}
			args[f.Name] = f.enum[i]
		}
	}
	return json.Marshal(args)
}

// toolForm is a tool's form: its fields, or nil for the JSON box.
type toolForm struct {
	Fields []formField
	JSON   bool
}

func formOf(schema []byte) toolForm {
	f, ok := fieldsOf(schema)
	if !ok {
		return toolForm{JSON: true}
	}
	return toolForm{Fields: f}
}
