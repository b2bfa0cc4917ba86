package httpauth

import (
	"crypto/sha256"
	"testing"
)

func TestBearerMatches(t *testing.T) {
	want := sha256.Sum256([]byte("s3cret"))
	for h, ok := range map[string]bool{
		"Bearer s3cret":  true,
		"bearer s3cret":  true,
		"Bearer s3cret ": true,
		"Bearer s3cre":   false,
		"Bearer":         false,
		"Basic s3cret":   false,
		"s3cret":         false,
		"":               false,
	} {
		if Matches(h, want) != ok {
			t.Errorf("%q: want %v", h, ok)
		}
	}
}
