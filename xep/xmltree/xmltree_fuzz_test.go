package xmltree

import (
	"reflect"
	"testing"
	"unicode"
)

// FuzzXMLTreeParse feeds documents (seeds in testdata/fuzz/FuzzXMLTreeParse)
// to the bounded decoder every stanza passes through. Accepted trees stay
// within the limits and survive String and Parse unchanged, except for two
// shapes String does not spell and no XMPP server passes on: attributes in
// foreign namespaces (String writes only xml: prefixes; the stream encoder
// declares the rest) and names that are not NCNames, which encoding/xml
// yields for input such as <A:0/> (local name "0").
func FuzzXMLTreeParse(f *testing.F) {
	lim := Limits{MaxBytes: 4096, MaxDepth: 8, MaxElements: 64}
	f.Fuzz(func(t *testing.T, data []byte) {
		el, err := Parse(data, lim)
		if err != nil {
			return
		}
		st := stats{}
		st.walk(el, 1)
		switch {
		case st.depth > lim.MaxDepth:
			t.Fatalf("depth %d accepted", st.depth)
		case st.elements > lim.MaxElements+1:
			t.Fatalf("%d elements accepted", st.elements)
		case st.bytes > lim.MaxBytes:
			t.Fatalf("%d bytes accepted", st.bytes)
		}
		if st.foreignAttr || st.badName {
			return
		}
		again, err := Parse([]byte(el.String()), lim)
		if err != nil {
			t.Fatalf("String output does not parse: %v\n%s", err, el)
		}
		if !reflect.DeepEqual(el, again) {
			t.Fatalf("tree changed through String:\n%#v\n%#v", el, again)
		}
	})
}

type stats struct {
	depth, elements, bytes int
	foreignAttr, badName   bool
}

func (s *stats) walk(e *Element, depth int) {
	s.depth = max(s.depth, depth)
	s.elements++
	s.bytes += len(e.Text)
	s.badName = s.badName || !ncName(e.Name.Local)
	for _, a := range e.Attr {
		s.badName = s.badName || !ncName(a.Name.Local)
		s.bytes += len(a.Name.Local) + len(a.Value)
		if a.Name.Space != "" && attrPrefix(a.Name.Space) != "xml" {
			s.foreignAttr = true
		}
	}
	for _, c := range e.Children {
		s.walk(c, depth+1)
	}
}

// ncName reports whether s is an XML NCName (Namespaces in XML 1.0).
func ncName(s string) bool {
	for i, r := range s {
		start := r == '_' || unicode.IsLetter(r)
		if !start && (i == 0 || !(r == '-' || r == '.' || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) || r == 0xB7)) {
			return false
		}
	}
	return s != ""
}
