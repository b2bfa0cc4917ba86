package adhoc

import (
	"strings"
	"testing"

	"github.com/agentgw/agentgw/xep/dataform"
)

const mixedSchema = `{"type":"object","required":["city","count"],"properties":{
 "city":{"type":"string","title":"City","description":"Where"},
 "unit":{"enum":["C","F"],"default":"C"},
 "hero":{"type":"string","oneOf":[{"const":"h1","title":"Superman"},{"const":"h2","title":"Batman"}]},
 "pet":{"type":"string","enum":["p1","p2"],"enumNames":["Cats","Dogs"]},
 "fish":{"type":"array","items":{"anyOf":[{"const":"f1","title":"Tuna"},{"const":"f2","title":"Trout"}]},"maxItems":2},
 "verbose":{"type":"boolean","default":true},
 "count":{"type":"integer","minimum":1,"maximum":10},
 "ratio":{"type":"number"},
 "tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"minItems":1},
 "lines":{"type":"array","items":{"type":"string"}},
 "nested":{"type":"object","properties":{"x":{"type":"string"}}},
 "either":{"oneOf":[{"type":"string"},{"type":"integer"}]}
}}`

func fieldsByVar(fs formSpec) map[string]dataform.Field {
	m := map[string]dataform.Field{}
	for _, f := range fs.fields {
		m[f.Var] = f
	}
	return m
}

func TestBuildFormMapping(t *testing.T) {
	t.Parallel()
	fs := buildForm([]byte(mixedSchema))
	if fs.whole {
		t.Fatal("a per-property schema became one JSON field")
	}
	if fs.fields[0].Var != "city" || fs.fields[1].Var != "count" {
		t.Errorf("required fields are not first: %s, %s", fs.fields[0].Var, fs.fields[1].Var)
	}
	f := fieldsByVar(fs)
	want := map[string]string{
		"city": "text-single", "unit": "list-single", "hero": "list-single", "pet": "list-single",
		"fish": "list-multi", "verbose": "boolean", "count": "text-single", "ratio": "text-single",
		"tags": "list-multi", "lines": "text-multi", "nested": "text-multi", "either": "text-multi",
	}
	for v, typ := range want {
		if f[v].Type != typ {
			t.Errorf("%s: type %q, want %q", v, f[v].Type, typ)
		}
	}
	if f["city"].Label != "City" || f["city"].Desc != "Where" || !f["city"].Required {
		t.Errorf("city: %+v", f["city"])
	}
	if f["unit"].Values[0] != "C" || len(f["unit"].Options) != 2 {
		t.Errorf("unit: %+v", f["unit"])
	}
	if f["hero"].Options[0].Label != "Superman" || f["hero"].Options[0].Value != "h1" {
		t.Errorf("hero options: %+v", f["hero"].Options)
	}
	if f["pet"].Options[1].Label != "Dogs" {
		t.Errorf("pet options: %+v", f["pet"].Options)
	}
	if v := f["count"].Validate; v == nil || v.Datatype != "xs:integer" || v.Min != "1" || v.Max != "10" {
		t.Errorf("count validation: %+v", v)
	}
	if v := f["ratio"].Validate; v == nil || v.Datatype != "xs:decimal" {
		t.Errorf("ratio validation: %+v", v)
	}
	if v := f["tags"].Validate; v == nil || v.ListMin != 1 {
		t.Errorf("tags list-range: %+v", v)
	}
	if f["verbose"].Values[0] != "1" {
		t.Errorf("verbose default: %+v", f["verbose"].Values)
	}
	if !strings.Contains(f["nested"].Label, "(JSON)") || !strings.Contains(f["either"].Label, "(JSON)") {
		t.Errorf("fallback fields are not labelled JSON: %q %q", f["nested"].Label, f["either"].Label)
	}
	x := (&dataform.Form{Type: dataform.TypeForm, Fields: fs.fields}).Element().String()
	for _, s := range []string{`xmlns="http://jabber.org/protocol/xdata-validate"`, `datatype="xs:integer"`, `<range min="1" max="10"`, `<required`, `<option label="Superman"`} {
		if !strings.Contains(x, s) {
			t.Errorf("form XML lacks %s:\n%s", s, x)
		}
	}
}

