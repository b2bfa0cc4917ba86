package displaytext

import (
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text\nsecond line\tcol", "plain text\nsecond line\tcol"},
		{"a\x1b[31mb", "a\uFFFD[31mb"},
		{"over\rwrite", "over\uFFFDwrite"},
		{"x\u202egnp.exe", "x\uFFFDgnp.exe"},
		{"\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", strings.Repeat("\uFFFD", 8)},
		{"line\u2028forged\u2029", "line\uFFFDforged\uFFFD"},
		{"nul\x00del\x7fc1\u0085", "nul\uFFFDdel\uFFFDc1\uFFFD"},
		{"bad\xffutf8", "bad\uFFFDutf8"},
		{"xml\uFFFEno\uFFFF", "xml\uFFFDno\uFFFD"},
		{"héllo 😀", "héllo 😀"},
	} {
		if got := Clean(c.in, 0); got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLine(t *testing.T) {
	if got := Line("  one\ntwo\r\tthree\x1b \n", 0); got != "one two  three\uFFFD" {
		t.Errorf("Line: %q", got)
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"héllo", 5, "héllo"},
		{"héllo", 4, "hél…"},
		{"héllo", 1, "…"},
		{"héllo", 0, "héllo"},
		{"", 3, ""},
	} {
		if got := Truncate(c.in, c.max); got != c.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

// Redaction runs on the raw text, before replacements and the cut: a
// secret split by a control character is not joined again, a secret at
// the cut is not half shown, and PEM blocks go as a whole.
func TestRedactionOrder(t *testing.T) {
	scrub := func(s string) string { return strings.ReplaceAll(s, "sk-secret", "[redacted]") }
	if got := Clean("sk-se\x00cret", 0, scrub); strings.Contains(got, "sk-secret") {
		t.Errorf("split secret joined: %q", got)
	}
	if got := Clean("token sk-secret", 10, scrub); strings.Contains(got, "sk-") {
		t.Errorf("secret at the cut: %q", got)
	}
	pem := "key: -----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- done\x1b"
	if got := Clean(pem, 0, scrub, ScrubPEM); got != "key: "+RedactedKey+" done\uFFFD" {
		t.Errorf("PEM: %q", got)
	}
	if got := string(ScrubPEMBytes([]byte(`{"m":"-----BEGIN PRIVATE KEY-----\nAB\n-----END PRIVATE KEY-----"}`))); got != `{"m":"`+RedactedKey+`"}` {
		t.Errorf("PEM in JSON: %s", got)
	}
}
