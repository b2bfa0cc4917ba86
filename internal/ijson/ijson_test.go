package ijson

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// The spec vectors from DESIGN.md "Canonical JSON".
func TestDesignVectors(t *testing.T) {
	for _, tc := range []struct{ in, hash string }{
		{`{"agent":{"jid":"weather@agents.example","name":"weather","version":"1.4.0"},"manifestSpecVersion":"0","tools":[]}`,
			"K2/YdwvIBAlfUIeZHiNCyiYA4m4W2wrEOqXQDoQyXp4="},
		{`{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`,
			"XxGP62PwgOW9NLxx8ysunvuijMhSd0y4j1SSRTAbt7c="},
	} {
		canon, _, err := Canonicalize([]byte(tc.in), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if string(canon) != tc.in {
			t.Errorf("canonical form changed an already canonical input:\n got %s\nwant %s", canon, tc.in)
		}
		if got := Hash(canon); got != tc.hash {
			t.Errorf("Hash = %s, want %s", got, tc.hash)
		}
		// The same document, reordered and pretty-printed, hashes the same.
		v, _ := Parse([]byte(tc.in), Limits{})
		pretty := prettyReversed(t, v)
		canon2, _, err := Canonicalize([]byte(pretty), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if Hash(canon2) != tc.hash {
			t.Errorf("reordered %s hashes to %s", pretty, Hash(canon2))
		}
	}
}

// prettyReversed writes v with whitespace and members in reverse UTF-8 order,
// with every string fully \u-escaped, so it is as non-canonical as possible.
func prettyReversed(t *testing.T, v any) string {
	var b strings.Builder
	var w func(v any)
	w = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			for i := range keys {
				for j := i + 1; j < len(keys); j++ {
					if keys[j] > keys[i] {
						keys[i], keys[j] = keys[j], keys[i]
					}
				}
			}
			b.WriteString("{\n")
			for i, k := range keys {
				if i > 0 {
					b.WriteString(" ,\n")
				}
				w(k)
				b.WriteString(" : ")
				w(x[k])
			}
			b.WriteString("\n}")
		case []any:
			b.WriteString("[ ")
			for i, e := range x {
				if i > 0 {
					b.WriteString(" , ")
				}
				w(e)
			}
			b.WriteString(" ]")
		case string:
			b.WriteByte('"')
			for _, u := range utf16Units(x) {
				b.WriteString(`\u`)
				b.WriteString(hex.EncodeToString([]byte{byte(u >> 8), byte(u)}))
			}
			b.WriteByte('"')
		default:
			c, err := Canonical(x)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(c)
		}
	}
	w(v)
	return b.String()
}

func utf16Units(s string) []uint16 {
	var u []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			u = append(u, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
		} else {
			u = append(u, uint16(r))
		}
	}
	return u
}

// RFC 8785 section 3.2.2 example (also cyberphone testdata values.json).
func TestRFC8785Values(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	canon, _, err := Canonicalize([]byte(in), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if string(canon) != want {
		t.Errorf("got  %s\nwant %s", canon, want)
	}
}

// RFC 8785 section 3.2.3 sorting example, plus cyberphone weird.json.
func TestRFC8785Sorting(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis",
  "שלום": "Shalom"
}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\"," +
		"\"שלום\":\"Shalom\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	canon, _, err := Canonicalize([]byte(in), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if string(canon) != want {
		t.Errorf("got  %s\nwant %s", canon, want)
	}

	weird := `{"\u20ac":"Euro Sign","1":"One","\u0080":"Control\u007f","\ud83d\ude02":"Smiley","\u00f6":"Latin Small Letter O With Diaeresis","\ufb33":"Hebrew Letter Dalet With Dagesh","</script>":"Browser Challenge"}`
	wantWeird := "{\"1\":\"One\",\"</script>\":\"Browser Challenge\",\"\u0080\":\"Control\u007f\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😂\":\"Smiley\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	canon, _, err = Canonicalize([]byte(weird), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if string(canon) != wantWeird {
		t.Errorf("got  %s\nwant %s", canon, wantWeird)
	}
}

