package backendkit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/agentgw/agentgw/internal/ijson"
)

// Redacted replaces every secret the redactor knows of, in logs, results
// and manifests alike.
const Redacted = "[redacted]"

// MinSecretLen is the shortest value treated as a secret: replacing "1" or
// "abc" everywhere would garble logs without protecting anything.
const MinSecretLen = 4

// Redactor replaces secrets in text and JSON. It is the gateway's one
// redactor: the logger's last line of defence and each bridge's scrubbing
// of what a backend returns use it alike. Values shorter than MinSecretLen
// are ignored; for an authorization value such as "Bearer abc…" the bare
// credential is a secret too. It is safe for concurrent use.
type Redactor struct {
	extra func() []string

	mu      sync.RWMutex
	kept    []string          // added with Add; kept for the redactor's life
	sources []func() []string // added with AddSource; asked at every use
	current []string          // installed with Set; replaced whole
	all     []string          // kept and current, longest first
}

// NewRedactor returns a redactor that also replaces the values extra
// returns (nil: none), asked at every use, so secrets read later (other
// backends' keys) are covered too.
func NewRedactor(extra func() []string) *Redactor { return &Redactor{extra: extra} }

// Add registers secrets for the redactor's life.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kept = appendSecrets(r.kept, secrets)
	r.rebuild()
}

// AddSource registers a function whose values are secrets at every use:
// for secrets that change while the gateway runs (OAuth access and
// refresh tokens), which Add would pile up.
func (r *Redactor) AddSource(f func() []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sources = append(r.sources, f)
}

// Set replaces the secrets installed by the previous Set, for secrets read
// afresh at every (re)connect: header files, environment values.
func (r *Redactor) Set(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = appendSecrets(nil, secrets)
	r.rebuild()
}

func appendSecrets(s, secrets []string) []string {
	add := func(v string) {
		if len(v) >= MinSecretLen && !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	for _, v := range secrets {
		add(v)
		// "Bearer <token>": a backend that echoes the bare token must not
		// get it past the redactor either.
		add(CredentialPart(v))
	}
	return s
}

// rebuild orders the secrets longest first, so a secret containing another
// is replaced first. Callers hold mu.
func (r *Redactor) rebuild() {
	all := append(append([]string(nil), r.kept...), r.current...)
	all = slices.Compact(slices.SortedFunc(slices.Values(all), func(a, b string) int {
		if d := len(b) - len(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	}))
	r.all = all
}

func (r *Redactor) secrets() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	s, sources := r.all, r.sources
	r.mu.RUnlock()
	if r.extra != nil {
		sources = append(sources[:len(sources):len(sources)], r.extra)
	}
	for _, f := range sources {
		for _, v := range f() {
			if len(v) >= MinSecretLen {
				s = append(s[:len(s):len(s)], v)
			}
		}
	}
	return s
}

// Scrub replaces every secret in s. A nil Redactor returns s.
func (r *Redactor) Scrub(s string) string {
	for _, sec := range r.secrets() {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return s
}

// ScrubJSON replaces secrets inside the strings (keys included) of a JSON
// document and reports whether it replaced any. A secret is first
// replaced in its JSON-escaped spelling, which keeps the document's own
// bytes; a document with \u or \/ escapes, which can spell a secret
// otherwise, is then decoded and, if a string still holds a secret,
// re-encoded (numbers keep their exact text, HTML characters are not
// escaped). The error reports such a document that is not JSON; out then
// has the escaped spellings replaced only.
func (r *Redactor) ScrubJSON(doc []byte) (out []byte, found bool, err error) {
	secrets := r.secrets()
	if len(secrets) == 0 {
		return doc, false, nil
	}
	out = doc
	for _, sec := range secrets {
		enc, err := ijson.MarshalNoEscape(sec)
		if err != nil || len(enc) < 2 {
			continue
		}
		needle := enc[1 : len(enc)-1]
		if bytes.Contains(out, needle) {
			out = bytes.ReplaceAll(out, needle, []byte(Redacted))
			found = true
		}
	}
	if !bytes.Contains(out, []byte(`\u`)) && !bytes.Contains(out, []byte(`\/`)) {
		return out, found, nil
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return out, found, err
	}
	changed := false
	v = walkStrings(v, func(s string) string {
		for _, sec := range secrets {
			if strings.Contains(s, sec) {
				s = strings.ReplaceAll(s, sec, Redacted)
				changed = true
			}
		}
		return s
	})
	if !changed {
		return out, found, nil
	}
	out, err = ijson.MarshalNoEscape(v)
	return out, true, err
}

// ContainsSecret reports whether secret (at least MinSecretLen long)
// occurs in the JSON document, in its raw bytes or inside any decoded
// string.
func ContainsSecret(doc []byte, secret string) bool {
	if len(secret) < MinSecretLen {
		return false
	}
	if bytes.Contains(doc, []byte(secret)) {
		return true
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return false
	}
	found := false
	walkStrings(v, func(s string) string {
		found = found || strings.Contains(s, secret)
		return s
	})
	return found
}

func walkStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		for i := range x {
			x[i] = walkStrings(x[i], f)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[f(k)] = walkStrings(e, f)
		}
		return out
	}
	return v
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
