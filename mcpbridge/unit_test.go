package mcpbridge

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/tasks"
)

func TestSchemaDialectTranslation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
		ok             bool
	}{
		{"2020-12 declared", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`, `{"type":"object"}`, true},
		{"draft-07 plain", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"number","exclusiveMinimum":0}}}`,
			`{"type":"object","properties":{"a":{"type":"number","exclusiveMinimum":0}}}`, true},
		{"tuple without additionalItems", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"string"}]}`,
			`{"type":"array","prefixItems":[{"type":"string"}]}`, true},
		{"additionalItems ignored with one items schema", `{"$schema":"http://json-schema.org/draft-07/schema#","items":{"type":"string"},"additionalItems":false}`,
			`{"items":{"type":"string"}}`, true},
		{"dependencies with a schema", `{"$schema":"http://json-schema.org/draft-06/schema#","dependencies":{"a":{"required":["b"]},"c":["d"]}}`,
			`{"dependentSchemas":{"a":{"required":["b"]}},"dependentRequired":{"c":["d"]}}`, true},
		{"nested definitions ref", `{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/x","definitions":{"x":{"type":"object","properties":{"y":{"$ref":"#/definitions/z"}}},"z":{"type":"string"}}}`,
			`{"$ref":"#/$defs/x","$defs":{"x":{"type":"object","properties":{"y":{"$ref":"#/$defs/z"}}},"z":{"type":"string"}}}`, true},
		{"draft-04 exclusive bound", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"number","minimum":1,"exclusiveMinimum":true,"maximum":5,"exclusiveMaximum":false}`,
			`{"type":"number","exclusiveMinimum":1,"maximum":5}`, true},
		{"plain-name $id", `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"a":{"$id":"#thing","type":"string"}}}`,
			`{"properties":{"a":{"$anchor":"thing","type":"string"}}}`, true},
		{"$ref with assertion siblings", `{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/x","type":"string","definitions":{"x":{}}}`, ``, false},
		{"recursiveRef", `{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveRef":"#"}`, ``, false},
		{"unknown dialect", `{"$schema":"https://example.com/s","type":"object"}`, ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s map[string]any
			if err := json.Unmarshal([]byte(tc.in), &s); err != nil {
				t.Fatal(err)
			}
			d := dialectOf(s)
			ok := d != "unknown" && to202012(s, d)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			var want map[string]any
			json.Unmarshal([]byte(tc.want), &want)
			if !reflect.DeepEqual(s, want) {
				got, _ := json.Marshal(s)
				t.Errorf("got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestConvertToolRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, tool string }{
		{"no name", `{"inputSchema":{"type":"object"}}`},
		{"empty name", `{"name":"","inputSchema":{"type":"object"}}`},
		{"control character in name", `{"name":"a\u0001b","inputSchema":{"type":"object"}}`},
		{"no inputSchema", `{"name":"a"}`},
		{"array root", `{"name":"a","inputSchema":{"type":"array"}}`},
		{"remote ref", `{"name":"a","inputSchema":{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}}`},
		{"duplicate member", `{"name":"a","name":"b","inputSchema":{"type":"object"}}`},
		{"not an object", `["a"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, reason := convertTool(json.RawMessage(tc.tool), nil, false); reason == "" {
				t.Error("accepted")
			}
		})
	}
}

func TestConvertToolKeepsMembers(t *testing.T) {
	t.Parallel()
	raw := `{"name":"t","title":"T","description":"D","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"r":{"type":"integer"}}},
		"annotations":{"destructiveHint":false},"execution":{"taskSupport":"required"},"_meta":{"a/b":[1]},
		"urn:xmpp:agent-api:0":{"approvalRequired":false},"icons":[]}`
	tool, reason := convertTool(json.RawMessage(raw), []string{"prompts"}, false)
	if reason != "" {
		t.Fatal(reason)
	}
	got, _ := json.Marshal(tool)
	want := `{"_meta":{"a/b":[1]},"annotations":{"destructiveHint":false},"description":"D","execution":{"taskSupport":"required"},` +
		`"inputSchema":{"type":"object"},"name":"t","outputSchema":{"properties":{"r":{"type":"integer"}},"type":"object"},"title":"T",` +
		`"urn:xmpp:agent-api:0":{"supportsCancellation":true,"supportsInput":true,"supportsProgress":true},` +
		`"urn:xmpp:agent-gateway:semantic-loss":["prompts","task-required","tool-icons","tool-member"]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := backendkit.NewRedactor(func() []string { return []string{"component-secret", "x"} })
	r.Set("s3cr\"et-value", "s3cr\"et")
	if got := r.Scrub(`a s3cr"et-value b component-secret x`); got != `a [redacted] b [redacted] x` {
		t.Errorf("text: %q", got)
	}
	doc, _ := json.Marshal(map[string]string{"k": `key=s3cr"et-value`})
	out, found, _ := r.ScrubJSON(doc)
	if !found || string(out) != `{"k":"key=[redacted]"}` || !json.Valid(out) {
		t.Errorf("json: %s %v", out, found)
	}
	if got := safeText(r, "line\x1b[31m\rforged\u2028ok", 100); strings.ContainsAny(got, "\x1b\r") {
		t.Errorf("control characters kept: %q", got)
	}
	if got := bound("héllo", 2); got != "hé" {
		t.Errorf("bound: %q", got)
	}
}

func TestChildEnvIsolated(t *testing.T) {
	t.Setenv("AGENTGW_COMPONENT_SECRET", "do-not-leak")
	t.Setenv("PATH", "/usr/bin")
	env := childEnv(map[string]string{"PATH": "/opt/bin", "API_KEY": "k"})
	if slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "AGENTGW_") }) {
		t.Errorf("gateway environment leaked: %v", env)
	}
	if !slices.Contains(env, "PATH=/opt/bin") || !slices.Contains(env, "API_KEY=k") || slices.Contains(env, "PATH=/usr/bin") {
		t.Errorf("env = %v", env)
	}
}

func TestTapSSE(t *testing.T) {
	t.Parallel()
	tp := newTap()
	r := tp.expect("tok")
	tp.outgoing([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":"tok"},"name":"x"}}`))
	var seen [][]byte
	body := "id: 1\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"tok\",\"progress\":1}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[],\"isError\":false}}\n\n"
	bt := newBodyTap(nopCloser{strings.NewReader(body)}, true, func(f []byte) {
		seen = append(seen, append([]byte(nil), f...))
		tp.incoming(f)
	})
	buf := make([]byte, 7) // small reads split lines
	for {
		if _, err := bt.Read(buf); err != nil {
			break
		}
	}
	if len(seen) != 2 || string(r.get()) != `{"content":[],"isError":false}` || r.progress.Load() != 1 {
		t.Errorf("frames %q, result %s, progress %d", seen, r.get(), r.progress.Load())
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

// TestNDJSONConnFeedsTheTap: the stdio connection hands the tap each whole
// frame, byte for byte and in wire order, before the SDK reads the message,
// however the stream is split.
func TestNDJSONConnFeedsTheTap(t *testing.T) {
	t.Parallel()
	frames := []string{`{"jsonrpc":"2.0","id":1,"result":{"t":"a}b\"{c\\"}}`, `{"jsonrpc":"2.0","id":2,"result":{"x":[1,{"y":"]"}]}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`}
	stream := frames[0] + "\n  " + frames[1] + "\r\n" + frames[2] + "\n"
	for _, chunk := range []int{1, 7, len(stream)} {
		pr, pw := io.Pipe()
		var mu sync.Mutex
		var got []string
		c := newNDJSONConn(pr, nopWriteCloser{io.Discard}, 1<<20, func(b []byte) {
			mu.Lock()
			got = append(got, string(b))
			mu.Unlock()
		}, nil)
		go func() {
			for i := 0; i < len(stream); i += chunk {
				pw.Write([]byte(stream[i:min(i+chunk, len(stream))]))
			}
			pw.Close()
		}()
		for i := range frames {
			if _, err := c.Read(context.Background()); err != nil {
				t.Fatalf("chunk %d: read %d: %v", chunk, i, err)
			}
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if n < i+1 {
				t.Fatalf("chunk %d: message %d read before the tap saw it", chunk, i)
			}
		}
		c.Close()
		if !slices.Equal(got, frames) {
			t.Fatalf("chunk %d: tap saw %q", chunk, got)
		}
	}
	var out []string
	c := newNDJSONConn(io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, 1024, nil, func(b []byte) { out = append(out, string(b)) })
	id, _ := jsonrpc.MakeID("r1")
	if err := c.Write(context.Background(), &jsonrpc.Request{ID: id, Method: "ping"}); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0] != `{"jsonrpc":"2.0","id":"r1","method":"ping"}` {
		t.Fatalf("tap saw outgoing %q", out)
	}
}

func TestNewChecksOptions(t *testing.T) {
	t.Parallel()
	cmd := []string{"server"}
	inMemory := func(context.Context) (mcp.Transport, error) { t, _ := mcp.NewInMemoryTransports(); return t, nil }
	for name, o := range map[string]Options{
		"no mcp table":          {JID: testJID},
		"command and url":       {JID: testJID, Command: []string{"x"}, URL: "http://127.0.0.1:1/mcp"},
		"neither":               {JID: testJID},
		"empty command":         {JID: testJID, Command: []string{""}},
		"transport and command": {JID: testJID, Command: cmd, Transport: inMemory},
		"full jid":              {JID: testJID + "/res", Command: cmd},
		"domain only":           {JID: "agents.example.test", Command: cmd},
		"outside the domain":    {JID: "a@elsewhere.test", Command: cmd, ComponentDomain: "agents.example.test"},
		"bad version":           {JID: testJID, Command: cmd, Version: "1 2"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	b, err := New(Options{JID: "Everything@Agents.Example.Test", Command: cmd, ComponentDomain: "agents.example.test"})
	if err != nil || b.Endpoint() != testJID || b.Features() != (tasks.Features{Progress: true, Cancel: true, Input: true}) {
		t.Errorf("New: %v %v", b, err)
	}
}

// TestToolWithECMA262PatternIsPublished: an MCP tool whose inputSchema
// uses lookahead and a backreference (ECMA-262, not RE2) is converted and
// passes the registrar's validation instead of being dropped.
func TestToolWithECMA262PatternIsPublished(t *testing.T) {
	t.Parallel()
	raw := `{"name":"set_password","inputSchema":{"type":"object","properties":{` +
		`"password":{"type":"string","pattern":"^(?=.*[0-9])(?=.*[a-z]).{8,}$"},` +
		`"quoted":{"type":"string","pattern":"^(['\"]).*\\1$"}},"required":["password"]}}`
	tool, reason := convertTool(json.RawMessage(raw), nil, false)
	if reason != "" {
		t.Fatalf("tool dropped: %s", reason)
	}
	b := &Backend{jid: "pw@agents.example"}
	if reason := b.checkTool(tool); reason != "" {
		t.Fatalf("registrar refuses the tool: %s", reason)
	}
}

// TestConvertToolTextCharacters: control characters in tool text are kept
// (the manifest carries them as JSON escapes; only its XML copies are
// sanitized); U+FFFE and U+FFFF, which no manifest can carry, are replaced
// and the loss is declared.
func TestConvertToolTextCharacters(t *testing.T) {
	t.Parallel()
	tool, reason := convertTool(json.RawMessage(`{"name":"t","title":"a\u001fb","description":"c\uffffd","inputSchema":{"type":"object"}}`), nil, false)
	if reason != "" {
		t.Fatal(reason)
	}
	if tool["title"] != "a\u001fb" || tool["description"] != "c\uFFFDd" {
		t.Fatalf("title %q description %q", tool["title"], tool["description"])
	}
	loss, _ := tool[SemanticLossKey].([]any)
	if !slices.Contains(loss, any("tool-description-sanitized")) || slices.Contains(loss, any("tool-title-sanitized")) {
		t.Fatalf("semantic loss %v", loss)
	}
	b := &Backend{jid: "t@agents.example"}
	if reason := b.checkTool(tool); reason != "" {
		t.Fatalf("registrar refuses the tool: %s", reason)
	}
}
