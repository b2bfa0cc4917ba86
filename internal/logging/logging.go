// Package logging builds agentgw's structured logger (log/slog, text or
// JSON) with a last line of defence for secrets: a Scrubber (the gateway's
// one redactor, backendkit.Redactor) replaces every secret value in
// messages and attribute values, even where a bug or a backend's stderr
// would have carried it.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

// Scrubber replaces secrets in text: backendkit.Redactor, the gateway's
// one redactor. A nil Scrubber scrubs nothing.
type Scrubber interface {
	Scrub(s string) string
}

// New returns a logger writing to w in format "text" or "json" at level
// ("debug", "info", "warn", "error"), scrubbing r's secrets.
func New(w io.Writer, format, level string, r Scrubber) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "", "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: use text or json", format)
	}
	return slog.New(NewHandler(h, r)), nil
}

// NewHandler wraps next so that r scrubs every message and attribute value
// (errors and other values by their text).
func NewHandler(next slog.Handler, r Scrubber) slog.Handler {
	if r == nil {
		r = noScrub{}
	}
	return &redacting{next: next, r: r}
}

type noScrub struct{}

func (noScrub) Scrub(s string) string { return s }

type redacting struct {
	next slog.Handler
	r    Scrubber
}

func (h *redacting) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *redacting) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Scrub(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.scrubAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redacting) scrubAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.Scrub(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, len(attrs))
		for i, ga := range attrs {
			out[i] = h.scrubAttr(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.Scrub(err.Error()))
		}
		return slog.String(a.Key, h.r.Scrub(fmt.Sprint(v.Any())))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h *redacting) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = h.scrubAttr(a)
	}
	return &redacting{next: h.next.WithAttrs(out), r: h.r}
}

func (h *redacting) WithGroup(name string) slog.Handler {
	return &redacting{next: h.next.WithGroup(name), r: h.r}
}
