package ijson

import (
	"fmt"
	"math"
	"slices"
	"unicode/utf8"
)

// maxCanonicalDepth stops runaway recursion on hand-built (possibly cyclic)
// values; parsed values are already bounded by Limits.MaxDepth.
const maxCanonicalDepth = 10000

// Canonical serializes v as RFC 8785 (JCS) canonical JSON: no insignificant
// whitespace, object members sorted by the UTF-16 code units of their names,
// numbers as ECMAScript Number.prototype.toString, and strings escaped as
// JSON.stringify does. v must be built from the types Parse returns; int and
// int64 are accepted when exactly representable as a double. NaN, infinities
// and invalid UTF-8 are errors.
func Canonical(v any) ([]byte, error) {
	return appendValue(nil, v, 0)
}

func canonErr(kind ErrorKind, reason string) error {
	return &Error{Kind: kind, Offset: -1, Reason: reason}
}

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxCanonicalDepth {
		return dst, canonErr(KindLimit, "nesting too deep")
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendString(dst, x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return dst, canonErr(KindNumberRange, "number is not finite")
		}
		return appendNumber(dst, x), nil
	case int:
		return appendInt(dst, int64(x))
	case int64:
		return appendInt(dst, x)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			if !utf8.ValidString(k) {
				return dst, canonErr(KindInvalidUTF8, "invalid UTF-8 in member name")
			}
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendString(dst, k); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
			if dst, err = appendValue(dst, x[k], depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("ijson: cannot canonicalize a value of type %T", v)
}

func appendInt(dst []byte, n int64) ([]byte, error) {
	f := float64(n)
	// float64(MaxInt64) rounds up to 2^63, which does not convert back.
	if f >= 0x1p63 || int64(f) != n {
		return dst, canonErr(KindNumberRange, "integer not exactly representable as a double")
	}
	return appendNumber(dst, f), nil
}

// compareUTF16 orders strings by UTF-16 code units (RFC 8785 section
// 3.2.3). UTF-8 byte order equals code point order, which differs from
// UTF-16 order only between supplementary characters (surrogate pairs,
// 0xD800..) and BMP characters at U+E000 and above.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	// Back up to the start of the rune the two strings diverge in.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	if (ra >= 0x10000) != (rb >= 0x10000) {
		// Compare a BMP rune with the leading surrogate of the other;
		// valid BMP runes are never surrogates, so 0xD800 stands for all.
		if ra >= 0x10000 {
			ra = 0xD800
		} else {
			rb = 0xD800
		}
	}
	return int(ra) - int(rb)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as JSON.stringify does: only '"', '\\' and control
// characters are escaped, using the short forms where JSON has them.
func appendString(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return dst, canonErr(KindInvalidUTF8, "invalid UTF-8 in string")
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), nil
}