func TestCompareUTF16(t *testing.T) {
	// Ordered by UTF-16 code units; note U+FFFF sorts after U+10000.
	ordered := []string{"", "\x00", "A", "AB", "B", "\u00e9", "\ud7ff", "\U00010000", "\U0010ffff", "\ue000", "\uffff", "\uffffA"}
	for i := range ordered {
		for j := range ordered {
			got := compareUTF16(ordered[i], ordered[j])
			if (i < j && got >= 0) || (i > j && got <= 0) || (i == j && got != 0) {
				t.Errorf("compareUTF16(%q, %q) = %d", ordered[i], ordered[j], got)
			}
		}
	}
}

// RFC 8785 Appendix B.
func TestRFC8785Numbers(t *testing.T) {
	for _, tc := range []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	} {
		raw, err := hex.DecodeString(tc.bits)
		if err != nil {
			t.Fatal(err)
		}
		f := math.Float64frombits(binary.BigEndian.Uint64(raw))
		got, err := Canonical(f)
		if err != nil {
			t.Fatalf("%s: %v", tc.bits, err)
		}
		if string(got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.bits, got, tc.want)
		}
		if ref := refES6(f); ref != tc.want {
			t.Errorf("%s: reference formatter got %s, want %s", tc.bits, ref, tc.want)
		}
	}
	// Appendix B's NaN and Infinity rows are errors.
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000, 0xfff0000000000000} {
		if _, err := Canonical(math.Float64frombits(bits)); err == nil {
			t.Errorf("%x: no error", bits)
		}
	}
}

