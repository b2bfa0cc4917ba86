package adhoc

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/xep/dataform"
)

// Field kinds: how one schema property is shown and read back.
type kind int

const (
	kindString      kind = iota // text-single → JSON string
	kindEnum                    // list-single → one of the enum strings
	kindBool                    // boolean
	kindInteger                 // text-single + xs:integer
	kindNumber                  // text-single + xs:decimal
	kindEnumArray               // list-multi → array of enum strings
	kindStringArray             // text-multi, one string per line
	kindJSON                    // text-multi holding JSON: the fallback
)

// StageVar is the hidden field that names the stage a form belongs to, so
// that a re-submitted stage is recognised as the same request.
const StageVar = "agentgw-stage"

// wholeVar is the one field of a form whose schema cannot be shown field by
// field: the whole arguments object as JSON.
const wholeVar = "arguments"

// Limits of what a form stage accepts besides dataform's (64 values per
// field, 256 fields, 1 MiB).
const (
	maxJSONBytes = 1 << 20
	maxLines     = 64
)

type prop struct {
	name     string
	kind     kind
	required bool
	enum     []string
	labels   []string   // titles of enum values, when the schema has them
	min, max *big.Float // integer and number ranges
	minItems int
	maxItems int
}

// formSpec is a schema rendered as form fields, with what is needed to read
// a submission back.
type formSpec struct {
	fields []dataform.Field
	props  []prop
	whole  bool // one JSON field for the whole object
}

// rootKeywords are the keywords of an object schema a form expresses
// (with additionalProperties false or absent). Anything else at the root
// makes the whole form one JSON field.
var rootKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"$schema": true, "title": true, "description": true, "$id": true, "$comment": true,
}

