// Package schema compiles and evaluates tool JSON Schemas (2020-12) under the
// protocol's rules.
//
// The rules of spec section "Retrieving Tool Schemas", as this package
// applies them:
//
//   - Dialect: JSON Schema 2020-12 only. An absent $schema selects it; any
//     other $schema value, at the root or in an embedded resource, is
//     rejected.
//   - References: same-document $ref, $anchor, $dynamicRef and
//     $dynamicAnchor work. Every other URL is refused without any network
//     or file access ("remote $ref is not allowed"); the only resources
//     outside the document are the 2020-12 meta-schemas compiled into the
//     library, and references to other dialects' meta-schemas are rejected.
//   - $vocabulary: a vocabulary declared true must be one of the seven
//     2020-12 vocabularies the spec requires (core, applicator, unevaluated,
//     validation, meta-data, format-annotation, content). format-assertion
//     and every other vocabulary declared true are rejected.
//   - format and content*: annotations only, never asserted.
//   - Unknown keywords are annotations: kept in the canonical bytes and
//     ignored. The exception is a fixed list of assertion keywords from other
//     dialects that 2020-12 evaluation would silently skip, so that ignoring
//     them would loosen validation: dependencies, additionalItems,
//     $recursiveRef, $recursiveAnchor, divisibleBy, disallow, extends. They
//     are rejected.
//   - Regular expressions are ECMA-262, as JSON Schema says: they run on
//     github.com/dlclark/regexp2 in ECMAScript mode with the Unicode ("u")
//     flag, so lookaround and backreferences work. That engine backtracks,
//     so every match runs under MatchTimeout; a match that exceeds it fails
//     the whole validation with a ValidationError that wraps ErrTimeout
//     (keyword "pattern"). A pattern longer than MaxPatternBytes is
//     rejected, as is one the engine cannot compile.
//   - Size: a schema document is parsed under Limits; count keywords
//     (minLength, maxItems, ...) above 2^53 are rejected.
//
// Errors never quote schema or instance values: they name a JSON pointer and
// a keyword.
package schema

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/agentgw/agentgw/internal/ijson"
)

// Dialect is the only recognized $schema value (a trailing empty fragment
// "#" is accepted too).
const Dialect = "https://json-schema.org/draft/2020-12/schema"

// MaxPatternBytes bounds one regular expression (pattern and
// patternProperties names).
const MaxPatternBytes = 4096

// MatchTimeout bounds one regular expression match. The engine backtracks,
// so a catastrophic pattern (such as ^(a+)+$ on "aaaa…!") would otherwise
// run for an exponential time; regexp2 checks its clock about every 100 ms,
// so a timed-out match returns within roughly MatchTimeout plus that.
const MatchTimeout = 100 * time.Millisecond

// Limits bound a schema document given to Compile.
var Limits = ijson.Limits{
	MaxBytes:       1 << 20,
	MaxDepth:       64,
	MaxMembers:     10000,
	MaxStringBytes: 64 << 10,
	MaxValues:      200000,
}

// ErrTimeout marks a validation that exceeded the validation-time limit
// (a regular expression match longer than MatchTimeout); test with
// errors.Is. It is the spec's validation-time limit: resource-constraint
// on the wire.
var ErrTimeout = errors.New("schema: validation time limit exceeded")

// ErrTooLarge marks a schema rejected for a size or complexity limit; test
// with errors.Is.
var ErrTooLarge = errors.New("schema: size or complexity limit exceeded")

// baseURL is the retrieval URI of every compiled document. It is https so
// that relative references resolve to a URL the loader refuses.
const baseURL = "https://schema.agentgw.invalid/tool.json"

// Error reports why a schema was rejected. Pointer is the JSON pointer of
// the offending location in the schema document (sanitized and bounded);
// Reason is a fixed phrase.
type Error struct {
	Pointer string
	Reason  string
	err     error // ErrTooLarge for limit violations
}

func (e *Error) Error() string {
	if e.Pointer == "" {
		return "schema: " + e.Reason
	}
	return "schema: " + e.Reason + " at " + e.Pointer
}

func (e *Error) Unwrap() error { return e.err }

// Schema is a compiled tool schema. It is safe for concurrent use.
type Schema struct {
	s          *jsonschema.Schema
	objectRoot bool
}

// Compile parses canonical (or any JSON text) under Limits and compiles it.
func Compile(data []byte) (*Schema, error) {
	doc, err := ijson.Parse(data, Limits)
	if err != nil {
		if ijson.IsLimit(err) {
			return nil, &Error{Reason: "schema exceeds a size or complexity limit", err: ErrTooLarge}
		}
		return nil, &Error{Reason: "schema is not I-JSON"}
	}
	return CompileDocument(doc)
}

