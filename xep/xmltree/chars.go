package xmltree

import (
	"strings"
	"unicode/utf8"
)

// IsChar reports whether r is an XML 1.0 Char: the only code points an XML
// stream can carry, raw or as a character reference.
func IsChar(r rune) bool {
	switch {
	case r == 0x9, r == 0xA, r == 0xD:
		return true
	case r >= 0x20 && r <= 0xD7FF:
		return true
	case r >= 0xE000 && r <= 0xFFFD:
		return true
	case r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

// ValidText reports whether s is valid UTF-8 holding only XML 1.0 Chars.
func ValidText(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !IsChar(r) {
			return false
		}
		i += n
	}
	return true
}

// Sanitize returns s for use as XML text or an attribute value: invalid
// UTF-8 and every code point XML 1.0 cannot carry become U+FFFD. It is for
// human-readable copies (disco names, form values, vCards) of data whose
// exact form travels elsewhere, never for JSON payloads (see JSONText).
// It keeps what XML can carry (controls such as CR, bidi overrides); text
// a remote peer wrote that is shown to someone else goes through
// internal/displaytext, which applies IsChar and stricter rules.
func Sanitize(s string) string {
	if ValidText(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if IsChar(r) {
			return r
		}
		return '\uFFFD'
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// JSONText renders JSON text as XML character data without changing the
// JSON value: every code point XML 1.0 cannot carry is written as a JSON
// \u escape ("JSON Payload Encoding": producers MUST encode such
// characters with JSON escapes). In valid JSON such a code point can only
// stand inside a string, where the escape means the same character, so the
// text still parses to the same value; it is just no longer canonical.
// Without this the XML encoder would replace U+FFFE or U+FFFF (which RFC
// 8785 leaves raw) with U+FFFD and silently alter the payload. Invalid
// UTF-8 (never produced by ijson) becomes \ufffd.
func JSONText(b []byte) string {
	clean := true
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && n == 1) || !IsChar(r) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return string(b)
	}
	const hex = "0123456789abcdef"
	var sb strings.Builder
	sb.Grow(len(b) + 16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			sb.WriteString(`\ufffd`)
		case IsChar(r):
			sb.Write(b[i : i+n])
		default:
			// Every non-Char is in the BMP (controls, surrogates,
			// U+FFFE, U+FFFF), so one \uXXXX suffices.
			sb.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				sb.WriteByte(hex[(r>>shift)&0xF])
			}
		}
		i += n
	}
	return sb.String()
}
