// Package xmltree decodes one XML element into a small, bounded tree and
// encodes trees back to tokens.
//
// Stanza handlers in agentgw work on these trees instead of raw token
// streams: a stanza is read whole (within limits) by the component, handed to
// a worker, and answered later without holding the stream's locks.
package xmltree

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Element is one XML element with its attributes, child elements and the
// concatenation of its character data. Mixed content keeps only the text;
// none of the protocols agentgw speaks uses interleaved text and elements.
type Element struct {
	Name     xml.Name
	Attr     []xml.Attr
	Children []*Element
	Text     string
}

// Limits bound what Decode accepts. Zero fields take the defaults below.
type Limits struct {
	MaxBytes    int // total character data plus attribute values
	MaxDepth    int
	MaxElements int
}

// DefaultLimits fit the largest stanza the gateway accepts (a 1 MiB manifest
// registration) with room for XML overhead.
var DefaultLimits = Limits{MaxBytes: 2 << 20, MaxDepth: 32, MaxElements: 10000}

// ErrLimit reports that a document exceeded Limits.
var ErrLimit = errors.New("xmltree: document exceeds limits")

// New returns an element in namespace space with the given local name.
func New(space, local string, attrs ...string) *Element {
	e := &Element{Name: xml.Name{Space: space, Local: local}}
	for i := 0; i+1 < len(attrs); i += 2 {
		e.SetAttr(attrs[i], attrs[i+1])
	}
	return e
}

// Attr returns the value of the unqualified attribute local, or "".
func (e *Element) AttrValue(local string) string {
	v, _ := e.LookupAttr(local)
	return v
}

// LookupAttr returns the unqualified attribute local and whether it exists.
func (e *Element) LookupAttr(local string) (string, bool) {
	if e == nil {
		return "", false
	}
	for _, a := range e.Attr {
		if a.Name.Local == local && (a.Name.Space == "" || a.Name.Space == e.Name.Space) {
			return a.Value, true
		}
	}
	return "", false
}

// NSXML is the namespace the xml prefix is bound to (xml:lang).
const NSXML = "http://www.w3.org/XML/1998/namespace"

// Lang returns the element's own xml:lang attribute and whether it has one.
func (e *Element) Lang() (string, bool) {
	if e == nil {
		return "", false
	}
	for _, a := range e.Attr {
		if a.Name.Local == "lang" && (a.Name.Space == NSXML || a.Name.Space == "xml") {
			return a.Value, true
		}
	}
	return "", false
}

// SetLang sets xml:lang, replacing an existing one, and returns e.
func (e *Element) SetLang(lang string) *Element {
	for i, a := range e.Attr {
		if a.Name.Local == "lang" && (a.Name.Space == NSXML || a.Name.Space == "xml") {
			e.Attr[i].Value = lang
			return e
		}
	}
	e.Attr = append(e.Attr, xml.Attr{Name: xml.Name{Space: NSXML, Local: "lang"}, Value: lang})
	return e
}

// SetAttr sets (or replaces) an unqualified attribute. An empty value still
// sets the attribute.
func (e *Element) SetAttr(local, value string) *Element {
	for i, a := range e.Attr {
		if a.Name.Local == local && a.Name.Space == "" {
			e.Attr[i].Value = value
			return e
		}
	}
	e.Attr = append(e.Attr, xml.Attr{Name: xml.Name{Local: local}, Value: value})
	return e
}

// Add appends children and returns e, for building trees in one expression.
func (e *Element) Add(children ...*Element) *Element {
	for _, c := range children {
		if c != nil {
			e.Children = append(e.Children, c)
		}
	}
	return e
}

// WithText sets the character data and returns e.
func (e *Element) WithText(s string) *Element {
	e.Text = s
	return e
}

// Child returns the first child with the given namespace and local name.
// An empty space matches any namespace.
func (e *Element) Child(space, local string) *Element {
	if e == nil {
		return nil
	}
	for _, c := range e.Children {
		if c.Name.Local == local && (space == "" || c.Name.Space == space) {
			return c
		}
	}
	return nil
}

// ChildrenNamed returns every child with the given namespace and local name.
func (e *Element) ChildrenNamed(space, local string) []*Element {
	if e == nil {
		return nil
	}
	var out []*Element
	for _, c := range e.Children {
		if c.Name.Local == local && (space == "" || c.Name.Space == space) {
			out = append(out, c)
		}
	}
	return out
}

// Is reports whether e has the given namespace and local name.
func (e *Element) Is(space, local string) bool {
	return e != nil && e.Name.Space == space && e.Name.Local == local
}

