// Package goldentest replays golden stanza exchanges: files under
// testdata/golden, each one <exchange/> in the component namespace whose
// children are the stanzas of one exchange adapted from the spec's
// examples (a request and its expected reply, or one expected outbound
// stanza). It is a test helper: only _test files import it.
package goldentest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Exchange is one golden file.
type Exchange struct {
	Name    string // the file's base name
	Fixture string // the fixture attribute; "" when absent
	Stanzas []*xmltree.Element
}

// Load reads every *.xml file in dir; it fails the test on a file that is
// not an <exchange/> of want stanzas, or when dir holds fewer than min
// files.
func Load(t testing.TB, dir string, want, min int) []Exchange {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < min {
		t.Fatalf("only %d golden files in %s", len(files), dir)
	}
	var out []Exchange
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := xmltree.Parse(data, xmltree.Limits{})
		if err != nil {
			t.Fatalf("%s: parse: %v", file, err)
		}
		if !ex.Is(component.NSComponent, "exchange") || len(ex.Children) != want {
			t.Fatalf("%s: want <exchange/> with %d stanzas", file, want)
		}
		out = append(out, Exchange{Name: filepath.Base(file), Fixture: ex.AttrValue("fixture"), Stanzas: ex.Children})
	}
	return out
}

// IQ is the inbound IQ a golden request stanza stands for.
func IQ(req *xmltree.Element) component.IQ {
	in := component.IQ{
		ID:   req.AttrValue("id"),
		Type: req.AttrValue("type"),
		From: jid.MustParse(req.AttrValue("from")),
		To:   jid.MustParse(req.AttrValue("to")),
		Raw:  req,
	}
	if len(req.Children) > 0 {
		in.Payload = req.Children[0]
	}
	return in
}

// Compare fails the test unless got, read back through its wire form as a
// peer would read it, equals want up to Canonical.
func Compare(t testing.TB, got, want *xmltree.Element) {
	t.Helper()
	got, err := xmltree.Parse([]byte(got.String()), xmltree.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := Canonical(got), Canonical(want); g != w {
		t.Errorf("stanza differs\n got: %s\nwant: %s", g, w)
	}
}

// Canonical renders a tree so that attribute order, namespace prefixes
// and whitespace between elements do not matter. Character data is
// trimmed at its ends only, which is safe because no golden value has
// significant outer whitespace.
func Canonical(e *xmltree.Element) string {
	var b strings.Builder
	writeCanonical(&b, e)
	return b.String()
}

func writeCanonical(b *strings.Builder, e *xmltree.Element) {
	b.WriteString("<{" + e.Name.Space + "}" + e.Name.Local)
	attrs := make([]string, 0, len(e.Attr))
	for _, a := range e.Attr {
		attrs = append(attrs, a.Name.Local+"="+quote(a.Value))
	}
	slices.Sort(attrs)
	for _, a := range attrs {
		b.WriteString(" " + a)
	}
	b.WriteString(">")
	b.WriteString(strings.TrimSpace(e.Text))
	for _, c := range e.Children {
		writeCanonical(b, c)
	}
	b.WriteString("</" + e.Name.Local + ">")
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// Sender is a component.Sender that records what is sent, for comparing
// outbound stanzas with golden ones. SendIQ is not connected.
type Sender struct {
	mu   sync.Mutex
	sent []*xmltree.Element
}

func (s *Sender) Send(_ context.Context, el *xmltree.Element) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, el)
	return nil
}

func (s *Sender) SendIQ(context.Context, *xmltree.Element) (*xmltree.Element, error) {
	return nil, component.ErrNotConnected
}

// Take returns what was sent since the last Take and forgets it.
func (s *Sender) Take() []*xmltree.Element {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}
