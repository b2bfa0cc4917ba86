package schema

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/internal/ijson"
)

func mustParse(t *testing.T, s string) any {
	t.Helper()
	v, err := ijson.Parse([]byte(s), ijson.Limits{})
	if err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return v
}

func mustCompile(t *testing.T, s string) *Schema {
	t.Helper()
	sch, err := Compile([]byte(s))
	if err != nil {
		t.Fatalf("compile %s: %v", s, err)
	}
	return sch
}

func wantReject(t *testing.T, s, reason string) *Error {
	t.Helper()
	_, err := Compile([]byte(s))
	if err == nil {
		t.Fatalf("compile %s: accepted, want rejection", s)
	}
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("compile %s: error %T %v, want *Error", s, err, err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Fatalf("compile %s: error %q does not mention %q", s, err, reason)
	}
	return se
}

func TestSpecVectorSchema(t *testing.T) {
	const doc = `{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`
	sch, err := CompileInput([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(mustParse(t, `{"city":"Paris"}`)); err != nil {
		t.Fatalf("valid instance rejected: %v", err)
	}
	for _, bad := range []string{`{}`, `{"city":3}`, `{"city":"x","extra":1}`, `[]`} {
		err := sch.Validate(mustParse(t, bad))
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: got %v, want *ValidationError", bad, err)
		}
	}
}

func TestValidationErrorDoesNotQuoteValues(t *testing.T) {
	sch := mustCompile(t, `{"type":"object","properties":{"n":{"type":"integer","maximum":3},"s":{"enum":["a"]},"p":{"pattern":"^x$"}},"additionalProperties":false}`)
	inst := `{"n":"SECRET-ONE","s":"SECRET-TWO","p":"SECRET-THREE","SECRET-KEY\u0007":1}`
	err := sch.Validate(mustParse(t, inst))
	if err == nil {
		t.Fatal("invalid instance accepted")
	}
	msg := err.Error()
	if strings.Contains(msg, "SECRET-ONE") || strings.Contains(msg, "SECRET-TWO") || strings.Contains(msg, "SECRET-THREE") || strings.Contains(msg, "\a") {
		t.Fatalf("message reflects instance values: %q", msg)
	}
	for _, kw := range []string{"type", "enum", "pattern"} {
		if !strings.Contains(msg, kw) {
			t.Errorf("message %q lacks keyword %s", msg, kw)
		}
	}
	ve := err.(*ValidationError)
	if len(ve.Failures) > MaxFailures {
		t.Errorf("%d failures, limit %d", len(ve.Failures), MaxFailures)
	}
}

func TestDialect(t *testing.T) {
	// Absent $schema selects 2020-12: prefixItems is an applicator.
	sch := mustCompile(t, `{"prefixItems":[{"type":"string"}]}`)
	if sch.Validate(mustParse(t, `[1]`)) == nil {
		t.Fatal("prefixItems not applied: default dialect is not 2020-12")
	}
	mustCompile(t, `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`)
	mustCompile(t, `{"$schema":"https://json-schema.org/draft/2020-12/schema#","type":"object"}`)
	for _, d := range []string{
		`"http://json-schema.org/draft-07/schema#"`,
		`"https://json-schema.org/draft/2019-09/schema"`,
		`"http://json-schema.org/draft-04/schema#"`,
		`"https://example.com/my-meta"`,
		`3`,
	} {
		wantReject(t, `{"$schema":`+d+`}`, "2020-12 dialect")
	}
	// Embedded resource with another dialect.
	wantReject(t, `{"$defs":{"a":{"$id":"https://x.example/a","$schema":"http://json-schema.org/draft-07/schema#"}}}`, "2020-12 dialect")
	// A $ref to another dialect's built-in meta-schema.
	wantReject(t, `{"$ref":"http://json-schema.org/draft-07/schema#"}`, "2020-12 dialect")
	wantReject(t, `{"$ref":"//json-schema.org/draft-07/schema"}`, "2020-12 dialect")
}

func TestRemoteRefRefused(t *testing.T) {
	for _, ref := range []string{
		`https://example.com/s.json`,
		`http://127.0.0.1:1/s.json`,
		`file:///etc/passwd`,
		`other.json`,
		`urn:example:thing`,
	} {
		wantReject(t, `{"type":"object","properties":{"a":{"$ref":"`+ref+`"}}}`, "remote $ref is not allowed")
	}
	// Relative to a declared $id.
	wantReject(t, `{"$id":"https://example.com/root.json","$ref":"other.json"}`, "remote $ref is not allowed")
}

func TestSameDocumentReferences(t *testing.T) {
	sch := mustCompile(t, `{"$id":"https://example.com/root.json","type":"object",
		"properties":{"a":{"$ref":"#/$defs/pos"},"b":{"$ref":"#named"},"c":{"$ref":"root.json#/$defs/pos"}},
		"$defs":{"pos":{"type":"integer","minimum":0},"n":{"$anchor":"named","type":"string"}}}`)
	if err := sch.Validate(mustParse(t, `{"a":1,"b":"x","c":2}`)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"a":-1}`, `{"b":1}`, `{"c":-5}`} {
		if sch.Validate(mustParse(t, bad)) == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	// $dynamicRef / $dynamicAnchor: the classic extensible tree.
	tree := mustCompile(t, `{
		"$id":"https://example.com/strict-tree",
		"$dynamicAnchor":"node",
		"$ref":"tree",
		"unevaluatedProperties":false,
		"$defs":{"tree":{"$id":"tree","$dynamicAnchor":"node","type":"object",
			"properties":{"data":true,"children":{"type":"array","items":{"$dynamicRef":"#node"}}}}}}`)
	if err := tree.Validate(mustParse(t, `{"children":[{"data":1}]}`)); err != nil {
		t.Fatal(err)
	}
	if tree.Validate(mustParse(t, `{"children":[{"daat":1}]}`)) == nil {
		t.Fatal("$dynamicRef did not resolve to the strict tree")
	}
	wantReject(t, `{"$ref":"#/$defs/missing"}`, "missing from the document")
	wantReject(t, `{"$ref":"#nowhere"}`, "anchor missing")
}

func TestVocabulary(t *testing.T) {
	mustCompile(t, `{"$vocabulary":{"https://json-schema.org/draft/2020-12/vocab/core":true,"https://json-schema.org/draft/2020-12/vocab/content":true}}`)
	mustCompile(t, `{"$vocabulary":{"https://example.com/vocab/optional":false}}`)
	wantReject(t, `{"$vocabulary":{"https://example.com/vocab/required":true}}`, "vocabulary is not supported")
	wantReject(t, `{"$vocabulary":{"https://json-schema.org/draft/2020-12/vocab/format-assertion":true}}`, "vocabulary is not supported")
}

func TestKeywords(t *testing.T) {
	// Unknown annotation keywords are kept and ignored.
	sch := mustCompile(t, `{"type":"object","x-ui-order":["a"],"examples":[{}],"deprecated":true}`)
	if err := sch.Validate(mustParse(t, `{}`)); err != nil {
		t.Fatal(err)
	}
	for _, kw := range []string{"dependencies", "additionalItems", "$recursiveRef", "divisibleBy", "extends", "disallow"} {
		wantReject(t, `{"type":"object","properties":{"a":{"`+kw+`":{}}}}`, "another JSON Schema dialect")
	}
	// format is an annotation.
	f := mustCompile(t, `{"type":"string","format":"email"}`)
	if err := f.Validate("not an email"); err != nil {
		t.Fatalf("format asserted: %v", err)
	}
	// A keyword with a wrong type fails the meta-schema, without quoting.
	e := wantReject(t, `{"type":"object","properties":{"a":{"type":"SECRET"}}}`, "meta-schema")
	if strings.Contains(e.Error(), "SECRET") {
		t.Fatalf("error quotes the schema: %v", e)
	}
	wantReject(t, `{"maxLength":1e300}`, "out of the supported range")
}

func TestRegexp(t *testing.T) {
	sch := mustCompile(t, `{"type":"string","pattern":"^[a-z]+$"}`)
	if sch.Validate("abc") != nil || sch.Validate("ABC") == nil {
		t.Fatal("pattern not applied")
	}
	// Not ECMA-262: an unbalanced group. The error names no pattern.
	e := wantReject(t, `{"type":"string","pattern":"^(SECRET"}`, "ECMA-262")
	if strings.Contains(e.Error(), "SECRET") {
		t.Fatalf("error quotes the pattern: %v", e)
	}
	wantReject(t, `{"patternProperties":{"a(":{}}}`, "ECMA-262")
	long := strings.Repeat("a", MaxPatternBytes+1)
	_, err := Compile([]byte(`{"pattern":"` + long + `"}`))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long pattern: %v, want ErrTooLarge", err)
	}
}

// TestRegexpECMA262 checks constructs RE2 cannot compile and real tool
// schemas use: lookahead, negative lookahead, backreferences, and \u{…}
// under the "u" flag.
func TestRegexpECMA262(t *testing.T) {
	for _, c := range []struct {
		schema   string
		match    []string
		nonMatch []string
	}{
		// A password rule: at least one digit and one letter, 8 or more.
		{`{"type":"string","pattern":"^(?=.*[0-9])(?=.*[A-Za-z]).{8,}$"}`, []string{"abcdefg1", "1234567x"}, []string{"abcdefgh", "12345678", "a1"}},
		// Negative lookahead: anything but a reserved prefix.
		{`{"type":"string","pattern":"^(?!internal\\.)[a-z.]+$"}`, []string{"public.x"}, []string{"internal.x"}},
		// Backreference: the same quote on both sides.
		{`{"type":"string","pattern":"^(['\"]).*\\1$"}`, []string{`'a'`, `"b"`}, []string{`'a"`}},
		// Lookbehind.
		{`{"type":"string","pattern":"(?<=\\$)[0-9]+"}`, []string{"$12"}, []string{"12"}},
		// ECMA-262 \d is ASCII only; \u{…} needs the u flag.
		{`{"type":"string","pattern":"^\\d+\\u{1F600}$"}`, []string{"12\U0001F600"}, []string{"\u0661\U0001F600"}},
	} {
		sch := mustCompile(t, c.schema)
		for _, m := range c.match {
			if err := sch.Validate(m); err != nil {
				t.Errorf("%s: %q rejected: %v", c.schema, m, err)
			}
		}
		for _, m := range c.nonMatch {
			err := sch.Validate(m)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.TimedOut || len(ve.Failures) != 1 || ve.Failures[0].Keyword != "pattern" {
				t.Errorf("%s: %q: got %v, want a pattern failure", c.schema, m, err)
			}
		}
	}
	// patternProperties keys with lookahead.
	pp := mustCompile(t, `{"type":"object","patternProperties":{"^(?!x-)":{"type":"string"}}}`)
	if err := pp.Validate(mustParse(t, `{"a":"s","x-b":1}`)); err != nil {
		t.Errorf("patternProperties: %v", err)
	}
	if err := pp.Validate(mustParse(t, `{"a":1}`)); err == nil {
		t.Error("patternProperties lookahead not applied")
	}
}

