package rsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/xep/xmltree"
)

func parseSet(t *testing.T, s string) *xmltree.Element {
	t.Helper()
	el, err := xmltree.Parse([]byte(s), xmltree.Limits{})
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return el
}

func TestParse(t *testing.T) {
	const open = `<set xmlns='http://jabber.org/protocol/rsm'>`
	tests := []struct {
		in   string
		want Query
	}{
		{open + `</set>`, None},
		{open + `<max>50</max></set>`, Query{Max: 50, Index: -1}},
		{open + `<max> 0 </max></set>`, Query{Max: 0, Index: -1}},
		{open + `<max>10</max><after>b@x</after></set>`, Query{Max: 10, After: "b@x", HasAfter: true, Index: -1}},
		{open + `<before/></set>`, Query{Max: -1, HasBefore: true, Index: -1}},
		{open + `<before>c@x</before></set>`, Query{Max: -1, Before: "c@x", HasBefore: true, Index: -1}},
		{open + `<index>3</index><max>2</max></set>`, Query{Max: 2, Index: 3}},
		{open + `<unknown/><max>1</max></set>`, Query{Max: 1, Index: -1}},
	}
	for _, tc := range tests {
		got, err := Parse(parseSet(t, tc.in))
		if err != nil {
			t.Errorf("Parse(%s): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Parse(%s) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	if q, err := Parse(nil); err != nil || q != None {
		t.Errorf("Parse(nil) = %+v, %v", q, err)
	}
}

func TestParseRejects(t *testing.T) {
	const open = `<set xmlns='http://jabber.org/protocol/rsm'>`
	bad := []string{
		open + `<max>-1</max></set>`,
		open + `<max>abc</max></set>`,
		open + `<max></max></set>`,
		open + `<max>9999999999</max></set>`,
		open + `<max>1</max><max>2</max></set>`,
		open + `<index>x</index></set>`,
		open + `<after></after></set>`,
		open + `<after>a</after><before>b</before></set>`,
		open + `<after>a</after><index>1</index></set>`,
		open + `<after>` + strings.Repeat("a", MaxIDBytes+1) + `</after></set>`,
		`<set xmlns='urn:other'/>`,
	}
	for _, s := range bad {
		if _, err := Parse(parseSet(t, s)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%.80s) err = %v, want ErrInvalid", s, err)
		}
	}
}

func TestLimit(t *testing.T) {
	if got := None.Limit(50, 200); got != 50 {
		t.Errorf("default limit = %d", got)
	}
	if got := (Query{Max: 1000}).Limit(50, 200); got != 200 {
		t.Errorf("capped limit = %d", got)
	}
	if got := (Query{Max: 0}).Limit(50, 200); got != 0 {
		t.Errorf("count-only limit = %d", got)
	}
}

func TestWindow(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e"}
	tests := []struct {
		name   string
		q      Query
		limit  int
		lo, hi int
	}{
		{"first page", None, 2, 0, 2},
		{"after b", Query{Max: 2, After: "b", HasAfter: true, Index: -1}, 2, 2, 4},
		{"after missing key", Query{After: "bb", HasAfter: true, Index: -1}, 2, 2, 4},
		{"after last", Query{After: "e", HasAfter: true, Index: -1}, 2, 5, 5},
		{"last page", Query{HasBefore: true, Index: -1}, 2, 3, 5},
		{"before d", Query{Before: "d", HasBefore: true, Index: -1}, 2, 1, 3},
		{"before a", Query{Before: "a", HasBefore: true, Index: -1}, 2, 0, 0},
		{"index 4", Query{Index: 4}, 2, 4, 5},
		{"index beyond", Query{Index: 9}, 2, 5, 5},
		{"count only", None, 0, 0, 0},
	}
	for _, tc := range tests {
		lo, hi := tc.q.Window(keys, tc.limit)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: Window = [%d,%d), want [%d,%d)", tc.name, lo, hi, tc.lo, tc.hi)
		}
	}
}

func TestElementRoundTrip(t *testing.T) {
	el := Element("a@x", "b@x", 0, 7)
	want := `<set xmlns="http://jabber.org/protocol/rsm"><first index="0">a@x</first><last>b@x</last><count>7</count></set>`
	if el.String() != want {
		t.Fatalf("Element = %s", el)
	}
	r, err := ParseResult(el)
	if err != nil || r != (Result{First: "a@x", FirstIndex: 0, Last: "b@x", Count: 7}) {
		t.Fatalf("ParseResult = %+v, %v", r, err)
	}
	empty := Element("", "", 0, 3).String()
	if empty != `<set xmlns="http://jabber.org/protocol/rsm"><count>3</count></set>` {
		t.Fatalf("empty page set = %s", empty)
	}
	q := Query{Max: 5, After: "k", HasAfter: true, Index: -1}
	back, err := Parse(Request(q))
	if err != nil || back != q {
		t.Fatalf("Request round trip = %+v, %v", back, err)
	}
}
