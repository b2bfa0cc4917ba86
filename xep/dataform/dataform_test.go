package dataform

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/xep/xmltree"
)

func parse(t *testing.T, s string) *xmltree.Element {
	t.Helper()
	el, err := xmltree.Parse([]byte(s), xmltree.Limits{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return el
}

func TestElementResult(t *testing.T) {
	f := &Form{
		Type:     TypeResult,
		FormType: "urn:xmpp:agent-endpoint-info:0",
		Fields: []Field{
			{Var: "server_name", Values: []string{"weather"}},
			{Var: "cold_start_supported", Values: []string{Bool(true)}},
		},
	}
	want := `<x xmlns="jabber:x:data" type="result">` +
		`<field type="hidden" var="FORM_TYPE"><value>urn:xmpp:agent-endpoint-info:0</value></field>` +
		`<field var="server_name"><value>weather</value></field>` +
		`<field var="cold_start_supported"><value>1</value></field></x>`
	if got := f.Element().String(); got != want {
		t.Fatalf("Element:\n got %s\nwant %s", got, want)
	}
}

func TestElementMultiItem(t *testing.T) {
	f := &Form{
		Type:     TypeResult,
		Reported: []Field{{Var: "jid", Type: FieldJIDSingle, Label: "Jabber ID"}},
		Items:    [][]Field{{{Var: "jid", Values: []string{"a@x"}}}, {{Var: "jid", Values: []string{"b@x"}}}},
	}
	back, err := Parse(f.Element())
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Fields) != 0 || len(back.Reported) != 1 || len(back.Items) != 2 || back.Items[1][0].Values[0] != "b@x" {
		t.Fatalf("round trip = %+v", back)
	}
	// Only reported and item children, as XEP-0004 multi-item results want.
	for _, c := range f.Element().Children {
		if c.Name.Local != "reported" && c.Name.Local != "item" {
			t.Fatalf("unexpected child %s", c.Name.Local)
		}
	}
}

func TestParseSubmit(t *testing.T) {
	x := parse(t, `<x xmlns='jabber:x:data' type='submit'>
	  <field type='hidden' var='FORM_TYPE'><value>jabber:iq:search</value></field>
	  <field var='nick'><value>weather</value></field>
	  <field var='multi'><value>a</value><value>b</value></field>
	</x>`)
	got, err := ParseSubmit(x, "jabber:iq:search")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"nick": {"weather"}, "multi": {"a", "b"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	if _, err := ParseSubmit(x, "urn:other"); !errors.Is(err, ErrFormType) {
		t.Fatalf("wrong FORM_TYPE err = %v", err)
	}
	noType := parse(t, `<x xmlns='jabber:x:data' type='submit'><field var='nick'><value>w</value></field></x>`)
	if m, err := ParseSubmit(noType, "jabber:iq:search"); err != nil || m["nick"][0] != "w" {
		t.Fatalf("missing FORM_TYPE: %v %v", m, err)
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]struct {
		in   string
		want error
	}{
		"no type":              {`<x xmlns='jabber:x:data'/>`, ErrInvalid},
		"bad type":             {`<x xmlns='jabber:x:data' type='weird'/>`, ErrInvalid},
		"other ns":             {`<x xmlns='urn:other' type='submit'/>`, ErrInvalid},
		"duplicate var":        {`<x xmlns='jabber:x:data' type='submit'><field var='a'/><field var='a'/></x>`, ErrInvalid},
		"var-less submit":      {`<x xmlns='jabber:x:data' type='submit'><field/></x>`, ErrInvalid},
		"two FORM_TYPE values": {`<x xmlns='jabber:x:data' type='submit'><field var='FORM_TYPE'><value>a</value><value>b</value></field></x>`, ErrInvalid},
		"too many values":      {`<x xmlns='jabber:x:data' type='submit'><field var='a'>` + strings.Repeat(`<value>v</value>`, MaxValues+1) + `</field></x>`, ErrLimit},
		"value too long":       {`<x xmlns='jabber:x:data' type='submit'><field var='a'><value>` + strings.Repeat("v", MaxValueBytes+1) + `</value></field></x>`, ErrLimit},
	}
	for name, tc := range cases {
		_, err := Parse(parse(t, tc.in))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	var b strings.Builder
	b.WriteString(`<x xmlns='jabber:x:data' type='submit'>`)
	for i := 0; i <= MaxFields; i++ {
		b.WriteString(`<field var='f` + strings.Repeat("x", i%7) + string(rune('A'+i%26)) + `'/>`)
	}
	b.WriteString(`</x>`)
	if _, err := Parse(parse(t, b.String())); err == nil {
		t.Errorf("more than MaxFields fields accepted")
	}
}

func TestBool(t *testing.T) {
	for in, want := range map[string]bool{"1": true, "true": true, "0": false, "false": false} {
		if v, ok := ParseBool(in); !ok || v != want {
			t.Errorf("ParseBool(%q) = %v,%v", in, v, ok)
		}
	}
	if _, ok := ParseBool("yes"); ok {
		t.Errorf("ParseBool(yes) accepted")
	}
}