// TestRegexpCatastrophicTimesOut runs ^(a+)+$, exponential on a
// backtracking engine, on "aaaa…!". It must stop at the match timeout with
// a clear error rather than hang; the test bounds itself.
func TestRegexpCatastrophicTimesOut(t *testing.T) {
	evil := mustCompile(t, `{"type":"object","properties":{"s":{"type":"string","pattern":"^(a+)+$"}}}`)
	if err := evil.Validate(mustParse(t, `{"s":"aaaa"}`)); err != nil {
		t.Fatalf("short matching input rejected: %v", err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- evil.Validate(map[string]any{"s": strings.Repeat("a", 5000) + "!"}) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("validation still running after 10 s: the match timeout did not fire")
	}
	took := time.Since(start)
	t.Logf("catastrophic pattern stopped after %v: %v", took.Round(time.Millisecond), err)
	var ve *ValidationError
	if !errors.As(err, &ve) || !ve.TimedOut || !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want a ValidationError wrapping ErrTimeout", err)
	}
	if len(ve.Failures) != 1 || ve.Failures[0].Keyword != "pattern" {
		t.Fatalf("failures %+v, want one pattern failure", ve.Failures)
	}
	if !strings.Contains(err.Error(), "time limit") {
		t.Fatalf("error %q does not say what happened", err)
	}
	// The schema stays usable after a timeout.
	if err := evil.Validate(mustParse(t, `{"s":"aa"}`)); err != nil {
		t.Fatalf("after a timeout: %v", err)
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat(`{"not":`, 100) + `{}` + strings.Repeat(`}`, 100)
	_, err := Compile([]byte(deep))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("deep schema: %v, want ErrTooLarge", err)
	}
	big := `{"description":"` + strings.Repeat("x", Limits.MaxBytes) + `"}`
	_, err = Compile([]byte(big))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("big schema: %v, want ErrTooLarge", err)
	}
	_, err = Compile([]byte(`{"a":1,"a":2}`))
	if err == nil || errors.Is(err, ErrTooLarge) {
		t.Fatalf("duplicate keys: %v", err)
	}
}