// buildForm maps a JSON Schema object (canonical JSON) to form fields.
// Properties come in canonical (sorted) order, required ones first.
func buildForm(schemaJSON []byte) formSpec {
	var root map[string]any
	if err := json.Unmarshal(schemaJSON, &root); err != nil || root == nil {
		return wholeForm(nil)
	}
	for k := range root {
		if !rootKeywords[k] {
			return wholeForm(root)
		}
	}
	if t, ok := root["type"]; ok && t != "object" {
		return wholeForm(root)
	}
	if ap, ok := root["additionalProperties"]; ok && ap != false {
		return wholeForm(root)
	}
	props, _ := root["properties"].(map[string]any)
	if _, ok := root["properties"]; ok && props == nil {
		return wholeForm(root)
	}
	req := map[string]bool{}
	if r, ok := root["required"].([]any); ok {
		for _, v := range r {
			if s, ok := v.(string); ok {
				req[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for n := range props {
		if n == dataform.FormTypeVar || n == StageVar || n == "" {
			return wholeForm(root)
		}
		names = append(names, n)
	}
	sort.SliceStable(names, func(i, j int) bool {
		if req[names[i]] != req[names[j]] {
			return req[names[i]]
		}
		return names[i] < names[j]
	})
	var fs formSpec
	for _, n := range names {
		ps, _ := props[n].(map[string]any)
		p, f := mapProp(n, ps, req[n])
		fs.props = append(fs.props, p)
		fs.fields = append(fs.fields, f)
	}
	return fs
}

func wholeForm(root map[string]any) formSpec {
	f := dataform.Field{Var: wholeVar, Type: dataform.FieldTextMulti, Label: "Arguments (JSON)", Required: true,
		Desc: "This tool's input schema cannot be shown as form fields: enter the arguments as one JSON object."}
	if root != nil {
		if d, _ := root["description"].(string); d != "" {
			f.Desc = d + "\n" + f.Desc
		}
	}
	return formSpec{whole: true, fields: []dataform.Field{f},
		props: []prop{{name: wholeVar, kind: kindJSON, required: true}}}
}

func strEnum(v any) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 || len(arr) > dataform.MaxValues {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// titledEnum reads MCP's titled enums: oneOf/anyOf of {const, title}
// (the elicitation schema's titled single and multiple select), or enum
// with the legacy enumNames.
func titledEnum(ps map[string]any) (values, labels []string, ok bool) {
	for _, k := range []string{"oneOf", "anyOf"} {
		arr, isArr := ps[k].([]any)
		if !isArr {
			continue
		}
		if len(arr) == 0 || len(arr) > dataform.MaxValues {
			return nil, nil, false
		}
		for _, a := range arr {
			o, _ := a.(map[string]any)
			c, isStr := o["const"].(string)
			if !isStr {
				return nil, nil, false
			}
			for key := range o {
				if key != "const" && key != "title" && key != "description" {
					return nil, nil, false
				}
			}
			t, _ := o["title"].(string)
			values, labels = append(values, c), append(labels, t)
		}
		return values, labels, true
	}
	if vs, ok := strEnum(ps["enum"]); ok {
		if names, ok := strEnum(ps["enumNames"]); ok && len(names) == len(vs) {
			return vs, names, true
		}
	}
	return nil, nil, false
}

// propKeywords are the keywords a field expresses; any other makes the
// property a JSON field.
var propKeywords = map[string]bool{
	"type": true, "title": true, "description": true, "default": true, "enum": true,
	"minimum": true, "maximum": true, "items": true, "minItems": true, "maxItems": true,
	"uniqueItems": true, "$comment": true, "examples": true, "format": true,
	"minLength": true, "maxLength": true,
}

func mapProp(name string, ps map[string]any, required bool) (prop, dataform.Field) {
	p := prop{name: name, required: required, kind: kindJSON}
	f := dataform.Field{Var: name, Label: name, Required: required}
	if t, _ := ps["title"].(string); t != "" {
		f.Label = t
	}
	f.Desc, _ = ps["description"].(string)
	simple := ps != nil
	for k := range ps {
		if !propKeywords[k] {
			simple = false
		}
	}
	typ, _ := ps["type"].(string)
	enum, hasEnum := strEnum(ps["enum"])
	if _, ok := ps["enum"]; ok && !hasEnum {
		simple = false
	}
	if vs, ls, ok := titledEnum(ps); ok && (typ == "" || typ == "string") {
		simple, hasEnum, enum, p.labels = true, true, vs, ls
		for k := range ps {
			if !propKeywords[k] && k != "oneOf" && k != "anyOf" && k != "enumNames" {
				simple = false
			}
		}
	}
	if simple {
		switch {
		case hasEnum && (typ == "" || typ == "string"):
			p.kind, p.enum = kindEnum, enum
		case typ == "string":
			p.kind = kindString
		case typ == "boolean":
			p.kind = kindBool
		case typ == "integer", typ == "number":
			p.kind = kindNumber
			f.Validate = &dataform.Validate{Datatype: "xs:decimal"}
			if typ == "integer" {
				p.kind = kindInteger
				f.Validate.Datatype = "xs:integer"
			}
			if v, ok := ps["minimum"].(float64); ok {
				p.min = new(big.Float).SetFloat64(v)
				f.Validate.Min = fmtNum(v)
			}
			if v, ok := ps["maximum"].(float64); ok {
				p.max = new(big.Float).SetFloat64(v)
				f.Validate.Max = fmtNum(v)
			}
		case typ == "array":
			items, _ := ps["items"].(map[string]any)
			it, _ := items["type"].(string)
			ie, ok := strEnum(items["enum"])
			onlyEnum := len(items) == 1 || (len(items) == 2 && it == "string")
			tv, tl, titled := titledEnum(items)
			if titled {
				_, hasE := items["enum"]
				_, hasN := items["enumNames"]
				n := 1
				if hasE && hasN {
					n = 2
				}
				if it == "string" {
					n++
				}
				titled = len(items) == n
			}
			switch {
			case titled:
				p.kind, p.enum, p.labels = kindEnumArray, tv, tl
			case ok && onlyEnum:
				p.kind, p.enum = kindEnumArray, ie
			case it == "string" && len(items) == 1:
				p.kind = kindStringArray
			}
			if p.kind != kindJSON {
				if v, ok := ps["minItems"].(float64); ok && v >= 0 && v <= maxLines {
					p.minItems = int(v)
				}
				p.maxItems = maxLines
				if v, ok := ps["maxItems"].(float64); ok && v >= 0 && v < maxLines {
					p.maxItems = int(v)
				}
			}
		}
	}
	switch p.kind {
	case kindString:
		f.Type = dataform.FieldTextSingle
	case kindEnum:
		f.Type = dataform.FieldListSingle
	case kindBool:
		f.Type = dataform.FieldBoolean
	case kindInteger, kindNumber:
		f.Type = dataform.FieldTextSingle
	case kindEnumArray:
		f.Type = dataform.FieldListMulti
		if p.minItems > 0 || p.maxItems < maxLines {
			f.Validate = &dataform.Validate{ListMin: p.minItems, ListMax: p.maxItems}
		}
	case kindStringArray:
		f.Type = dataform.FieldTextMulti
		f.Desc = joinDesc(f.Desc, "One value per line.")
	case kindJSON:
		f.Type = dataform.FieldTextMulti
		f.Label += " (JSON)"
		f.Desc = joinDesc(f.Desc, "Enter a JSON value.")
	}
	for i, e := range p.enum {
		label := e
		if i < len(p.labels) && p.labels[i] != "" {
			label = p.labels[i]
		}
		f.Options = append(f.Options, dataform.Option{Label: label, Value: e})
	}
	if d, ok := ps["default"]; ok {
		f.Values = defaultValues(p.kind, d)
	}
	return p, f
}

func joinDesc(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func defaultValues(k kind, d any) []string {
	switch k {
	case kindString, kindEnum:
		if s, ok := d.(string); ok {
			return []string{s}
		}
	case kindBool:
		if b, ok := d.(bool); ok {
			return []string{dataform.Bool(b)}
		}
	case kindInteger, kindNumber:
		if v, ok := d.(float64); ok {
			return []string{fmtNum(v)}
		}
	case kindEnumArray, kindStringArray:
		if s, ok := strEnum(d); ok {
			return s
		}
	case kindJSON:
		if b, err := json.Marshal(d); err == nil {
			return []string{string(b)}
		}
	}
	return nil
}

// formError is a submission error whose text is safe to show: it names
// only the schema's own fields, never what the client sent.
type formError struct{ msg string }

func (e *formError) Error() string { return e.msg }

func ferr(format string, args ...string) error {
	s := format
	for _, a := range args {
		s = strings.Replace(s, "%s", a, 1)
	}
	return &formError{msg: s}
}

var errNotForm = errors.New("not a submit form")

// arguments reads a submitted form back into the JSON arguments object.
// Unknown fields, wrong types, values outside the options or ranges and
// missing required fields are each a formError.
func (fs formSpec) arguments(values map[string][]string) (json.RawMessage, error) {
	byName := map[string]*prop{}
	labels := map[string]string{}
	for i := range fs.props {
		byName[fs.props[i].name] = &fs.props[i]
		labels[fs.props[i].name] = fs.fields[i].Label
	}
	for v := range values {
		if v == StageVar || v == dataform.FormTypeVar {
			continue
		}
		if byName[v] == nil {
			return nil, ferr("The form has a field this command does not take.")
		}
	}
	out := map[string]any{}
	for i := range fs.props {
		p := &fs.props[i]
		vals, present := values[p.name]
		label := strconv.Quote(labels[p.name])
		empty := !present || len(vals) == 0 || (len(vals) == 1 && vals[0] == "" && p.kind != kindString)
		if p.kind == kindString && present && len(vals) == 1 && vals[0] == "" && !p.required {
			empty = true
		}
		if empty {
			if p.required && p.kind != kindEnumArray && p.kind != kindStringArray {
				return nil, ferr("The field %s is required.", label)
			}
			if p.required {
				out[p.name] = []any{}
				if p.minItems > 0 {
					return nil, ferr("The field %s needs at least "+strconv.Itoa(p.minItems)+" values.", label)
				}
			}
			continue
		}
		single := p.kind != kindEnumArray && p.kind != kindStringArray && p.kind != kindJSON
		if single && len(vals) != 1 {
			return nil, ferr("The field %s takes exactly one value.", label)
		}
		switch p.kind {
		case kindString:
			out[p.name] = vals[0]
		case kindEnum:
			if !slices.Contains(p.enum, vals[0]) {
				return nil, ferr("The value of %s is not one of its options.", label)
			}
			out[p.name] = vals[0]
		case kindBool:
			b, ok := dataform.ParseBool(vals[0])
			if !ok {
				return nil, ferr("The field %s takes a boolean (1, 0, true or false).", label)
			}
			out[p.name] = b
		case kindInteger, kindNumber:
			n, err := parseNumber(vals[0], p.kind == kindInteger)
			if err != nil {
				if p.kind == kindInteger {
					return nil, ferr("The field %s takes an integer.", label)
				}
				return nil, ferr("The field %s takes a number.", label)
			}
			if (p.min != nil && n.Cmp(p.min) < 0) || (p.max != nil && n.Cmp(p.max) > 0) {
				return nil, ferr("The value of %s is out of range.", label)
			}
			out[p.name] = json.Number(vals[0])
		case kindEnumArray, kindStringArray:
			if len(vals) < p.minItems || len(vals) > p.maxItems {
				return nil, ferr("The field %s takes between "+strconv.Itoa(p.minItems)+" and "+strconv.Itoa(p.maxItems)+" values.", label)
			}
			arr := make([]any, 0, len(vals))
			for _, v := range vals {
				if p.kind == kindEnumArray && !slices.Contains(p.enum, v) {
					return nil, ferr("A value of %s is not one of its options.", label)
				}
				arr = append(arr, v)
			}
			out[p.name] = arr
		case kindJSON:
			text := strings.Join(vals, "\n")
			v, err := ijson.Parse([]byte(text), ijson.Limits{MaxBytes: maxJSONBytes})
			if err != nil {
				return nil, ferr("The field %s does not hold valid JSON.", label)
			}
			if fs.whole {
				obj, ok := v.(map[string]any)
				if !ok {
					return nil, ferr("The arguments must be one JSON object.")
				}
				for k, x := range obj {
					out[k] = x
				}
				continue
			}
			out[p.name] = v
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, ferr("The arguments cannot be encoded.")
	}
	return b, nil
}

// parseNumber accepts a JSON number literal (what xs:integer and
// xs:decimal values are, bar a leading "+").
func parseNumber(s string, integer bool) (*big.Float, error) {
	if len(s) > 64 || !json.Valid([]byte(s)) || s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return nil, errNotForm
	}
	if integer && strings.ContainsAny(s, ".eE") {
		return nil, errNotForm
	}
	f, _, err := big.ParseFloat(s, 10, 128, big.ToNearestEven)
	if err != nil || f.IsInf() {
		return nil, errNotForm
	}
	if !integer {
		if v, _ := f.Float64(); math.IsInf(v, 0) {
			return nil, errNotForm
		}
	}
	return f, nil
}