// Decode reads the element that start opens from r, which must be positioned
// just after start. It enforces lim and never resolves entities beyond the
// predefined XML ones (encoding/xml has no DTD support).
func Decode(r xml.TokenReader, start xml.StartElement, lim Limits) (*Element, error) {
	lim = lim.withDefaults()
	st := decodeState{lim: lim}
	root := st.newElement(start)
	stack := []*Element{root}
	var text []*strings.Builder
	text = append(text, new(strings.Builder))
	if err := st.account(attrBytes(start.Attr)); err != nil {
		return nil, err
	}
	for len(stack) > 0 {
		tok, err := r.Token()
		if err != nil {
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) >= lim.MaxDepth {
				return nil, fmt.Errorf("%w: nesting deeper than %d", ErrLimit, lim.MaxDepth)
			}
			st.elements++
			if st.elements > lim.MaxElements {
				return nil, fmt.Errorf("%w: more than %d elements", ErrLimit, lim.MaxElements)
			}
			if err := st.account(attrBytes(t.Attr)); err != nil {
				return nil, err
			}
			el := st.newElement(t)
			parent := stack[len(stack)-1]
			parent.Children = append(parent.Children, el)
			stack = append(stack, el)
			text = append(text, new(strings.Builder))
		case xml.CharData:
			if err := st.account(len(t)); err != nil {
				return nil, err
			}
			text[len(text)-1].Write(t)
		case xml.EndElement:
			top := stack[len(stack)-1]
			top.Text = text[len(text)-1].String()
			stack = stack[:len(stack)-1]
			text = text[:len(text)-1]
		case xml.Directive:
			return nil, errors.New("xmltree: directives are not allowed")
		}
	}
	return root, nil
}

type decodeState struct {
	lim      Limits
	bytes    int
	elements int
}

func (s *decodeState) account(n int) error {
	s.bytes += n
	if s.bytes > s.lim.MaxBytes {
		return fmt.Errorf("%w: more than %d bytes", ErrLimit, s.lim.MaxBytes)
	}
	return nil
}

func (s *decodeState) newElement(t xml.StartElement) *Element {
	e := &Element{Name: t.Name}
	for _, a := range t.Attr {
		if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
			continue
		}
		e.Attr = append(e.Attr, a)
	}
	return e
}

func attrBytes(attrs []xml.Attr) int {
	n := 0
	for _, a := range attrs {
		n += len(a.Value) + len(a.Name.Local)
	}
	return n
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxElements <= 0 {
		l.MaxElements = DefaultLimits.MaxElements
	}
	return l
}

// Parse decodes the first element of an XML document held in data. It is
// meant for tests, fixtures and CLI input, not for the stream.
func Parse(data []byte, lim Limits) (*Element, error) {
	d := xml.NewDecoder(strings.NewReader(string(data)))
	d.Strict = true
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return Decode(d, t, lim)
		case xml.Directive:
			return nil, errors.New("xmltree: directives are not allowed")
		}
	}
}

// Tokens returns e as a token stream, with namespaces declared where they
// change from the parent's.
func (e *Element) Tokens() xml.TokenReader {
	var toks []xml.Token
	e.appendTokens(&toks, "")
	return &sliceReader{toks: toks}
}

func (e *Element) appendTokens(toks *[]xml.Token, parentSpace string) {
	start := xml.StartElement{Name: xml.Name{Local: e.Name.Local}}
	if e.Name.Space != parentSpace {
		start.Attr = append(start.Attr, xml.Attr{Name: xml.Name{Local: "xmlns"}, Value: e.Name.Space})
	}
	start.Attr = append(start.Attr, e.Attr...)
	*toks = append(*toks, start)
	if e.Text != "" {
		*toks = append(*toks, xml.CharData(e.Text))
	}
	for _, c := range e.Children {
		c.appendTokens(toks, e.Name.Space)
	}
	*toks = append(*toks, xml.EndElement{Name: xml.Name{Local: e.Name.Local}})
}

type sliceReader struct {
	toks []xml.Token
	i    int
}

func (r *sliceReader) Token() (xml.Token, error) {
	if r.i >= len(r.toks) {
		return nil, io.EOF
	}
	t := r.toks[r.i]
	r.i++
	return t, nil
}

// String serializes e as XML. Namespaces are written as default-namespace
// declarations, so the output is stable and byte-comparable.
func (e *Element) String() string {
	var b strings.Builder
	e.write(&b, "")
	return b.String()
}

func (e *Element) write(b *strings.Builder, parentSpace string) {
	b.WriteByte('<')
	b.WriteString(e.Name.Local)
	if e.Name.Space != parentSpace {
		b.WriteString(` xmlns="`)
		escapeAttr(b, e.Name.Space)
		b.WriteByte('"')
	}
	for _, a := range e.Attr {
		b.WriteByte(' ')
		if a.Name.Space != "" {
			// Only xml:lang style prefixed attributes reach here.
			b.WriteString(attrPrefix(a.Name.Space))
			b.WriteByte(':')
		}
		b.WriteString(a.Name.Local)
		b.WriteString(`="`)
		escapeAttr(b, a.Value)
		b.WriteByte('"')
	}
	if e.Text == "" && len(e.Children) == 0 {
		b.WriteString("/>")
		return
	}
	b.WriteByte('>')
	escapeText(b, e.Text)
	for _, c := range e.Children {
		c.write(b, e.Name.Space)
	}
	b.WriteString("</")
	b.WriteString(e.Name.Local)
	b.WriteByte('>')
}

func attrPrefix(space string) string {
	if space == "http://www.w3.org/XML/1998/namespace" || space == "xml" {
		return "xml"
	}
	return space
}

func escapeText(b *strings.Builder, s string) {
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\r':
			b.WriteString("&#xD;")
		default:
			b.WriteRune(r)
		}
	}
}

func escapeAttr(b *strings.Builder, s string) {
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\n':
			b.WriteString("&#xA;")
		case '\r':
			b.WriteString("&#xD;")
		case '\t':
			b.WriteString("&#x9;")
		default:
			b.WriteRune(r)
		}
	}
}