func TestNumberText(t *testing.T) {
	for in, want := range map[string]string{
		"1e21": "1e+21", "1e20": "100000000000000000000", "1e-7": "1e-7", "0.000001": "0.000001",
		"0.0000001": "1e-7", "-0": "0", "-0.0e5": "0", "9007199254740992": "9007199254740992",
		"9007199254740993": "9007199254740992", "123.456e3": "123456", "1.5": "1.5", "-1.5E-10": "-1.5e-10",
		"1e-400": "0", "0.1": "0.1", "100": "100", "12345678901234567890": "12345678901234567000",
	} {
		got, _, err := Canonicalize([]byte(in), Limits{})
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if string(got) != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}

func TestCanonicalGoValues(t *testing.T) {
	got, err := Canonical(map[string]any{"b": int64(1) << 53, "a": []any{int(-3), 2.5, "x\u2028", nil}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\"a\":[-3,2.5,\"x\u2028\",null],\"b\":9007199254740992}"; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for _, bad := range []any{
		int64(1)<<53 + 1, int64(math.MaxInt64), math.NaN(), math.Inf(-1), "\xff", map[string]any{"\xc0": 1},
		float32(1), []string{"a"}, struct{}{},
	} {
		if _, err := Canonical(bad); err == nil {
			t.Errorf("Canonical(%#v): no error", bad)
		}
	}
	// A cycle must fail, not hang or overflow the stack.
	cyc := []any{nil}
	cyc[0] = cyc
	if _, err := Canonical(cyc); !IsLimit(err) {
		t.Errorf("cyclic value: %v", err)
	}
}

func TestCanonicalEscapes(t *testing.T) {
	var all []byte
	for c := 0; c < 0x80; c++ {
		all = append(all, byte(c))
	}
	got, err := Canonical(string(all))
	if err != nil {
		t.Fatal(err)
	}
	want := `"\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f` +
		`\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f` +
		` !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_` + "`abcdefghijklmnopqrstuvwxyz{|}~\x7f\""
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestParseValues(t *testing.T) {
	v, err := Parse([]byte(" {\"a\" : [1, -2.5e1, true, false, null, \"\\ud83d\\ude00\\n\", {}, []]}\r\n"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": []any{1.0, -25.0, true, false, nil, "😀\n", map[string]any{}, []any{}}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("got %#v", v)
	}
	for in, want := range map[string]any{`"x"`: "x", `0`: 0.0, `null`: nil, `"\u0000"`: "\x00", `"é"`: "é"} {
		v, err := Parse([]byte(in), Limits{})
		if err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("Parse(%s) = %#v, %v", in, v, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	var members strings.Builder
	members.WriteString("{")
	for i := range 100000 {
		if i > 0 {
			members.WriteString(",")
		}
		members.WriteString(`"k` + itoa(i) + `":0`)
	}
	members.WriteString("}")
	big := `["` + strings.Repeat("a", 10<<20) + `"]`

	for _, tc := range []struct {
		name string
		in   string
		lim  Limits
		kind ErrorKind
	}{
		{"empty", "", Limits{}, KindSyntax},
		{"whitespace only", " \n", Limits{}, KindSyntax},
		{"two values", "1 2", Limits{}, KindSyntax},
		{"trailing comma array", "[1,]", Limits{}, KindSyntax},
		{"trailing comma object", `{"a":1,}`, Limits{}, KindSyntax},
		{"leading zero", "01", Limits{}, KindSyntax},
		{"leading zero neg", "-01", Limits{}, KindSyntax},
		{"plus sign", "+1", Limits{}, KindSyntax},
		{"bare dot", ".5", Limits{}, KindSyntax},
		{"dot no digits", "1.", Limits{}, KindSyntax},
		{"exp no digits", "1e", Limits{}, KindSyntax},
		{"exp sign no digits", "1e+", Limits{}, KindSyntax},
		{"hex", "0x10", Limits{}, KindSyntax},
		{"NaN", "NaN", Limits{}, KindSyntax},
		{"Infinity", "-Infinity", Limits{}, KindSyntax},
		{"single quotes", "'a'", Limits{}, KindSyntax},
		{"unquoted key", "{a:1}", Limits{}, KindSyntax},
		{"missing colon", `{"a" 1}`, Limits{}, KindSyntax},
		{"raw control char", "\"a\x01\"", Limits{}, KindSyntax},
		{"raw newline", "\"a\n\"", Limits{}, KindSyntax},
		{"bad escape", `"\x41"`, Limits{}, KindSyntax},
		{"short unicode escape", `"\u12"`, Limits{}, KindSyntax},
		{"unterminated", `"abc`, Limits{}, KindSyntax},
		{"unterminated array", `[1`, Limits{}, KindSyntax},
		{"mismatched", `[1}`, Limits{}, KindSyntax},
		{"BOM", "\xef\xbb\xbf{}", Limits{}, KindSyntax},
		{"truncated literal", "tru", Limits{}, KindSyntax},
		{"comment", "[1 /* c */]", Limits{}, KindSyntax},
		{"dup keys", `{"a":1,"a":2}`, Limits{}, KindDuplicateKey},
		{"dup keys after unescape", `{"a":1,"\u0061":2}`, Limits{}, KindDuplicateKey},
		{"dup keys nested", `{"x":{"b":[],"c":0,"b":{}}}`, Limits{}, KindDuplicateKey},
		{"lone high", `"\ud800"`, Limits{}, KindLoneSurrogate},
		{"lone high then text", `"\ud800abcdef"`, Limits{}, KindLoneSurrogate},
		{"high then high", `"\ud800\ud800"`, Limits{}, KindLoneSurrogate},
		{"lone low", `"\udc00"`, Limits{}, KindLoneSurrogate},
		{"reversed pair", `"\ude00\ud83d"`, Limits{}, KindLoneSurrogate},
		{"lone surrogate key", `{"\udfff":1}`, Limits{}, KindLoneSurrogate},
		{"raw surrogate bytes", "\"\xed\xa0\x80\"", Limits{}, KindLoneSurrogate},
		{"invalid utf8", "\"\xff\"", Limits{}, KindInvalidUTF8},
		{"overlong", "\"\xc0\xaf\"", Limits{}, KindInvalidUTF8},
		{"truncated utf8", "\"\xe2\x82\"", Limits{}, KindInvalidUTF8},
		{"beyond U+10FFFF", "\"\xf4\x90\x80\x80\"", Limits{}, KindInvalidUTF8},
		{"invalid utf8 outside string", "[1,\xff]", Limits{}, KindSyntax},
		{"1e400", "1e400", Limits{}, KindNumberRange},
		{"-1e400", "[-1e400]", Limits{}, KindNumberRange},
		{"huge integer", "1" + strings.Repeat("0", 400), Limits{}, KindNumberRange},
		{"10 MB", big, Limits{}, KindLimit},
		{"10000 deep", deep, Limits{}, KindLimit},
		{"10000 deep objects", strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), Limits{}, KindLimit},
		{"100k members", members.String(), Limits{MaxBytes: 10 << 20}, KindLimit},
		{"100k elements", "[" + strings.Repeat("0,", 99999) + "0]", Limits{}, KindLimit},
		{"long string", `"` + strings.Repeat("é", 100) + `"`, Limits{MaxStringBytes: 199}, KindLimit},
		{"long key", `{"` + strings.Repeat("k", 100) + `":1}`, Limits{MaxStringBytes: 99}, KindLimit},
		{"escapes count unescaped", `"` + strings.Repeat(`\u00e9`, 50) + `"`, Limits{MaxStringBytes: 99}, KindLimit},
		{"values", "[[1,2],[3,4]]", Limits{MaxValues: 6}, KindLimit},
		{"depth", "[[[]]]", Limits{MaxDepth: 2}, KindLimit},
		{"members", "[1,2,3]", Limits{MaxMembers: 2}, KindLimit},
		{"bytes", "[1,2,3]", Limits{MaxBytes: 6}, KindLimit},
	} {
		v, err := Parse([]byte(tc.in), tc.lim)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: got %v, %v; want *Error", tc.name, v, err)
			continue
		}
		if e.Kind != tc.kind {
			t.Errorf("%s: kind %v (%v), want %v", tc.name, e.Kind, err, tc.kind)
		}
		if IsLimit(err) != (tc.kind == KindLimit) {
			t.Errorf("%s: IsLimit = %v", tc.name, IsLimit(err))
		}
		if e.Offset < 0 || e.Offset > len(tc.in) {
			t.Errorf("%s: offset %d outside input", tc.name, e.Offset)
		}
	}
}

func TestLimitsAtBoundary(t *testing.T) {
	ok := []struct {
		in  string
		lim Limits
	}{
		{"[[]]", Limits{MaxDepth: 2}},
		{"[1,2]", Limits{MaxMembers: 2}},
		{"[[1,2],[3]]", Limits{MaxValues: 6}},
		{`"éé"`, Limits{MaxStringBytes: 4}},
		{`"\u00e9\u00e9"`, Limits{MaxStringBytes: 4}},
		{"[1,2]", Limits{MaxBytes: 5}},
		{strings.Repeat("[", 64) + strings.Repeat("]", 64), Limits{}},
	}
	for _, tc := range ok {
		if _, err := Parse([]byte(tc.in), tc.lim); err != nil {
			t.Errorf("%s under %+v: %v", tc.in, tc.lim, err)
		}
	}
}

// Errors never reflect document content.
func TestErrorsDoNotReflectInput(t *testing.T) {
	const mark = "SECRETmark"
	for _, in := range []string{
		`{"` + mark + `":1,"` + mark + `":2}`,
		`"` + mark + `\ud800"`,
		`[` + mark + `]`,
		`"` + mark + "\xff\"",
		`{"` + mark + `":1e999}`,
		`{"` + mark + `" 1}`,
		`["` + mark + `"` + strings.Repeat(",0", 20) + `]`,
	} {
		_, err := Parse([]byte(in), Limits{MaxMembers: 10})
		if err == nil {
			t.Fatalf("%q: no error", in)
		}
		if strings.Contains(strings.ToLower(err.Error()), strings.ToLower(mark)) {
			t.Errorf("error reflects input: %v", err)
		}
	}
}

func TestErrorString(t *testing.T) {
	_, err := Parse([]byte(`{"a":1,"a":2}`), Limits{})
	if got, want := err.Error(), "ijson: duplicate-key at offset 7: duplicate member name"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if IsLimit(errors.New("x")) || IsLimit(nil) {
		t.Error("IsLimit true for non-limit error")
	}
	if ErrorKind(99).String() != "ErrorKind(99)" {
		t.Error(ErrorKind(99).String())
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
