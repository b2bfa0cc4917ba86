package ijson

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// Parse decodes exactly one JSON value (plus surrounding whitespace) from
// data. Objects become map[string]any, arrays []any, strings string, numbers
// float64, true/false bool and null nil. Zero fields of lim take their
// defaults.
func Parse(data []byte, lim Limits) (any, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxBytes {
		return nil, &Error{Kind: KindLimit, Offset: lim.MaxBytes, Reason: "document too large"}
	}
	p := parser{data: data, lim: lim}
	return p.document()
}

type parser struct {
	data   []byte
	pos    int
	lim    Limits
	values int
	buf    []byte // scratch for strings with escapes or non-ASCII
}

// frame is one open object or array; the explicit stack replaces recursion
// so hostile nesting cannot exhaust the goroutine stack.
type frame struct {
	obj   map[string]any
	arr   []any
	key   string // member name awaiting its value
	n     int    // members or elements so far
	isObj bool
}

func (p *parser) fail(kind ErrorKind, off int, reason string) error {
	return &Error{Kind: kind, Offset: off, Reason: reason}
}

func (p *parser) skipWS() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) document() (any, error) {
	var stack []frame
	var v any
value:
	for {
		p.skipWS()
		if p.pos >= len(p.data) {
			return nil, p.fail(KindSyntax, p.pos, "unexpected end of input")
		}
		p.values++
		if p.values > p.lim.MaxValues {
			return nil, p.fail(KindLimit, p.pos, "too many values")
		}
		switch c := p.data[p.pos]; c {
		case '{', '[':
			if len(stack) >= p.lim.MaxDepth {
				return nil, p.fail(KindLimit, p.pos, "nesting too deep")
			}
			p.pos++
			p.skipWS()
			if c == '[' {
				if p.pos < len(p.data) && p.data[p.pos] == ']' {
					p.pos++
					v = []any{}
					break
				}
				stack = append(stack, frame{arr: []any{}})
				continue value
			}
			if p.pos < len(p.data) && p.data[p.pos] == '}' {
				p.pos++
				v = map[string]any{}
				break
			}
			f := frame{obj: map[string]any{}, isObj: true}
			if err := p.memberName(&f); err != nil {
				return nil, err
			}
			stack = append(stack, f)
			continue value
		case '"':
			s, err := p.str()
			if err != nil {
				return nil, err
			}
			v = s
		case 't':
			if err := p.literal("true"); err != nil {
				return nil, err
			}
			v = true
		case 'f':
			if err := p.literal("false"); err != nil {
				return nil, err
			}
			v = false
		case 'n':
			if err := p.literal("null"); err != nil {
				return nil, err
			}
			v = nil
		default:
			if c != '-' && (c < '0' || c > '9') {
				return nil, p.fail(KindSyntax, p.pos, "unexpected character")
			}
			f, err := p.number()
			if err != nil {
				return nil, err
			}
			v = f
		}

		// v is complete: attach it to its container, closing containers
		// for as long as closing brackets follow.
		for {
			if len(stack) == 0 {
				p.skipWS()
				if p.pos != len(p.data) {
					return nil, p.fail(KindSyntax, p.pos, "data after the top-level value")
				}
				return v, nil
			}
			top := &stack[len(stack)-1]
			if top.isObj {
				top.obj[top.key] = v
			} else {
				top.arr = append(top.arr, v)
			}
			top.n++
			p.skipWS()
			if p.pos >= len(p.data) {
				return nil, p.fail(KindSyntax, p.pos, "unexpected end of input")
			}
			switch c := p.data[p.pos]; {
			case c == ',':
				if top.n >= p.lim.MaxMembers {
					return nil, p.fail(KindLimit, p.pos, "too many members")
				}
				p.pos++
				if top.isObj {
					p.skipWS()
					if err := p.memberName(top); err != nil {
						return nil, err
					}
				}
				continue value
			case top.isObj && c == '}':
				v = top.obj
			case !top.isObj && c == ']':
				v = top.arr
			default:
				return nil, p.fail(KindSyntax, p.pos, "expected ',' or closing bracket")
			}
			p.pos++
			stack[len(stack)-1] = frame{}
			stack = stack[:len(stack)-1]
		}
	}
}

