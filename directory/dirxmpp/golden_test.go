package dirxmpp

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/internal/xmltree"
)

// goldenDir holds request/reply pairs adapted from the spec's examples. Each
// file is one <exchange/> in the component namespace whose first child is
// the request and whose second is the expected reply; its fixture
// attribute picks the directory contents:
//
//	weather   the spec's weather manifest plus a calendar agent (default)
//	toolless  the spec's tool-less weather manifest (the hash vector)
//	empty     nothing registered
const goldenDir = "../../testdata/golden"

func goldenFixture(t *testing.T, name string) *fakeDir {
	switch name {
	case "", "weather":
		return newFakeDir(t, weatherManifest, calendarManifest)
	case "toolless":
		return newFakeDir(t, toollessManifest)
	case "empty":
		return newFakeDir(t)
	}
	t.Fatalf("unknown fixture %q", name)
	return nil
}

func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("only %d golden files in %s", len(files), goldenDir)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ex, err := xmltree.Parse(data, xmltree.Limits{})
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if !ex.Is(component.NSComponent, "exchange") || len(ex.Children) != 2 {
				t.Fatalf("want <exchange/> with a request and a reply")
			}
			req, want := ex.Children[0], ex.Children[1]
			h := newHarness(t, goldenFixture(t, ex.AttrValue("fixture")))
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
			got := h.router.DispatchIQ(t.Context(), in)
			// Through the wire form, as a peer would read it.
			got, err = xmltree.Parse([]byte(got.String()), xmltree.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if g, w := canonicalXML(got), canonicalXML(want); g != w {
				t.Errorf("reply differs\n got: %s\nwant: %s", g, w)
			}
		})
	}
}

// canonicalXML renders a tree so that attribute order, namespace prefixes
// and whitespace between elements do not matter. Character data is
// trimmed at its ends only, which is safe because no golden value has
// significant outer whitespace.
func canonicalXML(e *xmltree.Element) string {
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