func TestArguments(t *testing.T) {
	t.Parallel()
	fs := buildForm([]byte(mixedSchema))
	got, err := fs.arguments(map[string][]string{
		StageVar: {"start"}, "city": {"Oslo"}, "count": {"3"}, "unit": {"F"}, "hero": {"h2"},
		"verbose": {"0"}, "ratio": {"0.5"}, "tags": {"a", "c"}, "lines": {"x", "y"},
		"nested": {`{"x":"1"}`}, "either": {"7"}, "fish": {"f1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"city":"Oslo","count":3,"either":7,"fish":["f1"],"hero":"h2","lines":["x","y"],"nested":{"x":"1"},"ratio":0.5,"tags":["a","c"],"unit":"F","verbose":false}`
	if string(got) != want {
		t.Errorf("arguments\n got %s\nwant %s", got, want)
	}
}

func TestArgumentsHostile(t *testing.T) {
	t.Parallel()
	fs := buildForm([]byte(mixedSchema))
	base := func() map[string][]string { return map[string][]string{"city": {"Oslo"}, "count": {"3"}} }
	cases := map[string]func(m map[string][]string){
		"unknown field":    func(m map[string][]string) { m["<script>"] = []string{"x"} },
		"missing":          func(m map[string][]string) { delete(m, "city") },
		"wrong integer":    func(m map[string][]string) { m["count"] = []string{"three"} },
		"fraction":         func(m map[string][]string) { m["count"] = []string{"3.5"} },
		"out of range":     func(m map[string][]string) { m["count"] = []string{"11"} },
		"huge number":      func(m map[string][]string) { m["ratio"] = []string{"1e999"} },
		"not an option":    func(m map[string][]string) { m["unit"] = []string{"K"} },
		"bad boolean":      func(m map[string][]string) { m["verbose"] = []string{"yes"} },
		"two values":       func(m map[string][]string) { m["city"] = []string{"a", "b"} },
		"bad json":         func(m map[string][]string) { m["nested"] = []string{"{"} },
		"multi not option": func(m map[string][]string) { m["tags"] = []string{"z"} },
		"too many":         func(m map[string][]string) { m["fish"] = []string{"f1", "f2", "f1"} },
	}
	for name, mut := range cases {
		m := base()
		mut(m)
		_, err := fs.arguments(m)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		var fe *formError
		if !asFormError(err, &fe) || strings.Contains(fe.msg, "<script>") || strings.Contains(fe.msg, "three") {
			t.Errorf("%s: error %v is not a safe form error", name, err)
		}
	}
}

func asFormError(err error, fe **formError) bool {
	e, ok := err.(*formError)
	*fe = e
	return ok
}

func TestWholeFallback(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{"type":"object","additionalProperties":true}`, `{"oneOf":[{"type":"object"}]}`, `not json`,
		`{"type":"object","properties":{"FORM_TYPE":{"type":"string"}}}`} {
		fs := buildForm([]byte(s))
		if !fs.whole || len(fs.fields) != 1 || fs.fields[0].Var != wholeVar {
			t.Errorf("%s: not one JSON field: %+v", s, fs.fields)
		}
	}
	fs := buildForm([]byte(`{"type":"object","additionalProperties":{"type":"string"}}`))
	got, err := fs.arguments(map[string][]string{wholeVar: {`{"a":`, `"b"}`}})
	if err != nil || string(got) != `{"a":"b"}` {
		t.Errorf("whole JSON: %s %v", got, err)
	}
	if _, err := fs.arguments(map[string][]string{wholeVar: {`[1]`}}); err == nil {
		t.Error("a JSON array accepted as the arguments object")
	}
}

func TestInputStage(t *testing.T) {
	t.Parallel()
	id, rev, ok := parseInputStage(inputStage("req-abcdefghijklmnopqrstuv", 7))
	if !ok || id != "req-abcdefghijklmnopqrstuv" || rev != 7 {
		t.Errorf("round trip: %s %d %v", id, rev, ok)
	}
	for _, s := range []string{"", "start", "input:", "input:x:-1", "input::3", "input:x:y"} {
		if _, _, ok := parseInputStage(s); ok {
			t.Errorf("%q parsed", s)
		}
	}
}

func TestTable(t *testing.T) {
	t.Parallel()
	rep, items, ok := table([]byte(`[{"a":1,"b":"x"},{"a":2,"c":{"d":true}}]`))
	if !ok || len(rep) != 3 || len(items) != 2 || items[1][2].Values[0] != `{"d":true}` || items[0][1].Values[0] != "x" {
		t.Errorf("table: %v %v %v", rep, items, ok)
	}
	if _, _, ok := table([]byte(`42`)); ok {
		t.Error("a number became a table")
	}
}

// FuzzForm: any schema maps to a form and any submission reads back
// without panicking; what arguments accepts is a JSON object.
func FuzzForm(f *testing.F) {
	f.Add([]byte(mixedSchema), "city", "Oslo", "count", "3")
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"integer","minimum":1e308}}}`), "a", "1e400", "", "")
	f.Add([]byte(`{"oneOf":[]}`), wholeVar, `{"a":[1,{"b":null}]}`, "", "")
	f.Add([]byte(`{"type":"object","properties":{"e":{"type":"array","items":{"anyOf":[{"const":"x"}]}}}}`), "e", "x", "e", "y")
	f.Fuzz(func(t *testing.T, schema []byte, k1, v1, k2, v2 string) {
		fs := buildForm(schema)
		if len(fs.fields) != len(fs.props) {
			t.Fatalf("%d fields for %d properties", len(fs.fields), len(fs.props))
		}
		_ = (&dataform.Form{Type: dataform.TypeForm, Fields: fs.fields}).Element().String()
		vals := map[string][]string{k1: {v1}}
		vals[k2] = append(vals[k2], v2)
		out, err := fs.arguments(vals)
		if err != nil {
			if _, ok := err.(*formError); !ok {
				t.Fatalf("error %T is not a form error", err)
			}
			return
		}
		if len(out) == 0 || out[0] != '{' {
			t.Fatalf("arguments %s are not an object", out)
		}
	})
}
