package directory

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/internal/ijson"
)

// specManifest is the spec's "Agent API manifest" example.
const specManifest = `{
  "manifestSpecVersion": "0",
  "agent": {
    "jid": "weather@agents.example",
    "name": "weather",
    "title": "Weather Agent",
    "description": "Provides weather forecasts.",
    "version": "1.4.0",
    "vendor": "Example"
  },
  "implementation": {"name":"example-weather","version":"3.2.1"},
  "mcpProtocolVersion": "2025-11-25",
  "tools": [{
    "name": "forecast.get",
    "title": "Get Forecast",
    "description": "Gets a forecast for one city.",
    "inputSchema": {
      "type": "object",
      "properties": { "city": { "type": "string" } },
      "required": ["city"],
      "additionalProperties": false
    },
    "outputSchema": {
      "type": "object",
      "properties": { "summary": { "type": "string" } },
      "required": ["summary"]
    },
    "annotations": {
      "readOnlyHint": true,
      "destructiveHint": false,
      "idempotentHint": true,
      "openWorldHint": true
    },
    "execution": {"taskSupport":"optional"},
    "urn:xmpp:agent-api:0": {
      "supportsProgress": true,
      "supportsCancellation": true,
      "defaultTimeoutSeconds": 30,
      "maximumTimeoutSeconds": 120,
      "requiredPermissions": ["weather.read"],
      "approvalRequired": false,
      "tags": ["weather", "forecast"]
    }
  }]
}`

// minimal builds a tool-less manifest for jid and version with extra agent
// members (a JSON fragment starting with a comma, or "").
func minimal(jid, version, extraAgent string) string {
	return `{"manifestSpecVersion":"0","agent":{"jid":"` + jid + `","name":"n","version":"` + version + `"` + extraAgent + `},"tools":[]}`
}

// withTool builds a manifest with one tool object given as JSON.
func withTool(tool string) string {
	return `{"manifestSpecVersion":"0","agent":{"jid":"a@agents.example","name":"a","version":"1"},"tools":[` + tool + `]}`
}

