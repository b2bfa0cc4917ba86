package xmpptime

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, s string) Instant {
	t.Helper()
	i, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return i
}

func TestParseOffsets(t *testing.T) {
	z := mustParse(t, "2026-03-01T10:00:00Z")
	for _, s := range []string{
		"2026-03-01T12:00:00+02:00",
		"2026-03-01T04:30:00-05:30",
		"2026-02-28T23:00:00-11:00",
		"2026-03-01T10:00:00-00:00",
		"2026-03-01T10:00:00.000Z",
		"2026-03-01T10:00:00.0000000000000000000000Z",
	} {
		i := mustParse(t, s)
		if !i.Equal(z) || i.String() != z.String() {
			t.Errorf("%s: %s, want %s", s, i, z)
		}
	}
	if got := z.String(); got != "2026-03-01T10:00:00Z" {
		t.Errorf("String = %s", got)
	}
	if want := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC); !z.Time().Equal(want) || z.Time().Location() != time.UTC {
		t.Errorf("Time = %v", z.Time())
	}
}

func TestFractionBeyondNanoseconds(t *testing.T) {
	i := mustParse(t, "2026-03-01T12:00:00.12345678912345+02:00")
	if got, want := i.String(), "2026-03-01T10:00:00.12345678912345Z"; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
	if got := i.Time().Nanosecond(); got != 123456789 {
		t.Errorf("Nanosecond = %d", got)
	}
	j := mustParse(t, "2026-03-01T10:00:00.1234567891234500000Z")
	if !i.Equal(j) || i.String() != j.String() {
		t.Errorf("%s != %s", i, j)
	}
	k := mustParse(t, "2026-03-01T10:00:00.123456789123451Z")
	if !i.Before(k) || k.Before(i) || i.Equal(k) {
		t.Errorf("ordering of %s and %s wrong", i, k)
	}
	// Digits compare by value, not length: .5 is after .4999….
	a := mustParse(t, "2026-03-01T10:00:00.4999999999999Z")
	b := mustParse(t, "2026-03-01T10:00:00.5Z")
	if !a.Before(b) || b.Before(a) {
		t.Error(".4999999999999 not before .5")
	}
	long := "2026-03-01T10:00:00." + strings.Repeat("9", MaxFractionDigits) + "Z"
	if got := mustParse(t, long).String(); got != long {
		t.Errorf("64 digits not preserved: %s", got)
	}
}