// CompileInput is Compile for an input schema, which must have an object
// root.
func CompileInput(data []byte) (*Schema, error) {
	s, err := Compile(data)
	if err != nil {
		return nil, err
	}
	if !s.objectRoot {
		return nil, errNotObjectRoot
	}
	return s, nil
}

var errNotObjectRoot = &Error{Reason: `input schema root must declare "type": "object"`}

// RequireObjectRoot returns an error unless s has an object root.
func (s *Schema) RequireObjectRoot() error {
	if !s.objectRoot {
		return errNotObjectRoot
	}
	return nil
}

// ObjectRoot reports whether the root is an object schema whose "type" is
// "object" (or the one-element array ["object"]). This is the strict MCP
// reading of "an object root": a root that only reaches object through
// $ref, allOf or the absence of "type" does not count, because a caller
// building arguments must see the object type without evaluating the
// schema.
func (s *Schema) ObjectRoot() bool { return s.objectRoot }

// CompileDocument compiles a value produced by ijson.Parse (so already within
// some limits). doc is not modified and must not be modified afterwards.
func CompileDocument(doc any) (*Schema, error) {
	return compileDocument(doc, compileRegexp)
}

// CompileTrusted is Compile for a schema this program ships (the normative
// manifest and lifecycle schemas), never for one from a backend or a peer.
// Its patterns run on Go's RE2 engine, which is linear in the input, so
// they need no match timeout. They must not have one: the timeout is wall
// clock time, and on a loaded host a trivial match can exceed it, which
// would drop a valid stored manifest from the directory at start or fail
// a task's lifecycle event. A pattern RE2 cannot compile is a programming
// error, reported like any other compile error.
func CompileTrusted(data []byte) (*Schema, error) {
	doc, err := ijson.Parse(data, Limits)
	if err != nil {
		return nil, &Error{Reason: "schema is not I-JSON"}
	}
	return CompileTrustedDocument(doc)
}

// CompileTrustedDocument is CompileDocument for a schema this program
// ships; see CompileTrusted.
func CompileTrustedDocument(doc any) (*Schema, error) {
	return compileDocument(doc, compileRE2)
}

func compileDocument(doc any, engine jsonschema.RegexpEngine) (s *Schema, err error) {
	if err := check(doc, "", 0); err != nil {
		return nil, err
	}
	defer func() {
		// The library panics on a few internal inconsistencies; a hostile
		// schema must not take the gateway down.
		if r := recover(); r != nil {
			s, err = nil, &Error{Reason: "schema could not be compiled"}
		}
	}()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	c.UseRegexpEngine(engine)
	if err := c.AddResource(baseURL, doc); err != nil {
		return nil, &Error{Reason: "schema could not be compiled"}
	}
	compiled, err := c.Compile(baseURL)
	if err != nil {
		return nil, compileError(err)
	}
	return &Schema{s: compiled, objectRoot: isObjectRoot(doc)}, nil
}

func isObjectRoot(doc any) bool {
	obj, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	switch t := obj["type"].(type) {
	case string:
		return t == "object"
	case []any:
		return len(t) == 1 && t[0] == "object"
	}
	return false
}

// errRemote is what the loader answers for every URL.
var errRemote = errors.New("remote $ref is not allowed")

type refusingLoader struct{}

func (refusingLoader) Load(string) (any, error) { return nil, errRemote }

func compileRegexp(s string) (jsonschema.Regexp, error) {
	if len(s) > MaxPatternBytes {
		return nil, errPatternTooLong
	}
	re, err := regexp2.Compile(s, regexp2.ECMAScript|regexp2.Unicode)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = MatchTimeout
	return (*ecmaRegexp)(re), nil
}

// compileRE2 is the engine of trusted schemas (CompileTrusted).
func compileRE2(s string) (jsonschema.Regexp, error) {
	if len(s) > MaxPatternBytes {
		return nil, errPatternTooLong
	}
	return regexp.Compile(s)
}

// ecmaRegexp adapts regexp2 to the library's Regexp, whose MatchString
// cannot return an error: a timeout panics with errMatchTimeout, which
// Validate recovers into a ValidationError. The library recovers nothing,
// so the panic unwinds straight to Validate.
type ecmaRegexp regexp2.Regexp

func (re *ecmaRegexp) MatchString(s string) bool {
	ok, err := (*regexp2.Regexp)(re).MatchString(s)
	if err != nil {
		panic(errMatchTimeout)
	}
	return ok
}

func (re *ecmaRegexp) String() string { return (*regexp2.Regexp)(re).String() }

// errMatchTimeout is the panic value of a timed-out match.
var errMatchTimeout = errors.New("schema: regular expression match timed out")

var errPatternTooLong = errors.New("pattern too long")