func TestSpecVectorManifestHash(t *testing.T) {
	t.Parallel()
	raw := `{"manifestSpecVersion":"0",
       "agent":{"jid":"weather@agents.example",
                "name":"weather","version":"1.4.0"},
       "tools":[]}`
	m, err := ParseManifest([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	const wantCanon = `{"agent":{"jid":"weather@agents.example","name":"weather","version":"1.4.0"},"manifestSpecVersion":"0","tools":[]}`
	if string(m.Canonical) != wantCanon {
		t.Fatalf("canonical:\n%s\nwant\n%s", m.Canonical, wantCanon)
	}
	if m.Hash != "K2/YdwvIBAlfUIeZHiNCyiYA4m4W2wrEOqXQDoQyXp4=" {
		t.Fatalf("hash %s", m.Hash)
	}
	if m.Endpoint != "weather@agents.example" || m.Version != "1.4.0" || len(m.Tools) != 0 || m.Tools == nil {
		t.Fatalf("fields: %+v", m)
	}
}

func TestSpecExampleManifest(t *testing.T) {
	t.Parallel()
	m, err := ParseManifest([]byte(specManifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.Agent.Title != "Weather Agent" || m.DisplayName() != "Weather Agent" || m.Agent.Vendor != "Example" {
		t.Errorf("agent: %+v", m.Agent)
	}
	if m.Implementation == nil || m.Implementation.Name != "example-weather" || m.Implementation.Version != "3.2.1" {
		t.Errorf("implementation: %+v", m.Implementation)
	}
	if m.MCPProtocolVersion != "2025-11-25" {
		t.Errorf("mcpProtocolVersion %q", m.MCPProtocolVersion)
	}
	tool, ok := m.Tool("forecast.get")
	if !ok {
		t.Fatal("tool missing")
	}
	if tool.InputHash != "XxGP62PwgOW9NLxx8ysunvuijMhSd0y4j1SSRTAbt7c=" {
		t.Errorf("input hash %s", tool.InputHash)
	}
	if string(tool.InputSchema) != `{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}` {
		t.Errorf("input schema %s", tool.InputSchema)
	}
	if string(tool.OutputSchema) != `{"properties":{"summary":{"type":"string"}},"required":["summary"],"type":"object"}` || tool.OutputHash != ijson.Hash(tool.OutputSchema) {
		t.Errorf("output schema %s %s", tool.OutputSchema, tool.OutputHash)
	}
	a := tool.Annotations
	if a.ReadOnly == nil || !*a.ReadOnly || a.Destructive == nil || *a.Destructive || a.Idempotent == nil || !*a.Idempotent || a.OpenWorld == nil || !*a.OpenWorld {
		t.Errorf("annotations %+v", a)
	}
	e := tool.Ext
	if !e.SupportsProgress || !e.SupportsCancellation || e.SupportsInput || e.ApprovalRequired ||
		e.DefaultTimeoutSeconds != 30 || e.MaximumTimeoutSeconds != 120 ||
		strings.Join(e.RequiredPermissions, ",") != "weather.read" || strings.Join(e.Tags, ",") != "weather,forecast" {
		t.Errorf("ext %+v", e)
	}
	// Tool bytes are the canonical tool object and live inside the
	// manifest's canonical bytes.
	want, _ := ijson.Canonical(mustValue(t, specManifest).(map[string]any)["tools"].([]any)[0])
	if !bytes.Equal(tool.Canonical, want) {
		t.Errorf("tool canonical %s", tool.Canonical)
	}
	if !bytes.Contains(m.Canonical, tool.Canonical) || cap(tool.Canonical) != len(tool.Canonical) || cap(tool.InputSchema) != len(tool.InputSchema) {
		t.Errorf("tool bytes not shared or appendable")
	}
}

func mustValue(t testing.TB, s string) any {
	t.Helper()
	v, err := ijson.Parse([]byte(s), ijson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAnnotationsAbsentStayNil(t *testing.T) {
	t.Parallel()
	m, err := ParseManifest([]byte(withTool(`{"name":"t","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false}}`)))
	if err != nil {
		t.Fatal(err)
	}
	a := m.Tools[0].Annotations
	if a.ReadOnly == nil || *a.ReadOnly || a.Destructive != nil || a.Idempotent != nil || a.OpenWorld != nil {
		t.Fatalf("annotations %+v", a)
	}
	if m.Tools[0].OutputSchema != nil || m.Tools[0].OutputHash != "" {
		t.Fatal("absent output schema not nil")
	}
}

// secret is planted in rejected documents; no error may quote it.
const secret = "S3CR3T-PAYLOAD"

func TestRejections(t *testing.T) {
	t.Parallel()
	deep := `{"manifestSpecVersion":"0","agent":{"jid":"a@b.example","name":"n","version":"1"},"tools":[{"name":"t","inputSchema":{"type":"object","x":` +
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}}]}`
	huge := withTool(`{"name":"t","inputSchema":{"type":"object","description":"` + strings.Repeat(secret, 10<<20/len(secret)) + `"}}`)
	cases := []struct {
		name, doc string
		tooLarge  bool
		reason    string
	}{
		{"duplicate keys", `{"manifestSpecVersion":"0","manifestSpecVersion":"0","agent":{"jid":"a@b.example","name":"` + secret + `","version":"1"},"tools":[]}`, false, "duplicate member name"},
		{"lone surrogate", minimal("a@b.example", "1", `,"title":"`+secret+`\ud800"`), false, "lone Unicode surrogate"},
		{"out-of-range number", withTool(`{"name":"t","inputSchema":{"type":"object","maximum":1e400,"title":"` + secret + `"}}`), false, "IEEE-754"},
		{"10 MB document", huge, true, ""},
		{"10000-deep nesting", deep, true, ""},
		{"remote $ref", withTool(`{"name":"t","inputSchema":{"type":"object","properties":{"a":{"$ref":"https://` + secret + `.example/s.json"}}}}`), false, "remote $ref is not allowed"},
		{"unknown top-level member", `{"manifestSpecVersion":"0","agent":{"jid":"a@b.example","name":"n","version":"1"},"tools":[],"` + secret + `":1}`, false, "unknown top-level member"},
		{"bad version string", minimal("a@b.example", "1.0 "+secret, ""), false, "/agent/version"},
		{"empty version", minimal("a@b.example", "", ""), false, "/agent/version"},
		{"http homepage", minimal("a@b.example", "1", `,"homepage":"http://`+secret+`.example/"`), false, "/agent/homepage"},
		{"HTTPS uppercase scheme", minimal("a@b.example", "1", `,"homepage":"HTTPS://`+secret+`.example/"`), false, "/agent/homepage"},
		{"userinfo", minimal("a@b.example", "1", `,"avatarUrl":"https://`+secret+`@b.example/a.png"`), false, "userinfo"},
		{"empty host", minimal("a@b.example", "1", `,"homepage":"https:///`+secret+`"`), false, "host"},
		{"fragment", minimal("a@b.example", "1", `,"homepage":"https://b.example/#`+secret+`"`), false, "fragment"},
		{"space in URI", minimal("a@b.example", "1", `,"homepage":"https://b.example/ `+secret+`"`), false, "not allowed in a URI"},
		{"bad port", minimal("a@b.example", "1", `,"homepage":"https://b.example:99999/"`), false, "port"},
		{"wrong spec version", `{"manifestSpecVersion":"1","agent":{"jid":"a@b.example","name":"n","version":"1"},"tools":[]}`, false, "manifestSpecVersion"},
		{"missing tools", `{"manifestSpecVersion":"0","agent":{"jid":"a@b.example","name":"n","version":"1"}}`, false, "lacks a required member"},
		{"not JSON", `{"manifestSpecVersion":"0",` + secret, false, "not valid JSON"},
		{"trailing data", minimal("a@b.example", "1", "") + secret, false, "not valid JSON"},
		{"jid with resource", minimal("a@b.example/"+secret, "1", ""), false, "/agent/jid"},
		{"jid without localpart", minimal("b.example", "1", ""), false, "/agent/jid"},
		{"jid not normalized", minimal("Weather@Agents.Example", "1", ""), false, "normalized"},
		{"duplicate tool names", withTool(`{"name":"t","inputSchema":{"type":"object"}},{"name":"t","inputSchema":{"type":"object"}}`), false, "not unique"},
		{"empty tool name", withTool(`{"name":"","inputSchema":{"type":"object"}}`), false, "/tools/0/name"},
		{"XML-illegal tool name", withTool(`{"name":"a\u0001b","inputSchema":{"type":"object"}}`), false, "XML"},
		{"noncharacter in description", minimal("a@b.example", "1", `,"description":"x\uFFFE"`), false, "XML"},
		{"U+FFFF in a schema member name", withTool(`{"name":"t","inputSchema":{"type":"object","properties":{"a\uffff":{}}}}`), false, "XML"},
		{"U+FFFF in _meta", withTool(`{"name":"t","inputSchema":{"type":"object"},"_meta":{"k":"\uFFFF"}}`), false, "XML"},
		{"long tool name", withTool(`{"name":"` + strings.Repeat("n", MaxToolNameBytes+1) + `","inputSchema":{"type":"object"}}`), false, "/tools/0/name"},
		{"input schema not object root", withTool(`{"name":"t","inputSchema":{"type":"array"}}`), false, "object"},
		{"input schema draft-07", withTool(`{"name":"t","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}}`), false, "2020-12"},
		{"output schema bad regex", withTool(`{"name":"t","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"a":{"pattern":"(` + secret + `"}}}}`), false, "ECMA-262"},
		{"annotation not boolean", withTool(`{"name":"t","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":"` + secret + `"}}`), false, "readOnlyHint"},
		{"unknown tool member", withTool(`{"name":"t","inputSchema":{"type":"object"},"` + secret + `":1}`), false, "does not allow"},
		{"unknown extension member", withTool(`{"name":"t","inputSchema":{"type":"object"},"urn:xmpp:agent-api:0":{"` + secret + `":true}}`), false, "does not allow"},
		{"timeout too large", withTool(`{"name":"t","inputSchema":{"type":"object"},"urn:xmpp:agent-api:0":{"maximumTimeoutSeconds":1e12}}`), true, ""},
		{"default above maximum", withTool(`{"name":"t","inputSchema":{"type":"object"},"urn:xmpp:agent-api:0":{"defaultTimeoutSeconds":10,"maximumTimeoutSeconds":5}}`), false, "exceeds maximumTimeoutSeconds"},
		{"duplicate tags", withTool(`{"name":"t","inputSchema":{"type":"object"},"urn:xmpp:agent-api:0":{"tags":["a","a"]}}`), false, "duplicate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(c.doc))
			if err == nil {
				t.Fatalf("accepted: %+v", m.Agent)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error quotes the document: %v", err)
			}
			if c.tooLarge {
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("error %v, want ErrTooLarge", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T %v, want *ValidationError", err, err)
			}
			if errors.Is(err, ErrTooLarge) {
				t.Fatalf("validation error also ErrTooLarge: %v", err)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("error %q does not mention %q", err, c.reason)
			}
			t.Log(err)
		})
	}
}

// TestControlCharactersAccepted: control characters are legal in manifest
// strings and member names, because the manifest travels as JSON text in
// which RFC 8785 writes them as escapes (legal XML character data). The
// canonical bytes keep the escapes and the decoded fields the characters.
func TestControlCharactersAccepted(t *testing.T) {
	t.Parallel()
	doc := `{"manifestSpecVersion":"0","agent":{"jid":"a@agents.example","name":"a\u0001","title":"T\u001f","description":"d\u0000e","version":"1"},` +
		`"tools":[{"name":"t","title":"x\u0002","description":"unit\u001fsep","inputSchema":{"type":"object","properties":{"k\u0003":{"description":"\u0004"}}},"_meta":{"m\u0005":"\u0006"}}]}`
	m, err := ParseManifest([]byte(doc))
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	want := `{"agent":{"description":"d\u0000e","jid":"a@agents.example","name":"a\u0001","title":"T\u001f","version":"1"},"manifestSpecVersion":"0",` +
		`"tools":[{"_meta":{"m\u0005":"\u0006"},"description":"unit\u001fsep","inputSchema":{"properties":{"k\u0003":{"description":"\u0004"}},"type":"object"},"name":"t","title":"x\u0002"}]}`
	if string(m.Canonical) != want {
		t.Fatalf("canonical\n got %s\nwant %s", m.Canonical, want)
	}
	if m.Hash != ijson.Hash([]byte(want)) {
		t.Fatal("hash is not the hash of the canonical bytes")
	}
	if m.Agent.Description != "d\x00e" || m.Tools[0].Description != "unit\x1fsep" || m.Agent.Name != "a\x01" {
		t.Fatalf("decoded fields %q %q %q", m.Agent.Description, m.Tools[0].Description, m.Agent.Name)
	}
	// Tool names still travel in XML attributes: they stay XML-legal.
	if _, err := ParseManifest([]byte(withTool(`{"name":"a\u0001","inputSchema":{"type":"object"}}`))); err == nil {
		t.Fatal("control character in a tool name accepted")
	}
}

func TestAcceptedVariants(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		minimal("a@b.example", "A-z0.9_~", `,"homepage":"https://b.example","avatarUrl":"https://[::1]:8443/a%20b.png?x=1&y=2"`),
		minimal("a@b.example", strings.Repeat("v", 64), ""),
		withTool(`{"name":"Straße 🌦","inputSchema":{"type":"object"},"_meta":{"x":1},"execution":{},"com.example:ext":{"any":[1,2]}}`),
		withTool(`{"name":"t","inputSchema":{"type":"object","$defs":{"a":{"$anchor":"x","type":"string"}},"properties":{"q":{"$ref":"#x"}}}}`),
	} {
		if _, err := ParseManifest([]byte(doc)); err != nil {
			t.Errorf("%.120s: %v", doc, err)
		}
	}
}

func compactTools(n int) []byte {
	tools := make([]string, n)
	for i := range tools {
		tools[i] = fmt.Sprintf(`{"name":"%d","inputSchema":{"type":"object"}}`, i)
	}
	return []byte(withTool(strings.Join(tools, ",")))
}

func TestManyTools(t *testing.T) {
	t.Parallel()
	doc := compactTools(4096)
	m, err := ParseManifest(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != 4096 {
		t.Fatalf("%d tools", len(m.Tools))
	}
	for i := range m.Tools {
		tl := &m.Tools[i]
		want, _ := ijson.Canonical(mustValue(t, string(tl.Canonical)))
		if !bytes.Equal(want, tl.Canonical) || tl.InputHash != ijson.Hash(tl.InputSchema) {
			t.Fatalf("tool %d bytes wrong", i)
		}
	}
	if _, err := ParseManifest(compactTools(4097)); err == nil {
		t.Fatal("4097 tools accepted")
	}
}

// manifestWithTools builds a manifest with n tools whose input schemas have
// props properties each.
func manifestWithTools(jid, version string, n, props int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"manifestSpecVersion":"0","agent":{"jid":%q,"name":"bench","title":"Bench Agent","version":%q},"tools":[`, jid, version)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"tool.%d","title":"Tool %d","description":"Does thing number %d.","inputSchema":{"type":"object","properties":{`, i, i, i)
		for p := range props {
			if p > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"p%d":{"type":"string","maxLength":100,"pattern":"^[a-z]*$"}`, p)
		}
		fmt.Fprintf(&b, `},"required":["p0"],"additionalProperties":false},"annotations":{"readOnlyHint":true},"urn:xmpp:agent-api:0":{"supportsProgress":true,"tags":["t%d"]}}`, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkParseManifest200Tools(b *testing.B) {
	doc := manifestWithTools("bench@agents.example", "1", 200, 5)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseManifest(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalizeHash200Tools(b *testing.B) {
	doc := manifestWithTools("bench@agents.example", "1", 200, 5)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		c, _, err := ijson.Canonicalize(doc, ManifestLimits)
		if err != nil {
			b.Fatal(err)
		}
		_ = ijson.Hash(c)
	}
}
