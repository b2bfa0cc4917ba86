package schema

import (
	"errors"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// MaxFailures bounds the failures one ValidationError reports.
const MaxFailures = 5

// Failure is one reason an instance did not match: where in the instance,
// and which schema keyword failed.
type Failure struct {
	Pointer string // JSON pointer into the instance, sanitized and bounded
	Keyword string // e.g. "required", "type", "additionalProperties"
}

// ValidationError reports that an instance does not match a schema. Its
// message names instance locations and keywords only, never values.
type ValidationError struct {
	Failures []Failure // at most MaxFailures
	// TimedOut reports that a regular expression match exceeded
	// MatchTimeout: the instance was not fully checked. The error then
	// wraps ErrTimeout.
	TimedOut bool
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	if e.TimedOut {
		b.WriteString("validation time limit exceeded: a regular expression match took longer than ")
		b.WriteString(MatchTimeout.String())
		return b.String()
	}
	b.WriteString("value does not match the schema")
	for i, f := range e.Failures {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		p := f.Pointer
		if p == "" {
			p = "/"
		}
		b.WriteString("at ")
		b.WriteString(p)
		b.WriteString(" keyword ")
		b.WriteString(f.Keyword)
	}
	return b.String()
}

// Unwrap returns ErrTimeout for a timed-out validation.
func (e *ValidationError) Unwrap() error {
	if e.TimedOut {
		return ErrTimeout
	}
	return nil
}

// Validate checks v, a value produced by ijson.Parse, against s. It returns
// nil or a *ValidationError; one that wraps ErrTimeout when a regular
// expression match ran out of time.
func (s *Schema) Validate(v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == errMatchTimeout {
				err = &ValidationError{Failures: []Failure{{Keyword: "pattern"}}, TimedOut: true}
				return
			}
			err = &ValidationError{Failures: []Failure{{Keyword: "schema"}}}
		}
	}()
	verr := s.s.Validate(v)
	if verr == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return &ValidationError{Failures: []Failure{{Keyword: "schema"}}}
	}
	out := &ValidationError{}
	collectLeaves(ve, out)
	if len(out.Failures) == 0 {
		out.Failures = []Failure{{Keyword: "schema"}}
	}
	return out
}

func collectLeaves(ve *jsonschema.ValidationError, out *ValidationError) {
	if len(out.Failures) >= MaxFailures {
		return
	}
	if len(ve.Causes) == 0 {
		if _, ok := ve.ErrorKind.(*kind.Schema); ok {
			return
		}
		out.Failures = append(out.Failures, Failure{
			Pointer: instancePointer(ve.InstanceLocation),
			Keyword: keyword(ve),
		})
		return
	}
	for _, c := range ve.Causes {
		collectLeaves(c, out)
	}
}
