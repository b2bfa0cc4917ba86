package connectorbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// redacted replaces every secret occurrence.
const redacted = "[redacted]"

// minSecretLen avoids turning every "a" into [redacted] when a test or a
// careless operator configures a one-letter key.
const minSecretLen = 3

// redactor knows the secrets of one connector: the system API key and, in
// an auth command, the values of sensitive form fields.
type redactor struct {
	mu      sync.RWMutex
	secrets []string
}

func (r *redactor) add(s string) {
	if len(s) < minSecretLen {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.secrets {
		if x == s {
			return
		}
	}
	r.secrets = append(r.secrets, s)
}

func (r *redactor) list() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.secrets...)
}

// scrub replaces every secret in s.
func (r *redactor) scrub(s string) string {
	for _, x := range r.list() {
		if strings.Contains(s, x) {
			s = strings.ReplaceAll(s, x, redacted)
		}
	}
	return s
}

// scrubJSON walks a JSON document and replaces secrets inside every string
// (keys included), so escaped spellings such as \u0041 are caught too. It
// reports whether anything was replaced. Numbers keep their exact text.
func (r *redactor) scrubJSON(raw json.RawMessage) (json.RawMessage, bool, error) {
	secrets := r.list()
	if len(secrets) == 0 {
		return raw, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, err
	}
	changed := false
	v = walkStrings(v, func(s string) string {
		for _, x := range secrets {
			if strings.Contains(s, x) {
				s = strings.ReplaceAll(s, x, redacted)
				changed = true
			}
		}
		return s
	})
	if !changed {
		return raw, false, nil
	}
	out, err := marshalNoEscape(v)
	return out, true, err
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

// containsSecret reports whether secret occurs in the JSON document, in raw
// bytes or inside any decoded string.
func containsSecret(raw []byte, secret string) bool {
	if len(secret) < minSecretLen {
		return false
	}
	if bytes.Contains(raw, []byte(secret)) {
		return true
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
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

// marshalNoEscape is json.Marshal without HTML escaping, so results keep
// "<" and "&" as the connector sent them.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// displayText makes connector-supplied prose safe for a terminal: secrets
// scrubbed, control characters dropped, at most max runes.
func (r *redactor) displayText(s string, max int) string {
	s = r.scrub(s)
	var b strings.Builder
	n := 0
	for _, c := range s {
		if n >= max {
			b.WriteString("…")
			break
		}
		if c == utf8.RuneError || (unicode.IsControl(c) && c != '\n') || c == '\u202e' || c == '\u202d' {
			continue
		}
		b.WriteRune(c)
		n++
	}
	return b.String()
}

// truncateRunes cuts s to at most max runes.
func truncateRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max])
}

// redactingHandler scrubs secrets from every log record, as a last line of
// defence behind the rule that secrets are never passed to the logger.
type redactingHandler struct {
	next slog.Handler
	r    *redactor
}

func (h redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.scrub(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.scrubAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h redactingHandler) scrubAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.scrub(v.String()))
	case slog.KindGroup:
		g := v.Group()
		as := make([]any, len(g))
		for i, x := range g {
			as[i] = h.scrubAttr(x)
		}
		return slog.Group(a.Key, as...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.scrub(err.Error()))
		}
		return slog.String(a.Key, h.r.scrub(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.scrubAttr(a)
	}
	return redactingHandler{next: h.next.WithAttrs(out), r: h.r}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{next: h.next.WithGroup(name), r: h.r}
}
