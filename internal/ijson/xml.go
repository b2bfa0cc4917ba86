package ijson

import (
	"strings"

	"github.com/agentgw/agentgw/xep/xmltree"
)

// XMLSafe reports whether the canonical form of string s is legal XML 1.0
// character data. Canonical writes U+0000–U+001F as JSON escapes and every
// other code point raw, so the only characters a canonical JSON text cannot
// carry in XML are U+FFFE and U+FFFF (lone surrogates never pass Parse).
// Control characters are fine: they travel as escapes.
func XMLSafe(s string) bool {
	for _, r := range s {
		if !xmlCarried(r) {
			return false
		}
	}
	return true
}

// ToXMLSafe replaces the code points that make XMLSafe false, and invalid
// UTF-8, with U+FFFD, leaving everything else (control characters
// included) as it is.
func ToXMLSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if xmlCarried(r) {
			return r
		}
		return '\uFFFD'
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

func xmlCarried(r rune) bool { return r < 0x20 || xmltree.IsChar(r) }
