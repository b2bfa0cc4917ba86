package ijson

import (
	"strconv"
)

// appendNumber writes a finite f as ECMAScript Number.prototype.toString
// (ECMA-262 Number::toString, required by RFC 8785 section 3.2.2.3).
// strconv's shortest round-trip digits are the ECMAScript digits: the
// fewest that identify f, and among those the closest to f.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 { // both +0 and -0
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var tmp [32]byte
	b := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // d[.ddd]e±XX
	var digs [17]byte
	k := 0
	i := 0
	for ; b[i] != 'e'; i++ {
		if b[i] != '.' {
			digs[k] = b[i]
			k++
		}
	}
	exp := 0
	neg := b[i+1] == '-'
	for _, c := range b[i+2:] {
		exp = exp*10 + int(c-'0')
	}
	if neg {
		exp = -exp
	}
	// ECMAScript's n: the value is 0.d1d2...dk × 10^n.
	n := exp + 1
	d := digs[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for j := k; j < n; j++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for j := n; j < 0; j++ {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}
