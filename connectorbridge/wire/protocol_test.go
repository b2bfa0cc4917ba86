package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/connectortest"
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
	if got := EndpointURL(u, "/health"); got != "https://conn.example/prefix/health" {
		t.Errorf("endpoint under prefix: %s", got)
	}
	if got := WSURL(u); got != "wss://conn.example/prefix/ws" {
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

func TestParseDescriptor(t *testing.T) {
	card, err := ParseCard(connectortest.DefaultCard)
	if err != nil {
		t.Fatal(err)
	}
	d, dropped, err := ParseDescriptor(connectortest.DescriptorJSON(nil), card, "cch_1")
	if err != nil || len(dropped) != 0 {
		t.Fatal(err, dropped)
	}
	av := d.AvailableTools()
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
		if _, _, err := ParseDescriptor(connectortest.DescriptorJSON(mod), card, "cch_1"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A tool absent from the Card is dropped, not projected.
	d, dropped, err = ParseDescriptor(connectortest.DescriptorJSON(func(m map[string]any) {
		m["tools"] = append(m["tools"].([]any), map[string]any{"tool_id": "future_tool", "status": "available"})
	}), card, "cch_1")
	if err != nil || len(dropped) != 1 || d.AvailableTools()["future_tool"] {
		t.Errorf("unknown tool: err=%v dropped=%v", err, dropped)
	}
	// v1 descriptors are normalised.
	d, _, err = ParseDescriptor(connectortest.DescriptorJSON(func(m map[string]any) {
		m["schema"] = "xagent.connection/v1"
		c := m["connection"].(map[string]any)
		delete(c, "profiles")
		c["profile"] = "xagent.im.v2"
	}), card, "cch_1")
	if err != nil || len(d.Connection.Profiles) != 1 {
		t.Errorf("v1: %v %+v", err, d)
	}
	// Not signed in: nothing is available, whatever the tools say.
	d, _, _ = ParseDescriptor(connectortest.DescriptorJSON(conn("status", "created")), card, "cch_1")
	if len(d.AvailableTools()) != 0 || d.Authenticated() {
		t.Error("created channel projects tools")
	}
	d, _, _ = ParseDescriptor(connectortest.DescriptorJSON(conn("status", "offline")), card, "cch_1")
	if !d.Authenticated() || d.Active() {
		t.Error("offline must be authenticated but inactive")
	}
}

func TestDecodePacket(t *testing.T) {
	ok := `{"schema":"xagent.connector.packet/v1","packet_id":"p1","request_id":"r1","type":"tool.invoke.ack","payload":{}}`
	if _, err := DecodePacket([]byte(ok)); err != nil {
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
		if _, err := DecodePacket([]byte(b)); err == nil {
			t.Errorf("accepted %s", b)
		}
	}
	p, err := DecodePacket([]byte(`{"schema":"xagent.connector.packet/v1","packet_id":"p1","request_id":"r","type":"error","error":{"code":"bad code <script>","message":"x"}}`))
	if err != nil || p.Error.Code != "invalid_code" {
		t.Errorf("unsafe code kept: %v %+v", err, p)
	}
	// First channel.open carries an explicit empty channel id.
	raw, _ := json.Marshal(&Packet{Type: TypeChannelOpen, ChannelScoped: true})
	if !strings.Contains(string(raw), `"connector_channel_id":""`) {
		t.Errorf("channel.open without explicit empty id: %s", raw)
	}
	raw, _ = json.Marshal(&Packet{Type: TypeHello})
	if strings.Contains(string(raw), "connector_channel_id") {
		t.Errorf("hello carries a channel id: %s", raw)
	}
}
