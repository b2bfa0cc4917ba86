// Package displaytext is the one sanitizer for text a remote peer wrote
// that the gateway shows to someone else: in a log line, a terminal, a
// progress or failure message, an MCP tool result. Every bridge and front
// uses it, so the rules are the same everywhere:
//
//  1. Redaction first: the caller's redaction steps (a
//     backendkit.Redactor's Scrub, [ScrubPEM]) run on the raw text, so a
//     secret is matched exactly as it was sent.
//  2. Then every code point that could forge structure or cannot be
//     carried is replaced by U+FFFD, never dropped (dropping could join the
//     two halves of a secret that a control character split):
//     - invalid UTF-8;
//     - control characters (C0, DEL, C1) except newline and tab; in
//     [Line], newline, tab, carriage return, vertical tab and form feed
//     become spaces instead and surrounding space is trimmed;
//     - the bidirectional embeddings, overrides and isolates
//     (U+202A–U+202E, U+2066–U+2069), which reorder what a reader sees
//     ("Trojan Source"), and the line and paragraph separators
//     U+2028, U+2029, which some viewers break lines at;
//     - code points XML 1.0 cannot carry (U+FFFE, U+FFFF; see
//     xmltree.IsChar), since the text may travel in a stanza.
//  3. Last, the text is cut to at most max code points, the last of which
//     is "…" when something was cut; max <= 0 means no bound.
package displaytext

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentgw/agentgw/xep/xmltree"
)

// Ellipsis ends text that was cut.
const Ellipsis = "…"

// Clean returns s fit for display under the package rules: redact steps,
// then replacements, then at most max code points. Newlines and tabs are
// kept.
func Clean(s string, max int, redact ...func(string) string) string {
	for _, r := range redact {
		s = r(s)
	}
	return Truncate(replace(s, false), max)
}

// Line is Clean for a one-line field: whitespace controls become spaces
// and surrounding space is trimmed.
func Line(s string, max int, redact ...func(string) string) string {
	for _, r := range redact {
		s = r(s)
	}
	return Truncate(strings.TrimSpace(replace(s, true)), max)
}

// Truncate cuts s to at most max code points, the last being [Ellipsis]
// when s was longer; max <= 0 leaves s whole.
func Truncate(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max-1 {
			return s[:i] + Ellipsis
		}
		n++
	}
	return s
}

// bad reports whether c is replaced (in Line, whitespace controls become
// spaces before this is asked).
func bad(c rune) bool {
	switch {
	case c == '\n' || c == '\t':
		return false
	case unicode.IsControl(c):
		return true
	case c >= '\u202a' && c <= '\u202e', c >= '\u2066' && c <= '\u2069', c == '\u2028', c == '\u2029':
		return true
	}
	return !xmltree.IsChar(c)
}

func space(c rune) bool {
	return c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// replace applies rule 2.
func replace(s string, line bool) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(c rune) bool { return bad(c) || (line && space(c)) }) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, c := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case line && space(c):
			b.WriteByte(' ')
		case bad(c):
			b.WriteRune('\uFFFD')
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// pemKey matches a PEM private key block, raw or inside a JSON string
// (where its newlines are \n escapes, so no quote is crossed).
var pemKey = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[^"]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`)

// RedactedKey replaces a private key block.
const RedactedKey = "[redacted private key]"

// ScrubPEM is a redaction step: it replaces every PEM private key block
// with [RedactedKey]. For peers whose own keys the gateway cannot know (it
// works on JSON text too).
func ScrubPEM(s string) string { return pemKey.ReplaceAllString(s, RedactedKey) }

// ScrubPEMBytes is ScrubPEM for a document.
func ScrubPEMBytes(doc []byte) []byte { return pemKey.ReplaceAll(doc, []byte(RedactedKey)) }
