// Package ids generates and checks the protocol identifiers of
// urn:xmpp:agent-task:0: request, task, event and input-request IDs.
//
// Every generated identifier carries 128 bits from crypto/rand, encoded as
// unpadded base64url (22 characters), optionally behind a short prefix.
package ids

import (
	"crypto/rand"
	"encoding/base64"
)

// MinLen and MaxLen bound the identifier grammar [A-Za-z0-9._~-]{22,128}.
const (
	MinLen = 22
	MaxLen = 128
)

// New returns prefix followed by 128 random bits in base64url.
// The prefix must itself be in the identifier alphabet.
func New(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand never fails on supported platforms; a failure here
		// means no safe identifier can be made at all.
		panic("ids: crypto/rand failed: " + err.Error())
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Valid reports whether s matches the identifier grammar.
func Valid(s string) bool {
	if len(s) < MinLen || len(s) > MaxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !allowed(s[i]) {
			return false
		}
	}
	return true
}

// ValidVersion reports whether s matches the API version grammar
// [A-Za-z0-9._~-]{1,64}.
func ValidVersion(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !allowed(s[i]) {
			return false
		}
	}
	return true
}

func allowed(c byte) bool {
	switch {
	case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		return true
	case c == '.', c == '_', c == '~', c == '-':
		return true
	}
	return false
}
