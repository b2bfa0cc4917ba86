package connectorbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/bindingsqlite"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/internal/store"
)

func TestValidateBaseURL(t *testing.T) {
	good := map[string]string{
		"http://127.0.0.1:9090":         "http://127.0.0.1:9090",
		"https://conn.example/prefix/":  "https://conn.example/prefix",
		"http://[::1]:80/a/b":           "http://[::1]:80/a/b",
		"HTTP://Example.COM/x":          "http://Example.COM/x",
		"https://conn.example/with%20s": "https://conn.example/with%20s",
	}
	for in, want := range good {
		u, err := ValidateBaseURL(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := u.String(); got != want {
			t.Errorf("%q normalised to %q, want %q", in, got, want)
		}
	}
	bad := []string{
		"", "ftp://host", "ws://host", "http://", "http:///path", "http://user:pw@host",
		"http://user@host", "http://host/?q=1", "http://host/?", "http://host/#frag", "http://host#",
		"mailto:x@y", "/relative", "http://host:notaport",
	}
	for _, in := range bad {
		if _, err := ValidateBaseURL(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	u, _ := ValidateBaseURL("https://conn.example/prefix")
	if got := endpointURL(u, "/health"); got != "https://conn.example/prefix/health" {
		t.Errorf("endpoint under prefix: %s", got)
	}
	if got := wsURL(u); got != "wss://conn.example/prefix/ws" {
		t.Errorf("ws url: %s", got)
	}
}

// cardDoc returns the reference card as a mutable document.
func cardDoc(t *testing.T) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(connectortest.DefaultCard, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReferenceCardIsValidAndMatchesTestdata(t *testing.T) {
	if _, err := ParseCard(connectortest.DefaultCard); err != nil {
		t.Fatalf("reference card: %v", err)
	}
	for _, f := range []struct {
		file     string
		embedded []byte
	}{
		{"../testdata/connector/card.json", connectortest.DefaultCard},
		{"../testdata/connector/skill.md", connectortest.DefaultSkill},
	} {
		b, err := os.ReadFile(f.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, f.embedded) {
			t.Errorf("%s differs from the copy embedded in connectortest; keep them identical", f.file)
		}
	}
	if skillName(string(connectortest.DefaultSkill)) != "connector-im-refconnector" {
		t.Errorf("skill header name not parsed")
	}
}

func tool0(m map[string]any) map[string]any {
	return m["tools"].([]any)[0].(map[string]any)
}

func TestParseCardHardRules(t *testing.T) {
	cases := []struct {
		name string
		mod  func(m map[string]any)
		want string
	}{
		{"schema", func(m map[string]any) { m["schema"] = "xagent.connector/v2" }, "schema must be"},
		{"protocol omitted", func(m map[string]any) { delete(m, "protocol_version") }, "declared explicitly"},
		{"protocol 2.0", func(m map[string]any) { m["protocol_version"] = "2.0" }, "below the admission floor"},
		{"protocol 4.0", func(m map[string]any) { m["protocol_version"] = "4.0" }, "newer than"},
		{"protocol junk", func(m map[string]any) { m["protocol_version"] = "three" }, "major.minor"},
		{"card id", func(m map[string]any) { delete(m, "connector_card_id") }, "connector_card_id is required"},
		{"card id shape", func(m map[string]any) { m["connector_card_id"] = "im wechat" }, "connector_card_id must be"},
		{"name", func(m map[string]any) { m["connector"].(map[string]any)["name"] = "" }, "connector.name"},
		{"version", func(m map[string]any) { delete(m["connector"].(map[string]any), "version") }, "connector.version"},
		{"target types empty", func(m map[string]any) { m["supports"].(map[string]any)["target_types"] = []any{} }, "target_types must be non-empty"},
		{"target type unknown", func(m map[string]any) { m["supports"].(map[string]any)["target_types"] = []any{"im", "fax"} }, "unknown value"},
		{"profiles empty", func(m map[string]any) { m["supports"].(map[string]any)["profiles"] = []any{} }, "profiles must be non-empty"},
		{"profile/target mismatch", func(m map[string]any) {
			m["supports"].(map[string]any)["target_types"] = []any{"device"}
		}, "does not intersect"},
		{"channel mode", func(m map[string]any) { m["supports"].(map[string]any)["user_channel_mode"] = "many" }, "user_channel_mode"},
		{"tool profile", func(m map[string]any) { tool0(m)["profile"] = "xagent.device.v1" }, "profile is not in supports.profiles"},
		{"tool id empty", func(m map[string]any) { tool0(m)["tool_id"] = "" }, "tool_id must be"},
		{"tool id chars", func(m map[string]any) { tool0(m)["tool_id"] = "echo now" }, "tool_id must be"},
		{"tool id long", func(m map[string]any) { tool0(m)["tool_id"] = strings.Repeat("a", 257) }, "tool_id must be"},
		{"tool id duplicate", func(m map[string]any) {
			m["tools"].([]any)[1].(map[string]any)["tool_id"] = "echo"
		}, "not unique"},
		{"schema not object", func(m map[string]any) { tool0(m)["input_schema"] = "x" }, "must be a JSON object"},
		{"schema type", func(m map[string]any) { tool0(m)["input_schema"].(map[string]any)["type"] = "array" }, "object schema"},
		{"channel arg missing", func(m map[string]any) {
			delete(tool0(m)["input_schema"].(map[string]any)["properties"].(map[string]any), "connector_channel_id")
		}, "properties.connector_channel_id"},
		{"channel arg type", func(m map[string]any) {
			tool0(m)["input_schema"].(map[string]any)["properties"].(map[string]any)["connector_channel_id"] = map[string]any{"type": "integer"}
		}, "type string"},
		{"channel arg not required", func(m map[string]any) {
			tool0(m)["input_schema"].(map[string]any)["required"] = []any{"text"}
		}, "required must contain connector_channel_id"},
		{"card id argument", func(m map[string]any) {
			tool0(m)["input_schema"].(map[string]any)["properties"].(map[string]any)["connector_card_id"] = map[string]any{"type": "string"}
		}, "connector_card_id argument"},
		{"server_base_url", func(m map[string]any) { m["server_base_url"] = "http://x" }, "server_base_url"},
		{"form without fields", func(m map[string]any) {
			delete(m["auth_flows"].([]any)[0].(map[string]any), "fields")
		}, "at least one field"},
		{"secret default", func(m map[string]any) {
			f := m["auth_flows"].([]any)[0].(map[string]any)["fields"].([]any)[1].(map[string]any)
			f["default_value"] = "x"
		}, "must not have a default_value"},
		{"flow without title", func(m map[string]any) {
			delete(m["auth_flows"].([]any)[1].(map[string]any), "title")
		}, "needs id, target_type, type and title"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := cardDoc(t)
			c.mod(m)
			raw, _ := json.Marshal(m)
			_, err := ParseCard(raw)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
	t.Run("api key in card", func(t *testing.T) {
		m := cardDoc(t)
		m["connector"].(map[string]any)["description"] = "key: sk-12345678"
		raw, _ := json.Marshal(m)
		_, err := ParseCard(raw, "sk-12345678")
		if err == nil || strings.Contains(err.Error(), "sk-12345678") {
			t.Fatalf("err = %v", err)
		}
		// Also when JSON-escaped.
		esc := bytes.ReplaceAll(raw, []byte("sk-"), []byte(`s\u006b-`))
		if _, err := ParseCard(esc, "sk-12345678"); err == nil {
			t.Fatal("escaped key accepted")
		}
	})
	t.Run("not json", func(t *testing.T) {
		if _, err := ParseCard([]byte("{")); err == nil {
			t.Fatal("accepted")
		}
	})
	t.Run("omitted channel mode and extension profile are fine", func(t *testing.T) {
		m := cardDoc(t)
		delete(m["supports"].(map[string]any), "user_channel_mode")
		m["supports"].(map[string]any)["profiles"] = []any{"xagent.im.v2", "example.custom.v1"}
		raw, _ := json.Marshal(m)
		if _, err := ParseCard(raw); err != nil {
			t.Fatal(err)
		}
	})
}

func descJSON(mod func(m map[string]any)) json.RawMessage {
	m := map[string]any{
		"schema": "xagent.connection/v2",
		"connection": map[string]any{
			"connector_card_id": "im.refconnector", "connector_id": "conn_1", "connector_channel_id": "cch_1",
			"target_type": "im", "profiles": []any{"xagent.im.v2"}, "status": "connected",
		},
		"target": map[string]any{"provider": "refim"},
		"tools": []any{
			map[string]any{"tool_id": "echo", "status": "available", "target_permission_state": "granted"},
			map[string]any{"tool_id": "slow_count", "status": "unavailable"},
			map[string]any{"tool_id": "always_fail", "status": "available", "target_permission_state": "denied"},
			map[string]any{"tool_id": "leak_key", "status": "available"},
		},
	}
	if mod != nil {
		mod(m)
	}
	raw, _ := json.Marshal(m)
	return raw
}

func TestParseDescriptor(t *testing.T) {
	card, err := ParseCard(connectortest.DefaultCard)
	if err != nil {
		t.Fatal(err)
	}
	d, dropped, err := ParseDescriptor(descJSON(nil), card, "cch_1")
	if err != nil || len(dropped) != 0 {
		t.Fatal(err, dropped)
	}
	av := d.availableTools()
	if !av["echo"] || av["slow_count"] || av["always_fail"] || !av["leak_key"] || len(av) != 2 {
		t.Errorf("available = %v", av)
	}
	conn := func(k string, v any) func(m map[string]any) {
		return func(m map[string]any) { m["connection"].(map[string]any)[k] = v }
	}
	bad := map[string]func(m map[string]any){
		"schema":           func(m map[string]any) { m["schema"] = "xagent.connection/v3" },
		"card id":          conn("connector_card_id", "im.other"),
		"connector id":     conn("connector_id", ""),
		"channel id":       conn("connector_channel_id", "cch_2"),
		"target type":      conn("target_type", "fax"),
		"profiles empty":   conn("profiles", []any{}),
		"profiles dup":     conn("profiles", []any{"xagent.im.v2", "xagent.im.v2"}),
		"profile not card": conn("profiles", []any{"xagent.device.v1"}),
		"status":           conn("status", "happy"),
		"provider":         func(m map[string]any) { m["target"] = map[string]any{} },
		"tool status":      func(m map[string]any) { m["tools"] = []any{map[string]any{"tool_id": "echo", "status": "great"}} },
		"tool permission": func(m map[string]any) {
			m["tools"] = []any{map[string]any{"tool_id": "echo", "status": "available", "target_permission_state": "maybe"}}
		},
		"tool id":    func(m map[string]any) { m["tools"] = []any{map[string]any{"status": "available"}} },
		"not object": func(m map[string]any) { m["connection"] = "x" },
	}
	for name, mod := range bad {
		if _, _, err := ParseDescriptor(descJSON(mod), card, "cch_1"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A tool absent from the Card is dropped, not projected.
	d, dropped, err = ParseDescriptor(descJSON(func(m map[string]any) {
		m["tools"] = append(m["tools"].([]any), map[string]any{"tool_id": "future_tool", "status": "available"})
	}), card, "cch_1")
	if err != nil || len(dropped) != 1 || d.availableTools()["future_tool"] {
		t.Errorf("unknown tool: err=%v dropped=%v", err, dropped)
	}
	// v1 descriptors are normalised.
	d, _, err = ParseDescriptor(descJSON(func(m map[string]any) {
		m["schema"] = "xagent.connection/v1"
		c := m["connection"].(map[string]any)
		delete(c, "profiles")
		c["profile"] = "xagent.im.v2"
	}), card, "cch_1")
	if err != nil || len(d.Connection.Profiles) != 1 {
		t.Errorf("v1: %v %+v", err, d)
	}
	// Not signed in: nothing is available, whatever the tools say.
	d, _, _ = ParseDescriptor(descJSON(conn("status", "created")), card, "cch_1")
	if len(d.availableTools()) != 0 || d.Authenticated() {
		t.Error("created channel projects tools")
	}
	d, _, _ = ParseDescriptor(descJSON(conn("status", "offline")), card, "cch_1")
	if !d.Authenticated() || d.Active() {
		t.Error("offline must be authenticated but inactive")
	}
}

func TestDecodePacket(t *testing.T) {
	ok := `{"schema":"xagent.connector.packet/v1","packet_id":"p1","request_id":"r1","type":"tool.invoke.ack","payload":{}}`
	if _, err := decodePacket([]byte(ok)); err != nil {
		t.Fatal(err)
	}
	bad := []string{
		`{`,
		`[]`,
		`{"schema":"x","packet_id":"p1","type":"ping","request_id":"r"}`,
		`{"schema":"xagent.connector.packet/v1","type":"ping","request_id":"r"}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p1","type":"Tool Invoke"}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p1","type":"tool.invoke.ack"}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p1","type":"connection.descriptor.push"}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p 1","type":"pong","request_id":"r"}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p1","type":"error"}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p1","type":"pong","request_id":7}`,
	}
	for _, b := range bad {
		if _, err := decodePacket([]byte(b)); err == nil {
			t.Errorf("accepted %s", b)
		}
	}
	p, err := decodePacket([]byte(`{"schema":"xagent.connector.packet/v1","packet_id":"p1","request_id":"r","type":"error","error":{"code":"bad code <script>","message":"x"}}`))
	if err != nil || p.Error.Code != "invalid_code" {
		t.Errorf("unsafe code kept: %v %+v", err, p)
	}
	// First channel.open carries an explicit empty channel id.
	raw, _ := json.Marshal(&Packet{Type: typeChannelOpen, channelScoped: true})
	if !strings.Contains(string(raw), `"connector_channel_id":""`) {
		t.Errorf("channel.open without explicit empty id: %s", raw)
	}
	raw, _ = json.Marshal(&Packet{Type: typeHello})
	if strings.Contains(string(raw), "connector_channel_id") {
		t.Errorf("hello carries a channel id: %s", raw)
	}
}

func TestStripAndInjectChannel(t *testing.T) {
	card, _ := ParseCard(connectortest.DefaultCard)
	tl, _ := card.Tool("echo")
	s, err := stripChannelArg(tl.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(s), "connector_channel_id") || !strings.Contains(string(s), `"required":["text"]`) {
		t.Errorf("stripped schema: %s", s)
	}
	tl, _ = card.Tool("always_fail")
	s, _ = stripChannelArg(tl.InputSchema)
	if strings.Contains(string(s), "required") {
		t.Errorf("empty required kept: %s", s)
	}
	a, err := injectChannel(json.RawMessage(`{"text":"<hi>","connector_channel_id":"spoofed"}`), "cch_real")
	if err != nil || string(a) != `{"connector_channel_id":"cch_real","text":"<hi>"}` {
		t.Errorf("inject: %s %v", a, err)
	}
	a, _ = injectChannel(nil, "c")
	if string(a) != `{"connector_channel_id":"c"}` {
		t.Errorf("inject into nothing: %s", a)
	}
}

func TestProjectionVersioning(t *testing.T) {
	card, _ := ParseCard(connectortest.DefaultCard)
	o := &Options{Endpoint: "im@agents.example.test"}
	d1, _, _ := ParseDescriptor(descJSON(nil), card, "cch_1")
	p1, err := project(o, card, Skill{Text: "guide", Name: "connector-im-refconnector"}, d1)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateManifest(p1.manifest); err != nil {
		t.Fatal(err)
	}
	p1b, _ := project(o, card, Skill{Text: "guide", Name: "connector-im-refconnector"}, d1)
	if p1.version != p1b.version || !bytes.Equal(p1.manifest, p1b.manifest) {
		t.Error("projection is not deterministic")
	}
	if !strings.HasPrefix(p1.version, "1.0.0-") {
		t.Errorf("version %s does not start with connector.version", p1.version)
	}
	if strings.Join(p1.tools, ",") != "echo,leak_key" {
		t.Errorf("tools %v", p1.tools)
	}
	d2, _, _ := ParseDescriptor(descJSON(func(m map[string]any) { m["tools"] = m["tools"].([]any)[:1] }), card, "cch_1")
	p2, _ := project(o, card, Skill{Text: "guide"}, d2)
	if p2.version == p1.version || strings.Join(p2.tools, ",") != "echo" {
		t.Errorf("availability change: %s vs %s, tools %v", p2.version, p1.version, p2.tools)
	}
	p3, _ := project(o, card, Skill{Text: "other guide"}, d1)
	if p3.version == p1.version {
		t.Error("skill change keeps the version")
	}
	card.Build.GitRev = "another"
	p4, _ := project(o, card, Skill{Text: "guide", Name: "connector-im-refconnector"}, d1)
	if p4.version == p1.version {
		t.Error("build change keeps the version")
	}
	// Long Skill text is cut to the description limit; odd versions are
	// mapped onto the grammar.
	card.Connector.Version = "1.0 beta/2+ü"
	p5, _ := project(o, card, Skill{Text: strings.Repeat("é", 9000)}, d1)
	if err := validateManifest(p5.manifest); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p5.version, "1.0-beta-2--") {
		t.Errorf("version %s", p5.version)
	}
	// No descriptor: a manifest with no tools.
	p6, _ := project(o, card, Skill{}, nil)
	if len(p6.tools) != 0 {
		t.Error("tools without a descriptor")
	}
}

func TestRedactor(t *testing.T) {
	r := backendkit.NewRedactor(nil)
	r.Add("sk-secret")
	r.Add("ab") // too short to scrub safely
	out, changed, err := r.ScrubJSON(json.RawMessage(`{"a":"Bearer sk-secret","b":["s\u006b-secret"],"sk-secret":1,"n":12345678901234567890}`))
	if err != nil || !changed {
		t.Fatal(err, changed)
	}
	if strings.Contains(string(out), "sk-secret") || !strings.Contains(string(out), "12345678901234567890") {
		t.Errorf("scrubbed: %s", out)
	}
	if got := displayText(r, "x\x1b[31m sk-secret\u202e", 100); strings.Contains(got, "sk-secret") || strings.ContainsRune(got, 0x1b) || strings.ContainsRune(got, '\u202e') {
		t.Errorf("display: %q", got)
	}
}

func TestBindingSchemaInvariants(t *testing.T) {
	db, err := store.Open(context.Background(), t.TempDir()+"/s.db", bindingsqlite.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Write.Exec(`INSERT INTO connector_bindings (endpoint, connector_card_id, auth_state) VALUES ('a@b.c', 'im.x', 'authenticated')`); err == nil {
		t.Error("an authenticated binding without a channel was accepted")
	}
	if _, err := db.Write.Exec(`INSERT INTO connector_bindings (endpoint, connector_card_id, auth_state) VALUES ('a@b.c', 'im.x', 'maybe')`); err == nil {
		t.Error("an unknown auth_state was accepted")
	}
	st := &bindingStore{d: bindingsqlite.New(db), endpoint: "a@b.c"}
	ctx := context.Background()
	g1, err := st.setChannel(ctx, "im.x", "cch_1", true)
	if err != nil || g1 != 1 {
		t.Fatalf("setChannel: %d %v", g1, err)
	}
	if g, _ := st.setChannel(ctx, "im.x", "cch_1", true); g != 1 {
		t.Errorf("an unchanged binding bumped the generation to %d", g)
	}
	if g, _ := st.setChannel(ctx, "im.x", "cch_1", false); g != 2 {
		t.Errorf("auth change: generation %d", g)
	}
	st.setConnectorID(ctx, "im.x", "conn_1")
	b, err := st.load(ctx, "im.x")
	if err != nil || b.ChannelID != "cch_1" || b.Authenticated || b.ConnectorID != "conn_1" || b.Generation != 2 {
		t.Errorf("load = %+v %v", b, err)
	}
}
