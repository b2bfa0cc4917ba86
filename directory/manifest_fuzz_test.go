package directory

import (
	"bytes"
	"errors"
	"testing"

	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/testkit/fuzzcheck"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// FuzzParseManifest feeds manifest JSON (seeds in
// testdata/fuzz/FuzzParseManifest) to the validation the register IQ and
// the static agents use. Rejections are ValidationError or ErrTooLarge and
// never quote the document; an accepted manifest is canonical, hashes to
// its Hash, parses again to the same hash, and travels through XML
// unchanged.
func FuzzParseManifest(f *testing.F) {
	vocab := fuzzcheck.Vocabulary(f, "directory", "internal/ijson", "internal/schema", "agentproto/ns")
	vocab.Add(string(ManifestSchemaJSON)) // schema keywords name failures
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %T is neither ValidationError nor ErrTooLarge: %v", err, err)
			}
			if w := vocab.Foreign(err.Error()); w != "" {
				t.Fatalf("error %q carries %q, which no source literal spells: reflected input", err, w)
			}
			return
		}
		canon, _, err := ijson.Canonicalize(m.Canonical, ijson.Limits{MaxBytes: 4 << 20})
		if err != nil || !bytes.Equal(canon, m.Canonical) {
			t.Fatalf("stored bytes are not canonical (%v)", err)
		}
		if ijson.Hash(m.Canonical) != m.Hash {
			t.Fatal("hash does not match the canonical bytes")
		}
		again, err := ParseManifest(m.Canonical)
		if err != nil || again.Hash != m.Hash || len(again.Tools) != len(m.Tools) {
			t.Fatalf("canonical form does not parse to the same manifest: %v", err)
		}
		for i := range m.Tools {
			tl := &m.Tools[i]
			if !ValidToolName(tl.Name) {
				t.Fatalf("tool name %q accepted", tl.Name)
			}
			if got, ok := m.Tool(tl.Name); !ok || got.Name != tl.Name {
				t.Fatalf("tool %q not found by name", tl.Name)
			}
			if len(tl.InputSchema) == 0 || ijson.Hash(tl.InputSchema) != tl.InputHash {
				t.Fatalf("tool %q input schema hash mismatch", tl.Name)
			}
			if tl.OutputSchema != nil && ijson.Hash(tl.OutputSchema) != tl.OutputHash {
				t.Fatalf("tool %q output schema hash mismatch", tl.Name)
			}
			if v, name, err := ParseToolNode(ToolNode(m.Version, tl.Name)); err != nil || v != m.Version || name != tl.Name {
				t.Fatalf("tool node of %q does not round trip: %v", tl.Name, err)
			}
		}
		// The manifest is served as XML character data: it must come back
		// byte for byte.
		el, err := xmltree.Parse([]byte(xmltree.New("urn:x", "json").WithText(string(m.Canonical)).String()), xmltree.DefaultLimits)
		if err != nil || el.Text != string(m.Canonical) {
			t.Fatalf("canonical manifest does not survive XML (%v)", err)
		}
	})
}
