// Package xmpptime parses and formats XEP-0082 date-times exactly.
//
// The protocol compares deadlines "after applying their time-zone offsets and
// preserving every supplied fractional digit", so an Instant keeps the
// digits below the nanosecond that time.Time cannot hold: a deadline of
// 12:00:00.0000000001Z is not reached at 12:00:00.000000000Z.
//
// Only the XEP-0082 DateTime profile is accepted:
// CCYY-MM-DDThh:mm:ss[.s+](Z|+hh:mm|-hh:mm), with an upper-case T and Z, at
// most MaxFractionDigits fractional digits, and every field range-checked
// (including the day of the month). A leap second (ss = 60) is rejected
// rather than mapped, because mapping it would change the instant named.
// The instant, once converted to UTC, must lie in the years 0000 to 9999 so
// that String always yields a DateTime that Parse accepts.
package xmpptime

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// MaxFractionDigits bounds the fractional-second digits Parse accepts.
const MaxFractionDigits = 64

var (
	// ErrSyntax reports text that is not an XEP-0082 DateTime.
	ErrSyntax = errors.New("xmpptime: not an XEP-0082 DateTime")
	// ErrRange reports a well-formed DateTime with a field out of range.
	ErrRange = errors.New("xmpptime: DateTime field out of range")
)

// Instant is an exact instant: a UTC time.Time with whole nanoseconds plus
// any further fractional digits that were supplied. The zero Instant is
// January 1, year 1, 00:00:00 UTC.
type Instant struct {
	t   time.Time // UTC, no monotonic reading
	sub string    // fractional digits after the ninth, trailing zeros removed
}

// Parse reads an XEP-0082 DateTime. Errors are ErrSyntax or ErrRange and
// never contain s.
func Parse(s string) (Instant, error) {
	const minLen = len("2006-01-02T15:04:05Z")
	if len(s) < minLen || len(s) > minLen+1+MaxFractionDigits+5 {
		return Instant{}, ErrSyntax
	}
	if s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return Instant{}, ErrSyntax
	}
	year, ok1 := num(s, 0, 4)
	month, ok2 := num(s, 5, 2)
	day, ok3 := num(s, 8, 2)
	hour, ok4 := num(s, 11, 2)
	minute, ok5 := num(s, 14, 2)
	sec, ok6 := num(s, 17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return Instant{}, ErrSyntax
	}

	i := 19
	frac := ""
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 || j-i-1 > MaxFractionDigits {
			return Instant{}, ErrSyntax
		}
		frac = s[i+1 : j]
		i = j
	}

	offset := 0 // seconds east of UTC
	switch rest := s[i:]; {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, okh := num(rest, 1, 2)
		om, okm := num(rest, 4, 2)
		if !okh || !okm {
			return Instant{}, ErrSyntax
		}
		if oh > 23 || om > 59 {
			return Instant{}, ErrRange
		}
		offset = oh*3600 + om*60
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return Instant{}, ErrSyntax
	}

	if month < 1 || month > 12 || day < 1 || day > daysIn(time.Month(month), year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return Instant{}, ErrRange
	}

	ns := 0
	sub := ""
	if frac != "" {
		nine := frac
		if len(nine) > 9 {
			nine, sub = frac[:9], strings.TrimRight(frac[9:], "0")
		}
		ns, _ = strconv.Atoi(nine + strings.Repeat("0", 9-len(nine)))
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, ns, time.UTC).
		Add(-time.Duration(offset) * time.Second)
	if y := t.Year(); y < 0 || y > 9999 {
		return Instant{}, ErrRange
	}
	return Instant{t: t, sub: sub}, nil
}

// num reads n ASCII digits at s[i:].
func num(s string, i, n int) (int, bool) {
	v := 0
	for _, c := range []byte(s[i : i+n]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

func daysIn(m time.Month, year int) int {
	// Day 0 of the next month is the last day of m.
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// FromTime returns the instant t names, in UTC and without a monotonic
// clock reading.
func FromTime(t time.Time) Instant {
	return Instant{t: t.UTC().Round(0)}
}

// Time returns the instant truncated to whole nanoseconds, in UTC.
func (i Instant) Time() time.Time { return i.t }

// ReachedBy reports whether now is at or after the instant, exactly: an
// instant with nonzero digits below the nanosecond is reached only after
// the nanosecond it truncates to.
func (i Instant) ReachedBy(now time.Time) bool {
	if i.sub != "" {
		return now.After(i.t)
	}
	return !now.Before(i.t)
}

// Compare returns -1, 0 or +1 as i is before, equal to or after j.
func (i Instant) Compare(j Instant) int {
	if c := i.t.Compare(j.t); c != 0 {
		return c
	}
	// Fraction digit strings without trailing zeros order lexically.
	return strings.Compare(i.sub, j.sub)
}

// Before reports whether i is strictly before j.
func (i Instant) Before(j Instant) bool { return i.Compare(j) < 0 }

// Equal reports whether i and j name the same instant.
func (i Instant) Equal(j Instant) bool { return i.Compare(j) == 0 }

// String returns the canonical DateTime of the instant: UTC with a "Z",
// and every nonzero fractional digit that was supplied (trailing zeros
// dropped). Texts naming the same instant give the same String.
func (i Instant) String() string {
	b := make([]byte, 0, 32+len(i.sub))
	b = i.t.AppendFormat(b, "2006-01-02T15:04:05")
	frac := strings.TrimRight(strconv.Itoa(1e9 + i.t.Nanosecond())[1:]+i.sub, "0")
	if frac != "" {
		b = append(b, '.')
		b = append(b, frac...)
	}
	return string(append(b, 'Z'))
}

// MarshalText returns String, so an Instant stores and transmits exactly.
func (i Instant) MarshalText() ([]byte, error) { return []byte(i.String()), nil }

// UnmarshalText parses an XEP-0082 DateTime.
func (i *Instant) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*i = v
	return nil
}

// Format returns t as an XEP-0082 DateTime in UTC, with fractional seconds
// only when nonzero and then without trailing zeros.
func Format(t time.Time) string { return FromTime(t).String() }
