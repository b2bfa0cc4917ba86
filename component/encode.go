package component

import (
	"unicode/utf8"

	"github.com/agentgw/agentgw/xep/xmltree"
)

// xmlNS is the namespace of xml:lang, the only prefixed attribute the
// gateway writes.
const xmlNS = "http://www.w3.org/XML/1998/namespace"

// appendStanza appends el as mellium's session encoder would write it
// (encoding/xml behind mellium's stanza encoder): the stanza in
// jabber:component:accept, a child's namespace declared where it changes
// from its parent's, never a self-closed tag, text and attribute values
// escaped as encoding/xml escapes them (invalid characters become U+FFFD).
// Encoding straight into the writer's buffer saves the token slice, the
// encoder's per-token work and mellium's per-Send goroutine. ok is false,
// and b is returned unchanged, for a stanza outside that common shape
// (no id, an attribute in another namespace than xml:, an xmlns
// attribute, an empty name); the writer then sends it through mellium.
func appendStanza(b []byte, el *xmltree.Element) ([]byte, bool) {
	if !plainTree(el, true) {
		return b, false
	}
	return appendNode(b, el, true, NSComponent), true
}

// appendElement appends a child, declaring its namespace where it differs
// from its parent's.
func appendElement(b []byte, e *xmltree.Element, parentSpace string) []byte {
	return appendNode(b, e, e.Name.Space != parentSpace, e.Name.Space)
}

// appendNode appends e with xmlns declared when declare is set; its
// children are compared with e's own namespace.
func appendNode(b []byte, e *xmltree.Element, declare bool, xmlns string) []byte {
	b = append(b, '<')
	b = append(b, e.Name.Local...)
	if declare {
		b = append(b, ` xmlns="`...)
		b = appendEscaped(b, xmlns, true)
		b = append(b, '"')
	}
	b = appendAttrs(b, e)
	b = append(b, '>')
	b = appendEscaped(b, e.Text, false)
	for _, ch := range e.Children {
		b = appendElement(b, ch, e.Name.Space)
	}
	b = append(b, "</"...)
	b = append(b, e.Name.Local...)
	return append(b, '>')
}

func appendAttrs(b []byte, e *xmltree.Element) []byte {
	for _, a := range e.Attr {
		b = append(b, ' ')
		if a.Name.Space == xmlNS {
			b = append(b, "xml:"...)
		}
		b = append(b, a.Name.Local...)
		b = append(b, `="`...)
		b = appendEscaped(b, a.Value, true)
		b = append(b, '"')
	}
	return b
}

// plainTree reports whether appendStanza writes e exactly as mellium would.
// The stanza itself needs a non-empty id (mellium would add one) and no
// empty from (mellium would drop it).
func plainTree(e *xmltree.Element, top bool) bool {
	if e == nil || e.Name.Local == "" || !validName(e.Name.Local) {
		return false
	}
	hasID := false
	for _, a := range e.Attr {
		if a.Name.Local == "" || a.Name.Local == "xmlns" || !validName(a.Name.Local) {
			return false
		}
		if a.Name.Space != "" && a.Name.Space != xmlNS {
			return false
		}
		if top && a.Name.Space == "" {
			switch a.Name.Local {
			case "id":
				if a.Value == "" {
					return false
				}
				hasID = true
			case "from":
				if a.Value == "" {
					return false
				}
			}
		}
	}
	if top && (!hasID || !isStanza(e.Name.Local)) {
		return false
	}
	for _, ch := range e.Children {
		if !plainTree(ch, false) {
			return false
		}
	}
	return true
}

// validName accepts the ASCII names the gateway's protocols use; anything
// else goes through encoding/xml, which decides what to do with it.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '_':
		case i > 0 && ('0' <= c && c <= '9' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// appendEscaped is encoding/xml's escaping as its Encoder applies it:
// attribute values escape line feeds (newline true), character data does
// not.
func appendEscaped(b []byte, s string, newline bool) []byte {
	last := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf && c >= 0x20 && c != '"' && c != '\'' && c != '&' && c != '<' && c != '>' {
			i++ // the common case: printable ASCII that needs no escape
			continue
		}
		r, width := utf8.DecodeRuneInString(s[i:])
		i += width
		var esc string
		switch r {
		case '"':
			esc = "&#34;"
		case '\'':
			esc = "&#39;"
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '\t':
			esc = "&#x9;"
		case '\n':
			if !newline {
				continue
			}
			esc = "&#xA;"
		case '\r':
			esc = "&#xD;"
		default:
			if !inCharRange(r) || (r == utf8.RuneError && width == 1) {
				esc = "\uFFFD"
				break
			}
			continue
		}
		b = append(b, s[last:i-width]...)
		b = append(b, esc...)
		last = i
	}
	return append(b, s[last:]...)
}

// inCharRange is XML 1.0's Char production (encoding/xml's
// isInCharacterRange).
func inCharRange(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}
