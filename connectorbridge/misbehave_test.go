package connectorbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/connectorbridge/wire"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit"
)

// TestMisbehaviourSwitches turns on each misbehaviour of the reference
// connector: every one must produce a clear log line, fail what it breaks
// with a stable code, never crash, and the bridge must recover once the
// connector behaves again.
func TestMisbehaviourSwitches(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		m        connectortest.Misbehaviour
		hello    bool   // breaks the handshake: applied on reconnect
		wantLog  string // a clear log line
		wantCode string // "" means the echo call still succeeds
	}{
		{"wrong card id in hello ack", connectortest.Misbehaviour{WrongCardIDInAck: true}, true,
			"connector.hello.ack: connector_card_id does not match the Connector Card", agentproto.CodeUnavailable},
		{"protocol 2.0 in hello ack", connectortest.Misbehaviour{Protocol20: true}, true,
			"protocol_version 2.0 is below the admission floor 3.0", agentproto.CodeUnavailable},
		{"malformed JSON", connectortest.Misbehaviour{MalformedJSON: true}, false,
			"ignoring a malformed JSON packet", ""},
		{"oversized packet", connectortest.Misbehaviour{OversizedPackets: true}, false,
			"a packet exceeds the size limit; closing the connection", agentproto.CodeUnavailable},
		{"disconnect mid-invoke", connectortest.Misbehaviour{DisconnectMidInvoke: true}, false,
			"data plane lost during a tool call", agentproto.CodeUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			b := e.start(func(o *Options) { o.ReadyWait = 500 * time.Millisecond })
			e.authForm()
			e.waitTools(4)
			testkit.WaitFor(t, 5*time.Second, "bound channel", func() bool { return b.Client().Descriptor().Active() })

			e.srv.SetMisbehaviour(c.m)
			if c.hello {
				e.srv.DropConnections()
				testkit.WaitFor(t, 5*time.Second, "the log line", func() bool { return strings.Contains(e.logs.String(), c.wantLog) })
				// The drop withdraws availability from the projector
				// goroutine, which may run after the log line appears.
				e.waitAvailable(false, "the agent without a valid hello to be unavailable")
			}
			r := e.call("echo", `{"text":"probe"}`)
			_, fail, _, _ := r.Snapshot()
			switch {
			case c.wantCode == "" && fail != nil:
				t.Errorf("call failed: %+v", fail)
			case c.wantCode != "" && (fail == nil || fail.Code != c.wantCode):
				t.Errorf("failure = %+v, want %s", fail, c.wantCode)
			}
			testkit.WaitFor(t, 5*time.Second, "the log line", func() bool { return strings.Contains(e.logs.String(), c.wantLog) })

			e.srv.SetMisbehaviour(connectortest.Misbehaviour{})
			testkit.WaitFor(t, 10*time.Second, "recovery", func() bool { return b.Client().Descriptor().Active() })
			if _, fail, _, _ := e.call("echo", `{"text":"again"}`).Snapshot(); fail != nil {
				t.Fatalf("no recovery: %+v", fail)
			}
			if c.m.OversizedPackets || c.m.DisconnectMidInvoke {
				n := 0
				for _, inv := range e.srv.Invocations() {
					if inv.ToolID == "echo" {
						n++
					}
				}
				if n != 2 {
					t.Errorf("echo invoked %d times, want 2 (no automatic re-send)", n)
				}
			}
		})
	}
}