// compileError turns a library error into an Error that names no document
// values. The library's own messages quote URLs, patterns and values, so
// only their types are used.
func compileError(err error) error {
	var (
		load     *jsonschema.LoadURLError
		scheme   *jsonschema.UnsupportedURLSchemeError
		regex    *jsonschema.InvalidRegexError
		meta     *jsonschema.SchemaValidationError
		ptrMiss  *jsonschema.JSONPointerNotFoundError
		ptrBad   *jsonschema.InvalidJsonPointerError
		anchor   *jsonschema.AnchorNotFoundError
		dupID    *jsonschema.DuplicateIDError
		dupAnc   *jsonschema.DuplicateAnchorError
		parseID  *jsonschema.ParseIDError
		parseAnc *jsonschema.ParseAnchorError
		parseURL *jsonschema.ParseURLError
		draft    *jsonschema.UnsupportedDraftError
		vocab    *jsonschema.UnsupportedVocabularyError
	)
	switch {
	case errors.As(err, &load), errors.As(err, &scheme):
		return &Error{Reason: "remote $ref is not allowed"}
	case errors.As(err, &regex):
		if errors.Is(regex.Err, errPatternTooLong) {
			return &Error{Pointer: urlPointer(regex.URL), Reason: "regular expression longer than the limit", err: ErrTooLarge}
		}
		return &Error{Pointer: urlPointer(regex.URL), Reason: "regular expression is not valid ECMA-262"}
	case errors.As(err, &meta):
		return metaError(meta.Err)
	case errors.As(err, &ptrMiss), errors.As(err, &ptrBad):
		return &Error{Reason: "a $ref points to a location missing from the document"}
	case errors.As(err, &anchor):
		return &Error{Reason: "a $ref names an anchor missing from the document"}
	case errors.As(err, &dupID):
		return &Error{Reason: "two schema resources share one $id"}
	case errors.As(err, &dupAnc):
		return &Error{Reason: "two schemas share one anchor"}
	case errors.As(err, &parseID):
		return &Error{Reason: "invalid $id"}
	case errors.As(err, &parseAnc):
		return &Error{Reason: "invalid anchor"}
	case errors.As(err, &parseURL):
		return &Error{Reason: "invalid reference URI"}
	case errors.As(err, &draft), errors.As(err, &vocab):
		return &Error{Reason: "only the JSON Schema 2020-12 dialect is supported"}
	}
	return &Error{Reason: "schema could not be compiled"}
}

// metaError reports the first leaf of a meta-schema validation failure.
func metaError(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Error{Reason: "schema is not valid against the 2020-12 meta-schema"}
	}
	leaf := firstLeaf(ve)
	ptr := instancePointer(leaf.InstanceLocation)
	if f, ok := leaf.ErrorKind.(*kind.Format); ok && f.Want == "regex" {
		if errors.Is(f.Err, errPatternTooLong) {
			return &Error{Pointer: ptr, Reason: "regular expression longer than the limit", err: ErrTooLarge}
		}
		return &Error{Pointer: ptr, Reason: "regular expression is not valid ECMA-262"}
	}
	return &Error{Pointer: ptr, Reason: "schema is not valid against the 2020-12 meta-schema (keyword " + keyword(leaf) + ")"}
}

func firstLeaf(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return ve
}

// urlPointer extracts the fragment pointer from a library location URL.
func urlPointer(u string) string {
	_, frag, ok := strings.Cut(u, "#")
	if !ok {
		return ""
	}
	return sanitizePointer(frag)
}

// Limits on pointers placed in error messages, which may contain member
// names chosen by whoever wrote the schema or the instance.
const (
	maxSegmentBytes = 64
	maxPointerBytes = 256
)

func instancePointer(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteByte('/')
		s = strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
		b.WriteString(sanitizeSegment(s))
		if b.Len() > maxPointerBytes {
			return b.String()[:maxPointerBytes] + "..."
		}
	}
	return b.String()
}

func sanitizePointer(p string) string {
	segs := strings.Split(p, "/")
	for i := range segs {
		segs[i] = sanitizeSegment(segs[i])
	}
	out := strings.Join(segs, "/")
	if len(out) > maxPointerBytes {
		out = out[:maxPointerBytes] + "..."
	}
	return out
}

