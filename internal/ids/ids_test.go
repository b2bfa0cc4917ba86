package ids

import "testing"

func TestNewIsValidAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := New("task-")
		if !Valid(id) {
			t.Fatalf("generated id %q is invalid", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestValid(t *testing.T) {
	for s, want := range map[string]bool{
		"req-91a6d2f49c514f44a2d223f0f97bd9fe": true,
		"short":                                false,
		"has space in it and is long enough":   false,
		"abcdefghijklmnopqrstuv":               true,
		"abcdefghijklmnopqrstu/":               false,
	} {
		if got := Valid(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
	if ValidVersion("") || !ValidVersion("1.4.0") || ValidVersion("1 4") {
		t.Error("ValidVersion grammar wrong")
	}
}
