package backendkit

import "testing"

func TestRedactorCoversTheBareCredential(t *testing.T) {
	for in, want := range map[string]string{
		"Bearer s3cr3t-token": "s3cr3t-token",
		"Basic  abc123==":     "abc123==",
		"plainsecretvalue":    "",
		"not a/scheme x":      "a/scheme x",
	} {
		if got := CredentialPart(in); got != want {
			t.Errorf("CredentialPart(%q) = %q, want %q", in, got, want)
		}
	}
	r := NewRedactor(nil)
	r.Set("Bearer s3cr3t-token")
	if got := r.Scrub("header was Bearer s3cr3t-token, token s3cr3t-token"); got != "header was [redacted], token [redacted]" {
		t.Fatalf("redacted text = %q", got)
	}
	out, found, _ := r.ScrubJSON([]byte(`{"seen":"s3cr3t-token"}`))
	if !found || string(out) != `{"seen":"[redacted]"}` {
		t.Fatalf("redacted json = %s (found %v)", out, found)
	}
}
