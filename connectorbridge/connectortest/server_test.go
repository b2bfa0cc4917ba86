package connectortest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

const key = "sk-reference-test-key"

func get(t *testing.T, url, bearer string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestControlPlane(t *testing.T) {
	s, err := Start(Options{APIKey: key, PathPrefix: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c := get(t, s.URL()+"/connector-card.json", ""); c != 200 {
		t.Errorf("card without key: %d", c)
	}
	if c := get(t, s.URL()+"/skill.md", ""); c != 200 {
		t.Errorf("skill: %d", c)
	}
	if c := get(t, s.URL()+"/health", ""); c != 401 {
		t.Errorf("health without key: %d", c)
	}
	if c := get(t, s.URL()+"/health", "wrong"); c != 401 {
		t.Errorf("health with a wrong key: %d", c)
	}
	if c := get(t, s.URL()+"/health", key); c != 200 {
		t.Errorf("health: %d", c)
	}
	if c := get(t, s.URL()+"/ws", ""); c != 401 {
		t.Errorf("ws without key: %d", c)
	}
}

type wsClient struct {
	t  *testing.T
	ws *websocket.Conn
	n  int
}

func dial(t *testing.T, s *Server, protos ...string) *wsClient {
	t.Helper()
	ws, _, err := websocket.Dial(context.Background(), strings.Replace(s.URL(), "http", "ws", 1)+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}, Subprotocols: protos})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return &wsClient{t: t, ws: ws}
}

func (c *wsClient) send(typ string, ch *string, payload any) map[string]any {
	c.t.Helper()
	c.n++
	raw, _ := json.Marshal(payload)
	p := packet{Schema: envelopeSchema, PacketID: "p" + string(rune('a'+c.n)), RequestID: "r" + string(rune('a'+c.n)),
		Type: typ, ConnectorChannelID: ch, Payload: raw}
	out, _ := json.Marshal(p)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, out); err != nil {
		c.t.Fatal(err)
	}
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			c.t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(data, &m)
		if m["request_id"] == p.RequestID {
			return m
		}
	}
}

func code(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func payload(m map[string]any) map[string]any {
	p, _ := m["payload"].(map[string]any)
	return p
}

func hello(id, proto string, profiles any) map[string]any {
	h := map[string]any{"connector_card_id": "im.refconnector", "connector_id": id, "protocol_version": proto}
	if profiles != nil {
		h["supported_profiles"] = profiles
	}
	return h
}

func TestHelloRules(t *testing.T) {
	s, err := Start(Options{APIKey: key, LeaseGrace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	c := dial(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, _, err := c.ws.Read(ctx); err == nil {
		t.Error("a data plane without the subprotocol was kept open")
	}

	c = dial(t, s, subprotocol)
	ch := ""
	if got := code(c.send("channel.open", &ch, nil)); got != "hello_required" {
		t.Errorf("user-level before hello: %q", got)
	}
	if got := code(c.send("connector.hello", nil, map[string]any{"connector_card_id": "im.other", "protocol_version": "3.0", "supported_profiles": []string{}})); got != "connector_card_id_mismatch" {
		t.Errorf("card mismatch: %q", got)
	}
	if got := code(c.send("connector.hello", nil, hello("", "2.0", []string{"xagent.im.v2"}))); got != "invalid_packet" {
		t.Errorf("protocol 2.0: %q", got)
	}
	if got := code(c.send("connector.hello", nil, hello("", "", []string{"xagent.im.v2"}))); got != "invalid_packet" {
		t.Errorf("protocol omitted: %q", got)
	}
	if got := code(c.send("connector.hello", nil, hello("", "3.0", nil))); got != "invalid_packet" {
		t.Errorf("no supported_profiles: %q", got)
	}
	ack := c.send("connector.hello", nil, hello("", "3.0", []string{"xagent.im.v2"}))
	id, _ := payload(ack)["connector_id"].(string)
	if ack["type"] != "connector.hello.ack" || id == "" || payload(ack)["protocol_version"] != "3.0" {
		t.Fatalf("hello ack = %v", ack)
	}
	open := c.send("channel.open", &ch, map[string]any{})
	chID, _ := open["connector_channel_id"].(string)
	d := payload(open)["connection_descriptor"].(map[string]any)["connection"].(map[string]any)
	if chID == "" || d["status"] != "created" || d["connector_channel_id"] != chID {
		t.Fatalf("open = %v", open)
	}
	if got := code(c.send("tool.invoke", &chID, map[string]any{"tool_id": "echo", "arguments": map[string]any{}})); got != "connection_not_authenticated" {
		t.Errorf("invoke before auth: %q", got)
	}
	other := "cch_unknown"
	if got := code(c.send("connection.descriptor.get", &other, nil)); got != "connection_not_found" {
		t.Errorf("unknown channel: %q", got)
	}
	c.ws.CloseNow()

	// Reconnect within the lease: same connector_id, channel reused.
	c = dial(t, s, subprotocol)
	if got := payload(c.send("connector.hello", nil, hello(id, "3.0", []string{"xagent.im.v2"})))["connector_id"]; got != id {
		t.Errorf("within the lease: %v, want %s", got, id)
	}
	if got := c.send("channel.open", &chID, map[string]any{})["connector_channel_id"]; got != chID {
		t.Errorf("channel not reused: %v", got)
	}
	c.ws.CloseNow()

	// After the lease: a new runtime instance, the channel is gone.
	time.Sleep(300 * time.Millisecond)
	c = dial(t, s, subprotocol)
	if got := payload(c.send("connector.hello", nil, hello(id, "3.0", []string{"xagent.im.v2"})))["connector_id"]; got == id || got == "" {
		t.Errorf("after the lease: %v", got)
	}
	if got := c.send("channel.open", &chID, map[string]any{})["connector_channel_id"]; got == chID {
		t.Error("an expired channel was reused")
	}
}
