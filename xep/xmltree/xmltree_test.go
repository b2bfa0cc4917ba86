package xmltree

import (
	"errors"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	in := `<iq xmlns="jabber:component:accept" type="get" id="a&amp;b"><query xmlns="http://jabber.org/protocol/disco#info" node="x"/><json xmlns="urn:x">{"a":"&lt;b&gt;"}</json></iq>`
	el, err := Parse([]byte(in), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := el.AttrValue("id"); got != "a&b" {
		t.Fatalf("id = %q", got)
	}
	if q := el.Child("http://jabber.org/protocol/disco#info", "query"); q == nil || q.AttrValue("node") != "x" {
		t.Fatalf("query child missing: %+v", el.Children)
	}
	if got := el.Child("urn:x", "json").Text; got != `{"a":"<b>"}` {
		t.Fatalf("text = %q", got)
	}
	if out := el.String(); out != in {
		t.Fatalf("round trip:\n got %s\nwant %s", out, in)
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat("<a>", 100) + strings.Repeat("</a>", 100)
	if _, err := Parse([]byte(deep), Limits{MaxDepth: 10}); !errors.Is(err, ErrLimit) {
		t.Fatalf("deep: err = %v", err)
	}
	big := "<a>" + strings.Repeat("x", 2000) + "</a>"
	if _, err := Parse([]byte(big), Limits{MaxBytes: 1000}); !errors.Is(err, ErrLimit) {
		t.Fatalf("big: err = %v", err)
	}
	many := "<a>" + strings.Repeat("<b/>", 50) + "</a>"
	if _, err := Parse([]byte(many), Limits{MaxElements: 10}); !errors.Is(err, ErrLimit) {
		t.Fatalf("many: err = %v", err)
	}
}

func TestEntityExpansionRejected(t *testing.T) {
	doc := `<!DOCTYPE a [<!ENTITY x "xxxxxxxx">]><a>&x;</a>`
	if _, err := Parse([]byte(doc), Limits{}); err == nil {
		t.Fatal("document with a DTD was accepted")
	}
}
