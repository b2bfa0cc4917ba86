package backendkit

import "testing"

func TestRedactorAddSource(t *testing.T) {
	r := NewRedactor(nil)
	cur := "token-one-value"
	r.AddSource(func() []string { return []string{cur} })
	if got := r.Scrub("a token-one-value b"); got != "a "+Redacted+" b" {
		t.Fatalf("Scrub = %q", got)
	}
	cur = "token-two-value"
	if got := r.Scrub("token-one-value token-two-value"); got != "token-one-value "+Redacted {
		t.Fatalf("after rotation Scrub = %q: the source is asked at every use", got)
	}
}