// sanitizeSegment keeps printable ASCII and replaces everything else, so a
// pointer cannot smuggle control characters or lookalike text into logs.
func sanitizeSegment(s string) string {
	if len(s) > maxSegmentBytes {
		s = s[:maxSegmentBytes] + "..."
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x20 && c <= 0x7e {
			b.WriteByte(c)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}

func keyword(ve *jsonschema.ValidationError) string {
	if ve.ErrorKind == nil {
		return "schema"
	}
	if _, ok := ve.ErrorKind.(*kind.FalseSchema); ok {
		return "false"
	}
	path := ve.ErrorKind.KeywordPath()
	if len(path) == 0 {
		return "schema"
	}
	return sanitizeSegment(path[0])
}

// Structural checks the library does not make.

var supportedVocabularies = map[string]bool{
	"https://json-schema.org/draft/2020-12/vocab/core":              true,
	"https://json-schema.org/draft/2020-12/vocab/applicator":        true,
	"https://json-schema.org/draft/2020-12/vocab/unevaluated":       true,
	"https://json-schema.org/draft/2020-12/vocab/validation":        true,
	"https://json-schema.org/draft/2020-12/vocab/meta-data":         true,
	"https://json-schema.org/draft/2020-12/vocab/format-annotation": true,
	"https://json-schema.org/draft/2020-12/vocab/content":           true,
}

// foreignAssertions are assertion keywords of other dialects that a
// 2020-12 evaluator ignores.
var foreignAssertions = map[string]bool{
	"dependencies":     true,
	"additionalItems":  true,
	"$recursiveRef":    true,
	"$recursiveAnchor": true,
	"divisibleBy":      true,
	"disallow":         true,
	"extends":          true,
}

var countKeywords = []string{
	"minLength", "maxLength", "minItems", "maxItems",
	"minProperties", "maxProperties", "minContains", "maxContains",
}

// Subschema locations of 2020-12 (plus the legacy "definitions").
var (
	schemaKeywords = []string{
		"not", "if", "then", "else", "additionalProperties", "propertyNames",
		"unevaluatedProperties", "items", "contains", "unevaluatedItems",
		"contentSchema",
	}
	schemaMapKeywords   = []string{"$defs", "definitions", "properties", "patternProperties", "dependentSchemas"}
	schemaArrayKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
)

func check(v any, ptr string, depth int) error {
	if depth > 256 {
		return &Error{Pointer: sanitizePointer(ptr), Reason: "schema nesting too deep", err: ErrTooLarge}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil // booleans are schemas; other types fail the meta-schema
	}
	if s, ok := obj["$schema"]; ok {
		str, _ := s.(string)
		if str != Dialect && str != Dialect+"#" {
			return &Error{Pointer: sanitizePointer(ptr + "/$schema"), Reason: "only the JSON Schema 2020-12 dialect is supported"}
		}
	}
	if voc, ok := obj["$vocabulary"].(map[string]any); ok {
		for uri, req := range voc {
			if req == true && !supportedVocabularies[uri] {
				return &Error{Pointer: sanitizePointer(ptr + "/$vocabulary"), Reason: "a required vocabulary is not supported"}
			}
		}
	}
	if id, ok := obj["$id"].(string); ok && mentionsMeta(id) {
		return &Error{Pointer: sanitizePointer(ptr + "/$id"), Reason: "$id must not claim a json-schema.org URI"}
	}
	for _, k := range []string{"$ref", "$dynamicRef"} {
		if r, ok := obj[k].(string); ok && mentionsMeta(r) && !strings.HasPrefix(r, "https://json-schema.org/draft/2020-12/") {
			return &Error{Pointer: sanitizePointer(ptr + "/" + k), Reason: "only the JSON Schema 2020-12 dialect is supported"}
		}
	}
	for k := range obj {
		if foreignAssertions[k] {
			return &Error{Pointer: sanitizePointer(ptr + "/" + k), Reason: "assertion keyword of another JSON Schema dialect is not supported"}
		}
	}
	for _, k := range countKeywords {
		if n, ok := obj[k].(float64); ok && math.Abs(n) > 1<<53 {
			return &Error{Pointer: sanitizePointer(ptr + "/" + k), Reason: "count keyword out of the supported range"}
		}
	}
	for _, k := range schemaKeywords {
		if sub, ok := obj[k]; ok {
			if err := check(sub, ptr+"/"+k, depth+1); err != nil {
				return err
			}
		}
	}
	for _, k := range schemaMapKeywords {
		if m, ok := obj[k].(map[string]any); ok {
			for name, sub := range m {
				if err := check(sub, ptr+"/"+k+"/"+escapeToken(name), depth+1); err != nil {
					return err
				}
			}
		}
	}
	for _, k := range schemaArrayKeywords {
		if a, ok := obj[k].([]any); ok {
			for i, sub := range a {
				if err := check(sub, fmt.Sprintf("%s/%s/%d", ptr, k, i), depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// mentionsMeta is deliberately crude: any reference that could resolve to a
// meta-schema the library serves from memory (absolute, network-path or
// upper-case spellings) is caught.
func mentionsMeta(s string) bool {
	return strings.Contains(strings.ToLower(s), "json-schema.org")
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
