package connectorbridge

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentgw/agentgw/connectorbridge/wire"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit"
)

// BenchmarkEcho compares one echo call through the Backend (tasks.Run,
// channel injection, correlation, redaction, result mapping) with the same
// call made directly on the reference connector's WebSocket. The ratio
// backend/direct is the bridge's overhead.
func BenchmarkEcho(b *testing.B) {
	b.Run("backend", func(b *testing.B) {
		e := newEnv(b)
		be := e.start(nil)
		e.authForm()
		e.waitTools(4)
		testkit.WaitFor(b, 5*time.Second, "bound channel", func() bool { return be.Client().Descriptor().Active() })
		call := tasks.Call{TaskID: "task-bench-000000000000", Tool: "echo", Arguments: json.RawMessage(`{"text":"hello"}`)}
		ctx := context.Background()
		b.ResetTimer()
		for b.Loop() {
			r := newRun()
			be.Execute(ctx, call, r)
			if r.Failure != nil || r.Result == nil {
				b.Fatalf("echo failed: %+v", r.Failure)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		e := newEnv(b)
		ctx := context.Background()
		hdr := http.Header{"Authorization": {"Bearer " + e.apiKey}}
		ws, _, err := websocket.Dial(ctx, strings.Replace(e.srv.URL(), "http://", "ws://", 1)+"/ws",
			&websocket.DialOptions{HTTPHeader: hdr, Subprotocols: []string{wire.Subprotocol}})
		if err != nil {
			b.Fatal(err)
		}
		defer ws.CloseNow()
		n := 0
		rt := func(typ, ch string, payload any) map[string]any {
			n++
			id := "req_bench_" + strconv.Itoa(n)
			raw, _ := json.Marshal(payload)
			pkt := map[string]any{"schema": wire.PacketSchema, "packet_id": "pkt_bench_" + strconv.Itoa(n), "request_id": id, "type": typ, "payload": json.RawMessage(raw)}
			if typ != wire.TypeHello {
				pkt["connector_channel_id"] = ch
			}
			out, _ := json.Marshal(pkt)
			if err := ws.Write(ctx, websocket.MessageText, out); err != nil {
				b.Fatal(err)
			}
			for {
				_, data, err := ws.Read(ctx)
				if err != nil {
					b.Fatal(err)
				}
				var ack map[string]any
				json.Unmarshal(data, &ack)
				if ack["request_id"] == id {
					return ack
				}
			}
		}
		rt(wire.TypeHello, "", map[string]any{"connector_card_id": "im.refconnector", "connector_id": "", "protocol_version": "3.0",
			"supported_profiles": []string{wire.ProfileIMv2}})
		open := rt(wire.TypeChannelOpen, "", map[string]any{})
		ch := open["connector_channel_id"].(string)
		rt(wire.TypeAuthStart, ch, map[string]any{"flow_id": "token_form", "input": map[string]string{"account": "bench", "token": e.formToken}})
		b.ResetTimer()
		for b.Loop() {
			ack := rt(wire.TypeToolInvoke, ch, map[string]any{"tool_id": "echo",
				"arguments": map[string]any{"connector_channel_id": ch, "text": "hello"},
				"context":   map[string]any{"session_id": "task-bench", "tool_call_id": "call"}})
			if ack["type"] != "tool.invoke.ack" || ack["error"] != nil {
				b.Fatalf("echo failed: %v", ack)
			}
		}
	})
}
