package tasks

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

// lifecycleSchemaJSON is the normative task event payload JSON Schema,
// copied verbatim from the specification ("Lifecycle JSON Schemas").
//
//go:embed lifecycle.schema.json
var lifecycleSchemaJSON []byte

// LifecycleSchema returns the embedded normative lifecycle JSON Schema.
func LifecycleSchema() []byte { return append([]byte(nil), lifecycleSchemaJSON...) }

// Lifecycle validates event payloads against the normative schema, one
// compiled entry point per event type.
type Lifecycle struct {
	byType map[agentproto.EventType]*schema.Schema
}

// NewLifecycle compiles the embedded schema.
func NewLifecycle() (*Lifecycle, error) {
	doc, err := ijson.Parse(lifecycleSchemaJSON, schema.Limits)
	if err != nil {
		return nil, fmt.Errorf("tasks: lifecycle schema: %w", err)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("tasks: lifecycle schema is not an object")
	}
	l := &Lifecycle{byType: map[agentproto.EventType]*schema.Schema{}}
	for _, typ := range agentproto.EventTypes {
		// The spec selects $defs.<type> by the event's type attribute; an
		// added root $ref does exactly that while keeping the document whole.
		entry := make(map[string]any, len(root)+1)
		for k, v := range root {
			entry[k] = v
		}
		entry["$ref"] = "#/$defs/" + string(typ)
		s, err := schema.CompileTrustedDocument(entry)
		if err != nil {
			return nil, fmt.Errorf("tasks: lifecycle schema %s: %w", typ, err)
		}
		l.byType[typ] = s
	}
	return l, nil
}

// Validate checks a parsed payload against the definition for typ.
func (l *Lifecycle) Validate(typ agentproto.EventType, v any) error {
	s, ok := l.byType[typ]
	if !ok {
		return errors.New("tasks: unknown event type")
	}
	return s.Validate(v)
}

// ValidateJSON parses payload (I-JSON) and validates it for typ.
func (l *Lifecycle) ValidateJSON(typ agentproto.EventType, payload []byte) error {
	v, err := ijson.Parse(payload, ijson.Limits{MaxBytes: 64 << 20, MaxStringBytes: 64 << 20})
	if err != nil {
		return err
	}
	if err := l.Validate(typ, v); err != nil {
		return err
	}
	return checkDateTimes(typ, v)
}

// checkDateTimes enforces "every date-time string MUST also conform to
// XEP-0082", which the annotation-only format keyword does not.
func checkDateTimes(typ agentproto.EventType, v any) error {
	obj, _ := v.(map[string]any)
	var names []string
	switch typ {
	case agentproto.EventStatus:
		names = []string{"updatedAt"}
	case agentproto.EventInputRequired:
		names = []string{"createdAt", "expiresAt"}
	}
	for _, n := range names {
		if s, ok := obj[n].(string); ok {
			if _, err := xmpptime.Parse(s); err != nil {
				return errors.New("tasks: payload date-time is not XEP-0082")
			}
		}
	}
	return nil
}

// build canonicalizes and validates a payload value built by the engine.
func (l *Lifecycle) build(typ agentproto.EventType, v map[string]any) ([]byte, error) {
	if err := l.Validate(typ, v); err != nil {
		return nil, fmt.Errorf("tasks: %s payload: %w", typ, err)
	}
	if err := checkDateTimes(typ, v); err != nil {
		return nil, err
	}
	return ijson.Canonical(v)
}

// Payload field limits of the lifecycle schema, in Unicode code points.
const (
	maxStage    = 256
	maxText     = 4096
	maxCodeSize = 128
)

var codePattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// truncate shortens s to at most n code points, replacing invalid UTF-8 so
// the result is always a valid JSON string.
func truncate(s string, n int) string {
	if !utf8.ValidString(s) {
		s = toValidUTF8(s)
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, c := 0, 0
	for i < len(s) && c < n {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
		c++
	}
	return s[:i]
}

func toValidUTF8(s string) string {
	b := make([]rune, 0, len(s))
	for _, r := range s {
		b = append(b, r) // invalid bytes decode as U+FFFD
	}
	return string(b)
}

func statusPayload(l *Lifecycle, state agentproto.State, now time.Time) ([]byte, error) {
	return l.build(agentproto.EventStatus, map[string]any{"state": string(state), "updatedAt": xmpptime.Format(now)})
}

// progressValue normalizes p against the last committed percent. Percent is
// clamped to [0, 100] and to never fall below the last value (the spec says
// SHOULD be nondecreasing; clamping keeps a misbehaving backend from
// producing an invalid or regressing event); a NaN or infinite percent is
// dropped. It returns nil when nothing is left to report.
func progressValue(p Progress, last float64, hasLast bool) (map[string]any, float64, bool) {
	v := map[string]any{}
	pct, has := last, hasLast
	if p.Percent != nil && !math.IsNaN(*p.Percent) && !math.IsInf(*p.Percent, 0) {
		x := math.Min(math.Max(*p.Percent, 0), 100)
		if hasLast && x < last {
			x = last
		}
		v["percent"] = x
		pct, has = x, true
	}
	if p.Stage != "" {
		v["stage"] = truncate(p.Stage, maxStage)
	}
	if p.Message != "" {
		v["message"] = truncate(p.Message, maxText)
	}
	if len(v) == 0 {
		return nil, last, hasLast
	}
	return v, pct, has
}

func failedValue(f Failure) map[string]any {
	code := f.Code
	if !codePattern.MatchString(code) {
		code = agentproto.CodeInternalError
	}
	msg := truncate(f.Message, maxText)
	if msg == "" {
		msg = "The task failed."
	}
	return map[string]any{"error": map[string]any{"code": code, "message": msg, "retryable": f.Retryable}}
}

func cancelledValue(reason string) map[string]any {
	if reason == "" {
		return map[string]any{}
	}
	return map[string]any{"reason": truncate(reason, maxText)}
}
