package ijson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"testing"
)

// FuzzCanonicalize checks that canonicalization is idempotent, that the
// canonical bytes parse back to the same value, and that Parse agrees with
// encoding/json on what is syntactically JSON and on the decoded value.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":[1,2.5e3,-0,"x"],"a":{"\u20ac":null,"\ud83d\ude00":true}}`,
		`[1e21,1e-7,0.000001,333333333.33333329,5e-324]`,
		`"\u0000\u001f\"\\\/\b\f\n\r\t\u2028"`,
		`{"a":1,"a":2}`,
		`"\ud800"`,
		`1e400`,
		"\"\xff\"",
		`[[[[[]]]]]`,
	} {
		f.Add([]byte(s))
	}
	reparse := Limits{MaxBytes: 64 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		canon, v, err := Canonicalize(data, Limits{})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("non-*Error: %v", err)
			}
			if e.Kind == KindSyntax && json.Valid(data) {
				t.Fatalf("syntax error %v on input encoding/json accepts", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted input encoding/json rejects")
		}
		var std any
		if err := json.Unmarshal(data, &std); err != nil || !reflect.DeepEqual(v, std) {
			t.Fatalf("value differs from encoding/json: %#v vs %#v (%v)", v, std, err)
		}
		canon2, v2, err := Canonicalize(canon, reparse)
		if err != nil {
			t.Fatalf("canonical output does not parse: %v\n%q", err, canon)
		}
		if !bytes.Equal(canon, canon2) {
			t.Fatalf("not idempotent:\n%q\n%q", canon, canon2)
		}
		if !reflect.DeepEqual(v, v2) {
			t.Fatalf("value changed through canonical form: %#v vs %#v", v, v2)
		}
	})
}

// FuzzNumberSerialization compares appendNumber with the independent
// refES6 on doubles built from the fuzz bytes in three ways, so integers
// and short decimals are reached as well as random bit patterns.
func FuzzNumberSerialization(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 0, 0, 0, 0, 0, 0, 0},
		{1, 0, 0, 0, 0, 0, 0, 0},
		{0xf6, 0x4a, 0xe1, 0xc7, 0x02, 0x2d, 0xb5, 0x44},             // 1e23
		{0x50, 0xef, 0xe2, 0xd6, 0xe4, 0x1a, 0x4b, 0x44},             // 1e21
		{0x8d, 0xed, 0xb5, 0xa0, 0xf7, 0xc6, 0xb0, 0x3e},             // 0.000001
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xef, 0x7f},             // max double
		{0, 0, 0, 0, 0, 0, 0x40, 0x43, 1},                            // integer mode
		{1, 0, 0, 0, 0, 0, 0, 0, 2, 0xf9},                            // 1e-7
		{0x39, 0x30, 0, 0, 0, 0, 0, 0, 2, 0x10},                      // 12345e16
		{0x55, 0x55, 0x55, 0x55, 0x43, 0xde, 0xb3, 0x41, 0, 0, 0, 0}, // 333333333.3333333
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var raw [8]byte
		copy(raw[:], b)
		bits := binary.LittleEndian.Uint64(raw[:])
		x := math.Float64frombits(bits)
		if len(b) > 8 {
			switch b[8] % 3 {
			case 1: // an integer of 0 to 63 bits
				x = float64(int64(bits) >> (bits % 64))
			case 2: // a short decimal: mantissa × 10^exponent
				e := 0
				if len(b) > 9 {
					e = int(int8(b[9]))
				}
				var err error
				x, err = strconv.ParseFloat(strconv.FormatUint(bits%100000000, 10)+"e"+strconv.Itoa(e), 64)
				if err != nil {
					return
				}
			}
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			if _, err := Canonical(x); err == nil {
				t.Fatalf("no error for %v", x)
			}
			return
		}
		got := string(appendNumber(nil, x))
		if want := refES6(x); got != want {
			t.Fatalf("%#016x: appendNumber %s, reference %s", math.Float64bits(x), got, want)
		}
		if back, err := strconv.ParseFloat(got, 64); err != nil || back != x {
			t.Fatalf("%s does not read back as %v", got, x)
		}
	})
}