// memberName reads `"name" :` into f.key, rejecting duplicates.
func (p *parser) memberName(f *frame) error {
	if p.pos >= len(p.data) {
		return p.fail(KindSyntax, p.pos, "unexpected end of input")
	}
	if p.data[p.pos] != '"' {
		return p.fail(KindSyntax, p.pos, "expected member name")
	}
	start := p.pos
	k, err := p.str()
	if err != nil {
		return err
	}
	if _, dup := f.obj[k]; dup {
		return p.fail(KindDuplicateKey, start, "duplicate member name")
	}
	p.skipWS()
	if p.pos >= len(p.data) || p.data[p.pos] != ':' {
		return p.fail(KindSyntax, p.pos, "expected ':'")
	}
	p.pos++
	f.key = k
	return nil
}

func (p *parser) literal(word string) error {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return p.fail(KindSyntax, p.pos, "invalid literal")
	}
	p.pos += len(word)
	return nil
}

// number scans an RFC 8259 number and converts it to a finite double.
func (p *parser) number() (float64, error) {
	d := p.data
	start := p.pos
	i := start
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
		if i < len(d) && d[i] >= '0' && d[i] <= '9' {
			return 0, p.fail(KindSyntax, i, "leading zero in number")
		}
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i)
	default:
		return 0, p.fail(KindSyntax, i, "invalid number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := digits(d, i)
		if j == i {
			return 0, p.fail(KindSyntax, i, "missing digits after decimal point")
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return 0, p.fail(KindSyntax, i, "missing exponent digits")
		}
		i = j
	}
	if i-start > p.lim.MaxStringBytes {
		return 0, p.fail(KindLimit, start, "number too long")
	}
	f, err := strconv.ParseFloat(string(d[start:i]), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		// The grammar above is stricter than ParseFloat's, so the only
		// possible failure is overflow.
		return 0, p.fail(KindNumberRange, start, "number out of double range")
	}
	p.pos = i
	return f, nil
}

func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

// str reads a string starting at the opening quote and returns it unescaped.
func (p *parser) str() (string, error) {
	d := p.data
	start := p.pos
	max := p.lim.MaxStringBytes
	i := start + 1
	// Fast path: printable ASCII without escapes needs no copy beyond the
	// final string conversion.
	for i < len(d) {
		c := d[i]
		if c == '"' {
			if i-start-1 > max {
				return "", p.fail(KindLimit, start, "string too long")
			}
			p.pos = i + 1
			return string(d[start+1 : i]), nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		i++
	}
	buf := append(p.buf[:0], d[start+1:i]...)
	for {
		if len(buf) > max {
			return "", p.fail(KindLimit, start, "string too long")
		}
		if i >= len(d) {
			return "", p.fail(KindSyntax, start, "unterminated string")
		}
		c := d[i]
		switch {
		case c == '"':
			p.pos = i + 1
			p.buf = buf
			return string(buf), nil
		case c == '\\':
			if i+1 >= len(d) {
				return "", p.fail(KindSyntax, i, "unterminated string")
			}
			esc := d[i+1]
			i += 2
			switch esc {
			case '"', '\\', '/':
				buf = append(buf, esc)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(d, i)
				if !ok {
					return "", p.fail(KindSyntax, i-2, "invalid \\u escape")
				}
				at := i - 2
				i += 4
				switch {
				case r >= 0xDC00 && r <= 0xDFFF:
					return "", p.fail(KindLoneSurrogate, at, "lone low surrogate")
				case r >= 0xD800 && r <= 0xDBFF:
					if i+1 >= len(d) || d[i] != '\\' || d[i+1] != 'u' {
						return "", p.fail(KindLoneSurrogate, at, "lone high surrogate")
					}
					lo, ok := hex4(d, i+2)
					if !ok {
						return "", p.fail(KindSyntax, i, "invalid \\u escape")
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return "", p.fail(KindLoneSurrogate, at, "lone high surrogate")
					}
					i += 6
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", p.fail(KindSyntax, i-2, "invalid escape")
			}
		case c < 0x20:
			return "", p.fail(KindSyntax, i, "control character in string")
		case c < 0x80:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				if encodedSurrogate(d[i:]) {
					return "", p.fail(KindLoneSurrogate, i, "surrogate code point in UTF-8")
				}
				return "", p.fail(KindInvalidUTF8, i, "invalid UTF-8")
			}
			buf = append(buf, d[i:i+size]...)
			i += size
		}
	}
}

// encodedSurrogate reports a (CESU-8 style) three-byte encoding of
// U+D800..U+DFFF, which RFC 3629 forbids.
func encodedSurrogate(b []byte) bool {
	return len(b) >= 3 && b[0] == 0xED && b[1] >= 0xA0 && b[1] <= 0xBF && b[2] >= 0x80 && b[2] <= 0xBF
}

func hex4(d []byte, i int) (rune, bool) {
	if len(d)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
