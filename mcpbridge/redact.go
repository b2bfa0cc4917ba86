package mcpbridge

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// redacted replaces every secret the bridge knows of.
const redacted = "[redacted]"

// Minimum lengths below which a value is not treated as a secret: replacing
// "1" or "true" everywhere would garble logs without protecting anything.
const (
	minHeaderSecret = 4
	minEnvSecret    = 8
)

// redactor replaces secrets in text and JSON. The set is replaced whole on
// every (re)connect, because header files and environment variables are
// re-read then.
type redactor struct {
	mu      sync.RWMutex
	secrets []string // longest first, so a secret containing another goes first
	extra   func() []string
}

func (r *redactor) set(secrets []string) {
	var s []string
	add := func(v string) {
		if v != "" && !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	for _, v := range secrets {
		add(v)
		// "Bearer <token>": a tool that echoes the bare token must not
		// get it past the redactor either.
		if cred := CredentialPart(v); len(cred) >= minHeaderSecret {
			add(cred)
		}
	}
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	r.mu.Lock()
	r.secrets = s
	r.mu.Unlock()
}

func (r *redactor) all() []string {
	r.mu.RLock()
	s := r.secrets
	r.mu.RUnlock()
	if r.extra != nil {
		for _, v := range r.extra() {
			if len(v) >= minHeaderSecret {
				s = append(s[:len(s):len(s)], v)
			}
		}
	}
	return s
}

// text redacts secrets in s.
func (r *redactor) text(s string) string {
	for _, sec := range r.all() {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	return s
}

// json redacts secrets inside the string literals of a JSON document. A
// secret is searched for in its JSON-escaped form, so the replacement keeps
// the document valid. found reports whether anything was replaced.
func (r *redactor) json(doc []byte) (out []byte, found bool) {
	out = doc
	for _, sec := range r.all() {
		enc, err := json.Marshal(sec)
		if err != nil || len(enc) < 2 {
			continue
		}
		needle := enc[1 : len(enc)-1]
		if bytes.Contains(out, needle) {
			out = bytes.ReplaceAll(out, needle, []byte(redacted))
			found = true
		}
	}
	return out, found
}

// safeText makes server-supplied text fit for a log line or a protocol
// string field: secrets redacted, control characters replaced, invalid UTF-8
// dropped, and at most max code points.
func (r *redactor) safeText(s string, max int) string {
	return bound(cleanControl(r.text(s)), max)
}

// cleanControl replaces control characters (other than tab and newline) and
// drops invalid UTF-8, so a log line cannot be forged or broken.
func cleanControl(s string) string {
	if !strings.ContainsFunc(s, func(c rune) bool { return c == utf8.RuneError || (unicode.IsControl(c) && c != '\t' && c != '\n') }) {
		return s
	}
	var b strings.Builder
	for _, c := range strings.ToValidUTF8(s, "") {
		if unicode.IsControl(c) && c != '\t' && c != '\n' {
			b.WriteRune('\uFFFD')
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// bound truncates s to at most max code points.
func bound(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i]
		}
		n++
	}
	return s
}

// CredentialPart returns the credential of an HTTP authorization value
// such as "Bearer abc" ("abc"), or "" when v has no auth-scheme prefix.
func CredentialPart(v string) string {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || scheme == "" {
		return ""
	}
	for _, c := range scheme {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) && c != '-' && c != '_' {
			return ""
		}
	}
	return strings.TrimSpace(cred)
}