func TestReachedByExact(t *testing.T) {
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	tiny := mustParse(t, "2026-03-01T10:00:00.0000000001Z")
	if tiny.ReachedBy(base) {
		t.Error("deadline .0000000001 reached at .000000000")
	}
	if !tiny.ReachedBy(base.Add(time.Nanosecond)) {
		t.Error("deadline .0000000001 not reached at .000000001")
	}
	exact := mustParse(t, "2026-03-01T12:00:00.000000001+02:00")
	if exact.ReachedBy(base) || !exact.ReachedBy(base.Add(time.Nanosecond)) || !exact.ReachedBy(base.Add(time.Hour)) {
		t.Error("whole-nanosecond deadline boundary wrong")
	}
	zero := mustParse(t, "2026-03-01T10:00:00Z")
	if !zero.ReachedBy(base) || zero.ReachedBy(base.Add(-time.Nanosecond)) {
		t.Error("deadline not reached exactly at its instant")
	}
	// A local-zone "now" with a monotonic reading compares by instant.
	loc := time.FixedZone("x", 3*3600)
	if !zero.ReachedBy(base.In(loc)) {
		t.Error("zone of now matters")
	}
	if !FromTime(time.Now()).ReachedBy(time.Now().Add(time.Second)) {
		t.Error("FromTime(now) not reached a second later")
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		in  string
		err error
	}{
		{"", ErrSyntax},
		{"2026-03-01", ErrSyntax},
		{"2026-03-01T10:00:00", ErrSyntax},          // no offset
		{"2026-03-01t10:00:00Z", ErrSyntax},         // lower-case t
		{"2026-03-01T10:00:00z", ErrSyntax},         // lower-case z
		{"2026-03-01 10:00:00Z", ErrSyntax},         // space
		{"2026-03-01T10:00Z", ErrSyntax},            // no seconds
		{"2026-03-01T10:00:00.Z", ErrSyntax},        // empty fraction
		{"2026-03-01T10:00:00,5Z", ErrSyntax},       // comma
		{"2026-03-01T10:00:00+0200", ErrSyntax},     // no colon
		{"2026-03-01T10:00:00+02", ErrSyntax},       // short offset
		{"2026-03-01T10:00:00+02:00Z", ErrSyntax},   // both
		{"2026-03-01T10:00:00Z ", ErrSyntax},        // trailing space
		{" 2026-03-01T10:00:00Z", ErrSyntax},        // leading space
		{"+2026-03-01T10:00:00Z", ErrSyntax},        // signed year
		{"12026-03-01T10:00:00Z", ErrSyntax},        // five-digit year
		{"-2026-03-01T10:00:00Z", ErrSyntax},        // negative year
		{"2026-3-01T10:00:00Z", ErrSyntax},          // one-digit month
		{"2026-03-01T1a:00:00Z", ErrSyntax},         // letter
		{"2026-03-01T10:00:00.1e3Z", ErrSyntax},     // exponent
		{"2026-03-01T10:00:00+02:00:00", ErrSyntax}, // seconds in offset
		{"2026-03-01T10:00:00\u00a0Z", ErrSyntax},
		{"2026-03-01T10:00:00.٣Z", ErrSyntax}, // non-ASCII digit
		{"2026-03-01T10:00:00." + strings.Repeat("1", MaxFractionDigits+1) + "Z", ErrSyntax},
		{"2026-13-01T10:00:00Z", ErrRange},
		{"2026-00-01T10:00:00Z", ErrRange},
		{"2026-02-29T10:00:00Z", ErrRange}, // not a leap year
		{"2026-04-31T10:00:00Z", ErrRange},
		{"2026-03-00T10:00:00Z", ErrRange},
		{"2026-03-01T24:00:00Z", ErrRange},
		{"2026-03-01T10:60:00Z", ErrRange},
		{"2026-12-31T23:59:60Z", ErrRange}, // leap second: rejected, see package doc
		{"2026-03-01T10:00:00+24:00", ErrRange},
		{"2026-03-01T10:00:00+02:60", ErrRange},
		{"9999-12-31T23:00:00-02:00", ErrRange}, // year 10000 in UTC
		{"0000-01-01T00:30:00+01:00", ErrRange}, // year -1 in UTC
	} {
		_, err := Parse(tc.in)
		if !errors.Is(err, tc.err) {
			t.Errorf("Parse(%q) = %v, want %v", tc.in, err, tc.err)
		}
		if err != nil && tc.in != "" && strings.Contains(err.Error(), tc.in) {
			t.Errorf("error reflects input: %v", err)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	for in, want := range map[string]string{
		"2024-02-29T00:00:00Z":            "2024-02-29T00:00:00Z",
		"2000-02-29T23:59:59.999999999Z":  "2000-02-29T23:59:59.999999999Z",
		"0000-01-01T00:00:00Z":            "0000-01-01T00:00:00Z",
		"9999-12-31T23:59:59Z":            "9999-12-31T23:59:59Z",
		"2026-01-01T00:30:00+01:00":       "2025-12-31T23:30:00Z",
		"2026-03-01T10:00:00.500+23:59":   "2026-02-28T10:01:00.5Z",
		"1969-12-31T23:59:59.0000000001Z": "1969-12-31T23:59:59.0000000001Z",
	} {
		if got := mustParse(t, in).String(); got != want {
			t.Errorf("%s: String = %s, want %s", in, got, want)
		}
	}
}

func TestFormat(t *testing.T) {
	loc := time.FixedZone("x", -7*3600)
	for tm, want := range map[time.Time]string{
		time.Date(2026, 3, 1, 3, 0, 0, 0, loc):               "2026-03-01T10:00:00Z",
		time.Date(2026, 3, 1, 10, 0, 0, 120000000, time.UTC): "2026-03-01T10:00:00.12Z",
		time.Date(2026, 3, 1, 10, 0, 0, 1, time.UTC):         "2026-03-01T10:00:00.000000001Z",
	} {
		if got := Format(tm); got != want {
			t.Errorf("Format = %s, want %s", got, want)
		}
		i := FromTime(tm)
		if !i.Time().Equal(tm) || i.String() != want || !mustParse(t, want).Equal(i) {
			t.Errorf("FromTime(%v) = %s", tm, i)
		}
	}
}

func TestText(t *testing.T) {
	var i Instant
	if err := i.UnmarshalText([]byte("2026-03-01T12:00:00.5+02:00")); err != nil {
		t.Fatal(err)
	}
	b, _ := i.MarshalText()
	if string(b) != "2026-03-01T10:00:00.5Z" {
		t.Errorf("MarshalText = %s", b)
	}
	if err := i.UnmarshalText([]byte("nope")); err == nil {
		t.Error("UnmarshalText accepted garbage")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"2026-03-01T10:00:00Z", "2026-03-01T12:00:00.0000000001+02:00", "2024-02-29T23:59:59.999-00:30",
		"0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999999Z", "2026-03-01T10:00:00", "2026-12-31T23:59:60Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		i, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		c := i.String()
		j, err := Parse(c)
		if err != nil || !j.Equal(i) || j.String() != c {
			t.Fatalf("String %q does not round-trip: %v", c, err)
		}
		if i.Before(j) || j.Before(i) {
			t.Fatal("Before inconsistent with Equal")
		}
		// The standard library (which truncates fractions to nanoseconds
		// too) must accept it and agree on the instant.
		std, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !std.Equal(i.Time()) {
			t.Fatalf("time.Parse disagrees: %v %v", std, err)
		}
		if !i.ReachedBy(i.Time().Add(time.Nanosecond)) || i.ReachedBy(i.Time().Add(-time.Nanosecond)) {
			t.Fatal("ReachedBy wrong a nanosecond away")
		}
	})
}
