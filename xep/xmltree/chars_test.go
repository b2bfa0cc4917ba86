package xmltree

import (
	"encoding/json"
	"testing"
)

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain Straße 🌦":       "plain Straße 🌦",
		"a\x01b\x1fc\td\ne\rf": "a\uFFFDb\uFFFDc\td\ne\rf",
		"x\uFFFEy\uFFFF":       "x\uFFFDy\uFFFD",
		"bad\xffutf8":          "bad\uFFFDutf8",
	} {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
		if !ValidText(Sanitize(in)) {
			t.Errorf("Sanitize(%q) is not valid XML text", in)
		}
	}
	if ValidText("a\x01") || ValidText("\uFFFF") || !ValidText("\U0001FFFE") {
		t.Error("ValidText disagrees with XML 1.0 Char")
	}
}

// TestJSONText: characters XML cannot carry become JSON escapes, the
// output is legal XML text, and it parses to the same JSON value.
func TestJSONText(t *testing.T) {
	in := []byte("{\"t\":\"a\u0001b\uffffc\ufffed\U0001F600\",\"k\uffff\":1}")
	// ijson never emits raw U+0001, but a raw control is still escaped.
	in = append(in[:len(in)-1:len(in)-1], []byte(",\"c\":\"\x01\"}")...)
	out := JSONText(in)
	if !ValidText(out) {
		t.Fatalf("not XML text: %q", out)
	}
	want := `{"t":"a\u0001b\uffffc\ufffed` + "\U0001F600" + `","k\uffff":1,"c":"\u0001"}`
	if out != want {
		t.Fatalf("JSONText = %q\nwant       %q", out, want)
	}
	var a, b map[string]any
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	if a["t"] != "a\u0001b\uffffc\ufffed\U0001F600" || a["k\uffff"] != float64(1) {
		t.Fatalf("decoded %v", a)
	}
	clean := []byte(`{"a":"b\u001f"}`)
	if JSONText(clean) != string(clean) {
		t.Fatal("clean JSON text changed")
	}
}