func TestObjectRoot(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"type":"object"}`:          true,
		`{"type":["object"]}`:        true,
		`{"type":["object","null"]}`: false,
		`{"type":"string"}`:          false,
		`{}`:                         false,
		`true`:                       false,
		`{"$ref":"#/$defs/o","$defs":{"o":{"type":"object"}}}`: false,
	} {
		sch := mustCompile(t, doc)
		if sch.ObjectRoot() != want {
			t.Errorf("%s: ObjectRoot=%v want %v", doc, sch.ObjectRoot(), want)
		}
		_, err := CompileInput([]byte(doc))
		if (err == nil) != want {
			t.Errorf("%s: CompileInput err=%v", doc, err)
		}
	}
}

func TestCache(t *testing.T) {
	c := NewCache(2)
	a := []byte(`{"type":"object"}`)
	s1, err := c.CompileInput(a)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := c.Compile(a)
	if s1 != s2 {
		t.Fatal("cache miss for identical bytes")
	}
	if _, err := c.CompileInput([]byte(`{"type":"string"}`)); err == nil {
		t.Fatal("CompileInput accepted a non-object root")
	}
	c.Compile([]byte(`{"type":"array"}`))
	c.Compile([]byte(`{"type":"null"}`))
	if c.Len() != 2 {
		t.Fatalf("len %d, want 2", c.Len())
	}
	if _, err := c.Compile([]byte(`{"$ref":"https://x.example/"}`)); err == nil {
		t.Fatal("cache compiled a remote ref")
	}
}

func BenchmarkValidate(b *testing.B) {
	sch, err := Compile([]byte(`{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`))
	if err != nil {
		b.Fatal(err)
	}
	v, _ := ijson.Parse([]byte(`{"city":"Paris"}`), ijson.Limits{})
	b.ReportAllocs()
	for b.Loop() {
		if err := sch.Validate(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCacheHit(b *testing.B) {
	c := NewCache(0)
	doc := []byte(`{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`)
	c.Compile(doc)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Compile(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTrustedSchemasNeverTimeOut: the schemas the gateway ships run their
// patterns on RE2, so even a pattern that is exponential on a backtracking
// engine answers at once, with a plain pattern failure and no timeout (a
// wall-clock timeout on a loaded host once dropped a valid stored manifest
// from the directory at start). RE2 is also what rejects lookahead there.
func TestTrustedSchemasNeverTimeOut(t *testing.T) {
	doc := `{"type":"object","properties":{"s":{"type":"string","pattern":"^(a+)+$"}}}`
	sch, err := CompileTrusted([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	err = sch.Validate(mustParse(t, `{"s":"`+strings.Repeat("a", 100000)+`!"}`))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.TimedOut || errors.Is(err, ErrTimeout) || len(ve.Failures) != 1 || ve.Failures[0].Keyword != "pattern" {
		t.Fatalf("got %v, want a plain pattern failure", err)
	}
	if _, err := CompileTrusted([]byte(`{"type":"string","pattern":"^(?=a)"}`)); err == nil {
		t.Fatal("a trusted schema compiled a lookahead: not RE2")
	}
}
