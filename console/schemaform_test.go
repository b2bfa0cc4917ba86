package console

import (
	"bytes"
	"net/url"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/directory"
)

// TestFieldsOfSchema: simple object schemas become fields (required first,
// then by name); anything else keeps the JSON box.
func TestFieldsOfSchema(t *testing.T) {
	f, ok := fieldsOf([]byte(`{"type":"object","additionalProperties":false,"required":["city"],"properties":{
		"city":{"type":"string","title":"City","maxLength":80},
		"days":{"type":"integer","minimum":1,"maximum":14,"default":3},
		"ratio":{"type":"number"},
		"metric":{"type":"boolean","default":true},
		"unit":{"enum":["C","F",1]}}}`))
	if !ok {
		t.Fatal("a simple schema gave no fields")
	}
	var got []string
	for _, x := range f {
		got = append(got, x.Name+":"+x.Kind)
	}
	if strings.Join(got, " ") != "city:text days:integer metric:boolean ratio:number unit:enum" || !f[0].Required || f[0].Label != "City" || f[0].MaxLength != 80 {
		t.Errorf("fields %v %+v", got, f[0])
	}
	if f[1].Min != "1" || f[1].Max != "14" || f[1].Default != "3" || f[2].Default != "true" || strings.Join(f[4].Options, ",") != "C,F,1" {
		t.Errorf("bounds, defaults, options: %+v %+v %+v", f[1], f[2], f[4])
	}
	for _, s := range []string{
		``, `{}`, `{"type":"array"}`, `not json`,
		`{"type":"object","properties":{"a":{"type":"object"}}}`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}}}`,
		`{"type":"object","properties":{"a":{"type":["string","null"]}}}`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}}`,
		`{"type":"object","oneOf":[{"required":["a"]}],"properties":{"a":{"type":"string"}}}`,
		`{"type":"object","required":["b"],"properties":{"a":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"enum":[{"x":1}]}}}`,
	} {
		if f, ok := fieldsOf([]byte(s)); ok {
			t.Errorf("%s: fields %v, want the JSON box", s, f)
		}
	}
	if f, ok := fieldsOf([]byte(`{"type":"object"}`)); !ok || len(f) != 0 {
		t.Errorf("no properties: %v %v, want an empty form", f, ok)
	}
}

// TestArgumentsOfFields: the posted fields become typed arguments; empty
// optional fields are left out; a wrong value names the field and never
// quotes what was typed.
func TestArgumentsOfFields(t *testing.T) {
	f, _ := fieldsOf([]byte(`{"type":"object","required":["city","days"],"properties":{
		"city":{"type":"string"},"days":{"type":"integer"},"ratio":{"type":"number"},
		"metric":{"type":"boolean"},"unit":{"enum":["C","F",2]},"note":{"type":"string"}}}`))
	form := url.Values{"arg.city": {" <b>Paris</b> "}, "arg.days": {"3"}, "arg.ratio": {"0.5"}, "arg.metric": {"false"}, "arg.unit": {"2"}, "arg.note": {""}, "arg.extra": {"x"}}
	b, err := argumentsOf(f, form)
	if err != nil || string(b) != `{"city":" \u003cb\u003eParis\u003c/b\u003e ","days":3,"metric":false,"ratio":0.5,"unit":2}` {
		t.Errorf("arguments %s, %v", b, err)
	}
	for k, v := range map[string]string{"arg.days": "3.5<script>", "arg.ratio": "Inf", "arg.metric": "maybe", "arg.unit": "7", "arg.city": ""} {
		bad := url.Values{}
		for kk, vv := range form {
			bad[kk] = vv
		}
		bad.Set(k, v)
		_, err := argumentsOf(f, bad)
		if err == nil || (v != "" && strings.Contains(err.Error(), v)) || !strings.Contains(err.Error(), strings.TrimPrefix(k, "arg.")) {
			t.Errorf("%s=%q: %v", k, v, err)
		}
	}
}

// TestToolFormHostileSchema: titles, descriptions, property names and enum
// options with markup are text in the rendered form.
func TestToolFormHostileSchema(t *testing.T) {
	tmpl, err := parseTemplates()
	if err != nil {
		t.Fatal(err)
	}
	schema := []byte(`{"type":"object","required":["\"><script>alert(1)</script>"],"properties":{
		"\"><script>alert(1)</script>":{"type":"string","title":"<script>alert(2)</script>","description":"<img src=x onerror=alert(3)>"},
		"unit":{"enum":["</option><script>alert(4)</script>","F"],"description":"</small><script>alert(5)</script>"}}}`)
	data := map[string]any{"Endpoint": "weather@agents.example.test", "Health": "ready", "CanRun": true, "Status": struct{ Versions []any }{},
		"Manifest": &directory.Manifest{Tools: []directory.Tool{{Name: "forecast", InputSchema: schema}, {Name: "nested", InputSchema: []byte(`{"type":"object","properties":{"a":{"type":"object"}}}`)}}}}
	var b bytes.Buffer
	if err := tmpl["agent"].ExecuteTemplate(&b, "layout.html", view{Data: data, CSRF: "c"}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "<script>") || strings.Contains(page, "<img") {
		t.Errorf("markup from the schema in the page:\n%s", page)
	}
	for _, want := range []string{"&lt;script&gt;alert(2)&lt;/script&gt;", "&lt;img src=x onerror=alert(3)&gt;", `name="arg.&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`,
		"&lt;/option&gt;&lt;script&gt;alert(4)&lt;/script&gt;", `name="form" value="fields"`, `name="arguments"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	// The hostile property round-trips through the form as a plain key.
	f, _ := fieldsOf(schema)
	args, err := argumentsOf(f, url.Values{"arg.\"><script>alert(1)</script>": {"x"}})
	if err != nil || string(args) != `{"\"\u003e\u003cscript\u003ealert(1)\u003c/script\u003e":"x"}` {
		t.Errorf("arguments %s %v", args, err)
	}
}