// TestSecretsNeverLeak runs authentication, every tool and the failure
// paths, then greps the gateway and connector logs, the database files,
// the manifests, the results and the auth output for the API key and the
// form secret.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	var outputs bytes.Buffer
	outputs.WriteString(e.authForm())

	// A failed form attempt with another secret must not leak either.
	wrong := randomSecret("wrong-")
	c := e.client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Auth(ctx, "token_form", map[string]string{"account": "mallory", "token": wrong}, &outputs)
	if err != nil {
		outputs.WriteString(err.Error())
	}
	c.Close()

	e.waitTools(4)
	var results bytes.Buffer
	record := func(r *recRun) {
		res, fail, reason, prog := r.Snapshot()
		json.NewEncoder(&results).Encode(struct {
			R *tasks.ToolResult
			F *tasks.Failure
			C string
			P []tasks.Progress
		}{res, fail, reason, prog})
	}
	leak := e.call("leak_key", `{}`)
	record(leak)
	res, fail, _, _ := leak.Snapshot()
	if fail != nil || !strings.Contains(string(res.StructuredContent), "[redacted]") {
		t.Fatalf("leak_key: %+v %+v", res, fail)
	}
	if !strings.Contains(e.logs.String(), "contained the system API key; redacted") {
		t.Error("no warning for the leaked key")
	}
	record(e.call("echo", `{"text":"hi"}`))
	record(e.call("always_fail", `{}`))
	record(e.call("slow_count", `{"steps":3,"delay_ms":5}`))

	// Error paths: a wrong key in health and doctor output.
	e.srv.SetMisbehaviour(connectortest.Misbehaviour{HealthStatus: 401})
	testkit.WaitFor(t, 5*time.Second, "unauthorized", func() bool { return b.Client().HealthState() == HealthUnauthorized })
	if err := b.Health(context.Background()); err != nil {
		outputs.WriteString(err.Error())
	}
	e.srv.SetMisbehaviour(connectortest.Misbehaviour{})

	haystacks := map[string]string{
		"gateway log":   e.logs.String(),
		"connector log": e.srvLogs.String(),
		"database":      string(dirBytes(t, e.dir)),
		"results":       results.String(),
		"auth output":   outputs.String(),
	}
	for _, m := range e.pub.all() {
		haystacks["manifests"] += string(m)
	}
	for where, h := range haystacks {
		for name, secret := range map[string]string{"API key": e.apiKey, "form secret": e.formToken, "wrong form secret": wrong} {
			if n := strings.Count(h, secret); n != 0 {
				t.Errorf("%s appears %d times in the %s", name, n, where)
			}
		}
	}
	if len(haystacks["database"]) < 1000 || !strings.Contains(haystacks["database"], "im.refconnector") {
		t.Error("the database bytes were not captured")
	}
}

// TestBadPacketsNoCrash feeds the data plane invalid packets through a
// real WebSocket: binary frames, wrong schemas, unknown types, inbound
// messages; the bridge answers with error packets and keeps working.
func TestBadPacketsNoCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.authForm()
	e.waitTools(4)
	testkit.WaitFor(t, 5*time.Second, "bound channel", func() bool { return b.Client().Descriptor().Active() })
	s, chID, _, _ := b.Client().live()
	for _, raw := range []string{
		`not json at all`,
		`{"schema":"nope","packet_id":"p1","type":"ping","request_id":"r1"}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p2","type":"weird.thing","request_id":"r2"}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p3","type":"message.push","connector_channel_id":"` + chID + `","payload":{"text":"hi"}}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p4","type":"connection.descriptor.push","connector_channel_id":"` + chID + `","payload":{"connection_descriptor":{"schema":"xagent.connection/v2","connection":{"connector_card_id":"im.other"}}}}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p5","type":"connection.descriptor.push","connector_channel_id":"cch_not_mine","payload":{}}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p6","type":"tool.invoke.ack","request_id":"unknown","payload":{}}`,
		`{"schema":"xagent.connector.packet/v1","packet_id":"p7","type":"error","error":{"code":"something_odd","message":"x"}}`,
	} {
		// Inject as if the connector had sent it.
		if p, err := wire.DecodePacket([]byte(raw)); err == nil {
			s.Dispatch(p)
		} else {
			s.Bad(err.Error())
		}
	}
	if !b.Client().Descriptor().Active() {
		t.Error("an identity-mismatched descriptor push was applied")
	}
	logs := e.logs.String()
	for _, want := range []string{"ignoring malformed JSON", "invalid packet envelope", "unsupported packet type", "bridges tools only", "ignoring an invalid connection.descriptor.push", "connector sent an error packet"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no log line %q", want)
		}
	}
	if _, fail, _, _ := e.call("echo", `{"text":"still fine"}`).Snapshot(); fail != nil {
		t.Fatalf("call after bad packets: %+v", fail)
	}
}
