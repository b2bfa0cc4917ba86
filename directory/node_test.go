package directory

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestToolNodeSpecVector(t *testing.T) {
	t.Parallel()
	const node = "urn:xmpp:agent-tool:0#1.4.0#Zm9yZWNhc3QuZ2V0"
	if got := ToolNode("1.4.0", "forecast.get"); got != node {
		t.Fatalf("ToolNode = %s", got)
	}
	v, name, err := ParseToolNode(node)
	if err != nil || v != "1.4.0" || name != "forecast.get" {
		t.Fatalf("ParseToolNode = %q %q %v", v, name, err)
	}
	if got := ToolsNode("1.4.0"); got != "urn:xmpp:agent-tools:0#1.4.0" {
		t.Fatalf("ToolsNode = %s", got)
	}
	if v, ok := ParseToolsNode("urn:xmpp:agent-tools:0#1.4.0"); !ok || v != "1.4.0" {
		t.Fatalf("ParseToolsNode = %q %v", v, ok)
	}
}

func TestToolNodeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"a", "ab", "abc", "Straße 🌦", "x/y#z", "\t", strings.Repeat("é", MaxToolNameBytes/2)} {
		v, got, err := ParseToolNode(ToolNode("v~1", name))
		if err != nil || v != "v~1" || got != name {
			t.Errorf("%q: %q %q %v", name, v, got, err)
		}
	}
}

func TestParseToolNodeRejects(t *testing.T) {
	t.Parallel()
	for _, node := range []string{
		"",
		"urn:xmpp:agent-tool:0",
		"urn:xmpp:agent-tool:0#1.4.0",                                // no name part
		"urn:xmpp:agent-tool:0#1.4.0#",                               // empty name
		"urn:xmpp:agent-tool:0##Zm9v",                                // empty version
		"urn:xmpp:agent-tool:0#1 4#Zm9v",                             // bad version
		"urn:xmpp:agent-tool:0#1.4.0#Zm9vYg==",                       // padding
		"urn:xmpp:agent-tool:0#1.4.0#Zm9vYg=",                        // partial padding
		"urn:xmpp:agent-tool:0#1.4.0#Zm9vYh",                         // non-zero trailing bits (non-canonical)
		"urn:xmpp:agent-tool:0#1.4.0#Zm9v\nYg",                       // line break the decoder would skip
		"urn:xmpp:agent-tool:0#1.4.0#Zm9v+g",                         // standard, not url alphabet
		"urn:xmpp:agent-tool:0#1.4.0#Z",                              // impossible length
		"urn:xmpp:agent-tool:0#1.4.0#_w",                             // 0xFF: invalid UTF-8
		"urn:xmpp:agent-tool:0#1.4.0#AQ",                             // U+0001: not XML
		"urn:xmpp:agent-tool:0#1.4.0#7b-_",                           // U+FFFF... (EF BF BF): not XML
		"urn:xmpp:agent-tool:0#1.4.0#Zm9v#Zm9v",                      // extra separator
		"urn:xmpp:agent-tools:0#1.4.0",                               // collection node
		"URN:xmpp:agent-tool:0#1.4.0#Zm9v",                           // prefix case
		"urn:xmpp:agent-tool:0#1.4.0#" + strings.Repeat("QUFB", 200), // name too long
	} {
		if v, n, err := ParseToolNode(node); err == nil {
			t.Errorf("%q accepted as %q %q", node, v, n)
		}
	}
	for _, node := range []string{"urn:xmpp:agent-tools:0#", "urn:xmpp:agent-tools:0", "urn:xmpp:agent-tools:0#a b", "urn:xmpp:agent-tool:0#1"} {
		if _, ok := ParseToolsNode(node); ok {
			t.Errorf("%q accepted as a tools node", node)
		}
	}
}

// FuzzParseToolNode checks that whatever ParseToolNode accepts is valid and
// re-encodes to exactly the input (so every accepted encoding is
// canonical), and that encoding valid names always round-trips.
func FuzzParseToolNode(f *testing.F) {
	f.Add("urn:xmpp:agent-tool:0#1.4.0#Zm9yZWNhc3QuZ2V0")
	f.Add("urn:xmpp:agent-tool:0#1.4.0#Zm9vYg==")
	f.Fuzz(func(t *testing.T, node string) {
		v, name, err := ParseToolNode(node)
		if err == nil {
			if !utf8.ValidString(name) || !ValidToolName(name) || name == "" {
				t.Fatalf("accepted invalid name %q", name)
			}
			if ToolNode(v, name) != node {
				t.Fatalf("accepted non-canonical node %q", node)
			}
		}
		// Treat the input as a name too.
		if ValidToolName(node) {
			v2, n2, err := ParseToolNode(ToolNode("1", node))
			if err != nil || v2 != "1" || n2 != node {
				t.Fatalf("round trip of %q failed: %v", node, err)
			}
		}
	})
}
