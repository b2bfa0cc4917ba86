package hostile

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// hostileCase is one hostile input. run sends it and reports what came
// back: an IQ error condition, "result", "ignored", or "stream-closed
// (condition)" when the server ended the sender's stream. The reply (or
// whatever the server sent) must not contain marker.
type hostileCase struct {
	name, input string
	want        []string // acceptable outcomes, matched as prefixes
	run         func(t *testing.T, marker string) (outcome, reply string)
}

// TestHostileInputsThroughProsody sends hostile inputs through a real
// Prosody to the in-process gateway and checks each answer against the
// spec: the right stanza error or silence, nothing of the input reflected,
// and a gateway that still answers an ordinary call afterwards, on the same
// component session. It fails when the heap grows by more than 200 MB over
// the whole table.
func TestHostileInputsThroughProsody(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{
		Agents: []e2e.Agent{{Localpart: "weather"}, {Localpart: "regex"}},
		Users:  []string{"alice", "bob", "admin", "mallory"},
		Admins: []string{"admin"},
		TOML: `
[federation]
invoke_per_second = 100000
invoke_burst = 100000
input_per_second = 100000
input_burst = 100000
discovery_per_second = 100000
discovery_burst = 100000
schema_per_second = 100000
schema_burst = 100000
`,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	h := newHostile(t, e, ctx)

	cases := []hostileCase{
		{
			name: "oversize-3MiB", input: "invoke with 3 MiB of arguments (under Prosody's 4 MiB, over the gateway's 2 MiB)",
			want: []string{"resource-constraint"},
			run: func(t *testing.T, marker string) (string, string) {
				return h.invoke(t, h.alice, "weather", `{"message":"`+marker+strings.Repeat("a", 3<<20)+`"}`)
			},
		},
		{
			name: "oversize-5MiB", input: "invoke with 5 MiB of arguments (over Prosody's c2s limit)",
			want: []string{"stream-closed"},
			run: func(t *testing.T, marker string) (string, string) {
				_, conn := e.DialConn("mallory")
				return h.invoke(t, conn, "weather", `{"message":"`+marker+strings.Repeat("a", 5<<20)+`"}`)
			},
		},
		{
			name: "json-100k-members", input: "arguments object with 100,000 members (~0.9 MB)",
			want: []string{"resource-constraint"},
			run: func(t *testing.T, marker string) (string, string) {
				var b strings.Builder
				b.WriteString(`{"message":"` + marker + `"`)
				for i := 0; i < 100000; i++ {
					b.WriteString(`,"` + strconv.FormatInt(int64(i), 36) + `":0`)
				}
				b.WriteString("}")
				return h.invoke(t, h.alice, "weather", b.String())
			},
		},
		{
			name: "json-depth-10000", input: "arguments nested 10,000 arrays deep",
			want: []string{"resource-constraint"},
			run: func(t *testing.T, marker string) (string, string) {
				return h.invoke(t, h.alice, "weather", `{"message":"`+marker+`","x":`+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+`}`)
			},
		},
		{
			name: "xml-depth-10000", input: "invoke whose arguments hold elements nested 10,000 deep",
			want: []string{"resource-constraint", "stream-closed"},
			run: func(t *testing.T, marker string) (string, string) {
				_, conn := e.DialConn("mallory")
				inner := xmltree.New("urn:deep", "d").WithText(marker)
				for i := 0; i < 10000; i++ {
					inner = xmltree.New("urn:deep", "d").Add(inner)
				}
				iq := h.invokeIQ("weather", `{"message":"x"}`)
				iq.Children[0].Child(ns.Task, "arguments").Add(inner)
				return h.sendIQ(t, conn, iq)
			},
		},
		{
			name: "duplicate-keys", input: `{"message":"…","message":"x"}`,
			want: []string{"not-acceptable"},
			run: func(t *testing.T, marker string) (string, string) {
				return h.invoke(t, h.alice, "weather", `{"message":"`+marker+`","message":"x"}`)
			},
		},
		{
			name: "lone-surrogate", input: `{"message":"\ud800…"}`,
			want: []string{"not-acceptable"},
			run: func(t *testing.T, marker string) (string, string) {
				return h.invoke(t, h.alice, "weather", `{"message":"\ud800`+marker+`"}`)
			},
		},
		{
			name: "number-1e400", input: `{"message":"…","n":1e400}`,
			want: []string{"not-acceptable"},
			run: func(t *testing.T, marker string) (string, string) {
				return h.invoke(t, h.alice, "weather", `{"message":"`+marker+`","n":1e400}`)
			},
		},
		{
			// ECMA-262 patterns backtrack; the match timeout stops this one,
			// and a validation-time limit is resource-constraint.
			name: "schema-redos", input: `admin registers a version whose inputSchema has "pattern":"(a+)+$", then invoke with 100k 'a' + "!"`,
			want: []string{"resource-constraint (registered, activated; a matching call completed)"},
			run:  h.redos,
		},
		{
			name: "schema-remote-ref", input: `admin registers a manifest with "$ref":"https://evil.example/…"`,
			want: []string{"not-acceptable"},
			run: func(t *testing.T, marker string) (string, string) {
				m := manifestWith(t, "evilref@"+e.Domain, "1", `{"type":"object","properties":{"message":{"$ref":"https://evil.example/`+marker+`.json"}}}`)
				return h.admin(t, registerPayload(m))
			},
		},
		{
			name: "invalid-utf8", input: "raw bytes 0xFF 0xFE inside a message body",
			want: []string{"stream-closed"},
			run: func(t *testing.T, marker string) (string, string) {
				return h.raw(t, "<message to='weather@"+e.Domain+"'><body>"+marker+"\xff\xfe</body></message>")
			},
		},
		{
			name: "doctype-entities", input: "DOCTYPE with nested entity definitions (billion laughs) before an IQ",
			want: []string{"stream-closed"},
			run: func(t *testing.T, marker string) (string, string) {
				return h.raw(t, `<!DOCTYPE lol [<!ENTITY a "`+marker+`"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>`+
					`<iq type='get' id='x' to='`+e.Domain+`'><query xmlns='`+ns.DiscoInfo+`'>&c;</query></iq>`)
			},
		},
		{
			name: "undefined-entity", input: "an entity reference without any DTD",
			want: []string{"stream-closed"},
			run: func(t *testing.T, marker string) (string, string) {
				return h.raw(t, `<message to='weather@`+e.Domain+`'><body>`+marker+`&xxe;</body></message>`)
			},
		},
		{
			name: "foreign-event-to-endpoint", input: "message to the endpoint with <event xmlns='urn:evil'> naming a running task",
			want: []string{"ignored"},
			run: func(t *testing.T, marker string) (string, string) {
				return h.forgedToEndpoint(t, "urn:evil", marker)
			},
		},
		{
			name: "task-event-to-endpoint", input: "message to the endpoint with a task-namespace <event type='completed'> for the caller's running task",
			want: []string{"ignored"},
			run: func(t *testing.T, marker string) (string, string) {
				return h.forgedToEndpoint(t, ns.Task, marker)
			},
		},
		{
			name: "forged-event-from-client", input: "bob sends alice a task event for her running task (plain, and with from spoofed to the endpoint)",
			want: []string{"ignored"},
			run:  h.forgedFromClient,
		},
		{
			name: "replayed-revision", input: "the endpoint delivers one revision twice: same event-id, then a new event-id, each with another payload",
			want: []string{"ignored"},
			run:  h.replayedRevision,
		},
	}

	reconnects := e.Gateway.Component.Stats().Reconnects
	before := heapSample()
	stopPeak := h.watchPeak(before)
	var rows []string
	for i, c := range cases {
		marker := fmt.Sprintf("ZQXHOSTILE%02dMARK", i)
		t.Run(c.name, func(t *testing.T) {
			outcome, reply := c.run(t, marker)
			rows = append(rows, fmt.Sprintf("%-26s | %-40.40s | %s\n%29s reply: %.200s", c.name, outcome, c.input, "", oneLine(reply)))
			ok := false
			for _, w := range c.want {
				ok = ok || strings.HasPrefix(outcome, w)
			}
			if !ok {
				t.Errorf("outcome %q, want one of %q\nreply: %.2000s", outcome, c.want, reply)
			}
			if strings.Contains(reply, marker) {
				t.Errorf("the reply reflects the hostile input: %.2000s", reply)
			}
			if strings.Contains(e.Log.String(), marker) {
				t.Errorf("the gateway logged the hostile input")
			}
			h.stillServes(t, i)
			if got := e.Gateway.Component.Stats().Reconnects; got != reconnects {
				t.Errorf("the component session was lost (%d reconnects)", got-reconnects)
			}
		})
	}
	peakAlloc := stopPeak()
	after := heapSample()
	growth := int64(after) - int64(before)
	t.Logf("hostile input results (case | outcome | input):\n%s", strings.Join(rows, "\n"))
	t.Logf("heap: %.1f MB before, %.1f MB after (growth %+.1f MB), peak %.1f MB during the table",
		mb(before), mb(after), float64(growth)/(1<<20), mb(peakAlloc))
	if growth > 200<<20 {
		t.Errorf("heap grew by %.1f MB over the table; the bound is 200 MB", float64(growth)/(1<<20))
	}
}

// hostile holds the clients and pins the cases share.
type hostile struct {
	e     *e2e.Env
	ctx   context.Context
	alice *xmppclient.Client
	tap   *tapConn
	c     *agentclient.Client // alice's protocol client, reading through tap
	bob   *xmppclient.Client
	adm   *xmppclient.Client
	pins  map[string]*agentclient.Pinned
}

func newHostile(t *testing.T, e *e2e.Env, ctx context.Context) *hostile {
	h := &hostile{e: e, ctx: ctx, pins: map[string]*agentclient.Pinned{}}
	_, h.alice = e.DialConn("alice")
	h.tap = &tapConn{Client: h.alice}
	h.c = agentclient.New(h.tap, slog.New(slog.NewTextHandler(e2e.TestWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	h.c.IQTimeout = 20 * time.Second
	_, h.bob = e.DialConn("bob")
	_, h.adm = e.DialConn("admin")
	h.pin(t, "weather")
	return h
}

func (h *hostile) pin(t *testing.T, local string) *agentclient.Pinned {
	t.Helper()
	p, err := h.c.Pin(h.ctx, h.e.Endpoint(local), "echo")
	if err != nil {
		t.Fatalf("pin %s: %v", local, err)
	}
	h.pins[local] = p
	return p
}

// invokeIQ builds an invoke of echo pinned to the endpoint's manifest, with
// args as the literal JSON text.
func (h *hostile) invokeIQ(local, args string) *xmltree.Element {
	p := h.pins[local]
	inv := xmltree.New(ns.Task, "invoke", "api-version", p.Manifest.Version, "request-id", ids.New("req-"), "tool", "echo")
	inv.Add(xmltree.New(ns.Task, "manifest-hash").Add(xmltree.New(ns.Hashes, "hash", "algo", ns.HashAlgo).WithText(p.Manifest.Hash)))
	inv.Add(xmltree.New(ns.Task, "arguments", "media-type", ns.MediaJSON).WithText(args))
	return xmltree.New(xmppclient.NS, "iq", "type", "set", "to", h.e.Endpoint(local).String()).Add(inv)
}

func (h *hostile) invoke(t *testing.T, conn *xmppclient.Client, local, args string) (string, string) {
	return h.sendIQ(t, conn, h.invokeIQ(local, args))
}

// sendIQ reports the reply's condition ("result" for a result), or
// stream-closed when the server ended the stream instead.
func (h *hostile) sendIQ(t *testing.T, conn *xmppclient.Client, iq *xmltree.Element) (string, string) {
	t.Helper()
	reply, err := conn.SendIQ(h.ctx, iq)
	if err != nil {
		select {
		case <-conn.Done():
			return "stream-closed (" + streamCondition(conn.Err()) + ")", errString(conn.Err())
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("no reply and the stream is still open: %v", err)
	}
	if c := xmppclient.StanzaErrorCondition(reply); c != "" {
		return c, reply.String()
	}
	return reply.AttrValue("type"), reply.String()
}

// admin sends an administrative IQ set to the gateway as admin.
func (h *hostile) admin(t *testing.T, payload *xmltree.Element) (string, string) {
	t.Helper()
	return h.sendIQ(t, h.adm, xmltree.New(xmppclient.NS, "iq", "type", "set", "to", h.e.Domain).Add(payload))
}

func registerPayload(manifest string) *xmltree.Element {
	return xmltree.New(ns.API, "register").Add(xmltree.New(ns.API, "manifest", "media-type", ns.MediaJSON).WithText(manifest))
}

// manifestWith is DefaultManifest for ep at version, with echo's input
// schema replaced.
func manifestWith(t *testing.T, ep, version, echoSchema string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(e2e.DefaultManifest(ep)), &m); err != nil {
		t.Fatal(err)
	}
	m["agent"].(map[string]any)["version"] = version
	for _, tl := range m["tools"].([]any) {
		if tm := tl.(map[string]any); tm["name"] == "echo" {
			tm["inputSchema"] = json.RawMessage(echoSchema)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// redos registers and activates a version of regex@ whose echo schema has
// a catastrophic-backtracking pattern, then invokes it with the classic
// attack string. The validator must refuse it quickly (Go's regexp is
// linear), and a matching call must still complete.
func (h *hostile) redos(t *testing.T, marker string) (string, string) {
	t.Helper()
	ep := h.e.Endpoint("regex")
	m := manifestWith(t, ep.String(), "2.0.0", `{"type":"object","properties":{"message":{"type":"string","pattern":"(a+)+$"}},"required":["message"],"additionalProperties":false}`)
	reg, err := h.adm.SendIQ(h.ctx, xmltree.New(xmppclient.NS, "iq", "type", "set", "to", h.e.Domain).Add(registerPayload(m)))
	if err != nil {
		t.Fatal(err)
	}
	if c := xmppclient.StanzaErrorCondition(reg); c != "" {
		return c + " (registration refused)", reg.String()
	}
	hash := reg.Child(ns.API, "registered").Child(ns.Hashes, "hash").Text
	act := xmltree.New(ns.API, "activate", "jid", ep.String(), "version", "2.0.0").Add(xmltree.New(ns.Hashes, "hash", "algo", ns.HashAlgo).WithText(hash))
	if c, reply := h.admin(t, act); c != "result" {
		t.Fatalf("activate: %s %s", c, reply)
	}
	p := h.pin(t, "regex")
	if p.Manifest.Version != "2.0.0" {
		t.Fatalf("regex@ still serves version %s", p.Manifest.Version)
	}
	outcome, reply := h.invoke(t, h.alice, "regex", `{"message":"`+strings.Repeat("a", 100000)+"!"+marker+`"}`)
	out, err := h.c.Call(h.ctx, ep, "echo", json.RawMessage(`{"message":"aaaa"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" {
		t.Fatalf("a call matching the pattern did not complete: %v %+v", err, out)
	}
	return outcome + " (registered, activated; a matching call completed)", reply
}

// raw logs mallory in on a fresh stream and writes bytes no XML encoder
// would produce. The server must end that stream; what it sent back is the
// reply.
func (h *hostile) raw(t *testing.T, data string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	addr := jid.MustParse("mallory@" + h.e.Server.Domain + "/raw-" + ids.New(""))
	tcp, err := (&net.Dialer{}).DialContext(ctx, "tcp", h.e.Server.C2SAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	s, err := xmpp.NewClientSession(ctx, addr, tcp,
		xmpp.StartTLS(&tls.Config{ServerName: h.e.Server.Domain, InsecureSkipVerify: true}),
		xmpp.SASL("", e2e.Password+"mallory", sasl.ScramSha1, sasl.Plain),
		xmpp.BindResource())
	if err != nil {
		t.Fatalf("raw session: %v", err)
	}
	conn := s.Conn()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write([]byte(data)); err != nil {
		return "stream-closed (write failed)", ""
	}
	var got []byte
	buf := make([]byte, 4096)
	for len(got) < 1<<20 {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil || strings.Contains(string(got), "</stream:stream>") {
			break
		}
	}
	if !strings.Contains(string(got), "stream:error") && !strings.Contains(string(got), "</stream:stream>") {
		return "open", string(got)
	}
	return "stream-closed (" + streamCondition(errors.New(string(got))) + ")", string(got)
}

var streamCond = regexp.MustCompile(`<([a-z-]+) xmlns=['"]urn:ietf:params:xml:ns:xmpp-streams['"]`)

func streamCondition(err error) string {
	if err == nil {
		return "clean close"
	}
	if m := streamCond.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	s := err.Error()
	for _, c := range []string{"not-well-formed", "policy-violation", "restricted-xml", "invalid-xml", "connection reset"} {
		if strings.Contains(s, c) {
			return c
		}
	}
	return "no stream error"
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// startWait starts alice's wait task on weather and returns its ID, the
// revision of the first event, and the message ID that event came in.
func (h *hostile) startWait(t *testing.T) (taskID string, rev int64, msgID string) {
	t.Helper()
	p := h.pins["weather"]
	mark := h.tap.mark()
	acc, err := h.c.Invoke(h.ctx, p.Endpoint, &agentclient.InvokeRequest{Tool: "wait", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := h.c.State(ctx, p.Endpoint, acc.TaskID)
		if err == nil && !st.Terminal() {
			h.c.Cancel(ctx, p.Endpoint, acc.TaskID, st.Revision, nil)
		}
	})
	ev := h.tap.waitFor(t, mark, "the wait task's first event", func(m *xmltree.Element) bool {
		e := m.Child(ns.Task, "event")
		return e != nil && e.AttrValue("task-id") == acc.TaskID
	})
	rev, _ = strconv.ParseInt(ev.Child(ns.Task, "event").AttrValue("revision"), 10, 64)
	return acc.TaskID, rev, ev.AttrValue("id")
}

// forgedToEndpoint sends the endpoint an <event/> in space naming alice's
// running task. The gateway must ignore it: the task stays running at the
// same revision and nothing comes back. A bounce of an earlier event, sent
// next on the same route, is the barrier: the gateway handles one sender's
// messages in order and answers the bounce by re-sending that event to the
// bare JID, so once the re-send arrives the forged message was handled.
func (h *hostile) forgedToEndpoint(t *testing.T, space, marker string) (string, string) {
	t.Helper()
	taskID, _, eventMsgID := h.startWait(t)
	ep := h.e.Endpoint("weather")
	st, err := h.c.State(h.ctx, ep, taskID)
	if err != nil {
		t.Fatal(err)
	}
	mark := h.tap.mark()
	forged := xmltree.New(xmppclient.NS, "message", "to", ep.String(), "type", "normal", "id", ids.New("m-")).Add(
		xmltree.New(space, "event", "event-id", ids.New("ev-"), "revision", strconv.FormatInt(st.Revision+1, 10), "task-id", taskID, "type", "completed").
			WithText(`{"content":[{"type":"text","text":"` + marker + `"}],"isError":false}`))
	if err := h.alice.Send(h.ctx, forged); err != nil {
		t.Fatal(err)
	}
	bounce := xmltree.New(xmppclient.NS, "message", "to", ep.String(), "type", "error", "id", eventMsgID).Add(
		xmltree.New(xmppclient.NS, "error", "type", "cancel").Add(xmltree.New("urn:ietf:params:xml:ns:xmpp-stanzas", "recipient-unavailable")))
	if err := h.alice.Send(h.ctx, bounce); err != nil {
		t.Fatal(err)
	}
	h.tap.waitFor(t, mark, "the bounced event's re-send (the barrier)", func(m *xmltree.Element) bool {
		return m.AttrValue("id") == eventMsgID
	})
	var replies []string
	for _, m := range h.tap.since(mark) {
		if m.AttrValue("id") == eventMsgID {
			continue
		}
		// A late event of an earlier case's task (its cancellation, say)
		// is no answer to this one.
		if ev := m.Child(ns.Task, "event"); ev != nil && ev.AttrValue("task-id") != taskID {
			continue
		}
		replies = append(replies, m.String())
	}
	after, err := h.c.State(h.ctx, ep, taskID)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case after.State != st.State || after.Revision != st.Revision:
		return fmt.Sprintf("task moved: %s r%d -> %s r%d", st.State, st.Revision, after.State, after.Revision), strings.Join(replies, "\n")
	case len(replies) > 0:
		return "answered", strings.Join(replies, "\n")
	}
	return "ignored", ""
}

// forgedFromClient has bob send alice task events for her running task:
// once plain and once with from set to the endpoint (Prosody stamps bob's
// JID either way). alice's client must not deliver them as the endpoint's
// events. bob's plain message afterwards is the barrier: Prosody keeps one
// sender's order and the client handles messages in arrival order.
func (h *hostile) forgedFromClient(t *testing.T, marker string) (string, string) {
	t.Helper()
	taskID, rev, _ := h.startWait(t)
	ep := h.e.Endpoint("weather")
	events, stop := h.c.Subscribe(ep, taskID)
	defer stop()
	drain(events)
	mark := h.tap.mark()
	to := h.alice.JID().String()
	for i, from := range []string{"", ep.String()} {
		m := xmltree.New(xmppclient.NS, "message", "to", to, "type", "normal", "id", ids.New("m-"))
		if from != "" {
			m.SetAttr("from", from)
		}
		m.Add(xmltree.New(ns.Task, "event", "event-id", ids.New("ev-"), "revision", strconv.FormatInt(rev+int64(i)+1, 10), "task-id", taskID, "type", "completed").
			WithText(`{"content":[{"type":"text","text":"` + marker + `"}],"isError":false}`))
		if err := h.bob.Send(h.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	barrier := ids.New("barrier-")
	if err := h.bob.Send(h.ctx, xmltree.New(xmppclient.NS, "message", "to", to, "id", barrier).Add(xmltree.New(xmppclient.NS, "body").WithText("done"))); err != nil {
		t.Fatal(err)
	}
	h.tap.waitFor(t, mark, "bob's barrier message", func(m *xmltree.Element) bool { return m.AttrValue("id") == barrier })
	forged := 0
	for _, m := range h.tap.since(mark) {
		if m.Child(ns.Task, "event") != nil {
			forged++
			if f, _ := jid.Parse(m.AttrValue("from")); f.Bare().String() == ep.String() {
				t.Errorf("the server delivered bob's event as from the endpoint: %s", m)
			}
		}
	}
	if forged != 2 {
		t.Fatalf("alice received %d of bob's 2 forged events; the case proves nothing", forged)
	}
	var delivered []string
	for _, ev := range drain(events) {
		// The task's own events up to rev (its first, seen by the tap) can
		// reach the subscription late on a loaded machine; bob's forged ones
		// are rev+1 and rev+2.
		if ev.Revision <= rev {
			continue
		}
		delivered = append(delivered, fmt.Sprintf("r%d %s %s", ev.Revision, ev.Type, ev.Payload))
	}
	if len(delivered) > 0 {
		return "delivered as the endpoint's events", strings.Join(delivered, "\n")
	}
	return "ignored", ""
}

// replayedRevision has the gateway's own component session deliver, from
// the endpoint, a revision alice already has with a different payload:
// first under the same event-id, then under a new one. alice's client must
// keep the first and ignore both replays. A next revision is the barrier.
func (h *hostile) replayedRevision(t *testing.T, marker string) (string, string) {
	t.Helper()
	taskID, rev, _ := h.startWait(t)
	ep := h.e.Endpoint("weather")
	events, stop := h.c.Subscribe(ep, taskID)
	defer stop()
	drain(events)
	r := rev + 100
	evID := ids.New("ev-")
	send := func(eventID string, revision int64, payload string) {
		msg := xmltree.New("jabber:component:accept", "message", "type", "normal", "id", eventID,
			"from", ep.String(), "to", h.alice.JID().String()).Add(
			xmltree.New(ns.Task, "event", "event-id", eventID, "revision", strconv.FormatInt(revision, 10), "task-id", taskID, "type", "progress").WithText(payload))
		if err := h.e.Gateway.Component.Send(h.ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	send(evID, r, `{"message":"first"}`)
	send(evID, r, `{"message":"`+marker+`-same-id"}`)
	send(ids.New("ev-"), r, `{"message":"`+marker+`-new-id"}`)
	send(ids.New("ev-"), r+1, `{"message":"barrier"}`)
	var got []agentclient.Event
	deadline := time.After(20 * time.Second)
	for len(got) == 0 || got[len(got)-1].Revision != r+1 {
		select {
		case ev := <-events:
			got = append(got, ev)
		case <-deadline:
			t.Fatalf("the barrier event never arrived; got %+v", got)
		}
	}
	var atR []string
	for _, ev := range got {
		if ev.Revision == r {
			atR = append(atR, string(ev.Payload))
		}
	}
	switch {
	case len(atR) == 1 && atR[0] == `{"message":"first"}`:
		return "ignored", ""
	case len(atR) == 0:
		t.Fatalf("the first delivery of revision %d was lost", r)
	}
	return fmt.Sprintf("delivered %d payloads for one revision", len(atR)), strings.Join(atR, "\n")
}

func drain(ch <-chan agentclient.Event) []agentclient.Event {
	var out []agentclient.Event
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// stillServes runs an ordinary echo call after each case.
func (h *hostile) stillServes(t *testing.T, i int) {
	t.Helper()
	msg := fmt.Sprintf("still-alive-%d", i)
	out, err := h.c.Call(h.ctx, h.e.Endpoint("weather"), "echo", json.RawMessage(`{"message":"`+msg+`"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" || !strings.Contains(string(out.Payload), msg) {
		t.Fatalf("echo after the case: %v %+v", err, out)
	}
	if !h.e.Gateway.Component.Connected() {
		t.Fatal("the component is not connected")
	}
}

// watchPeak samples HeapAlloc until the returned function is called, which
// returns the highest value seen.
func (h *hostile) watchPeak(start uint64) func() uint64 {
	var peak atomic.Uint64
	peak.Store(start)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > peak.Load() {
					peak.Store(ms.HeapAlloc)
				}
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// heapSample returns HeapAlloc after a collection.
func heapSample() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func mb(n uint64) float64 { return float64(n) / (1 << 20) }

// oneLine shortens a reply for the results table: the <error/> of an error
// stanza, or the whole text on one line.
func oneLine(s string) string {
	if s == "" {
		return "(none)"
	}
	if i := strings.Index(s, "<error"); i >= 0 {
		s = s[i:]
	}
	return strings.Join(strings.Fields(s), " ")
}

// tapConn records every message alice's connection receives before the
// protocol client sees it.
type tapConn struct {
	*xmppclient.Client
	mu   sync.Mutex
	msgs []*xmltree.Element
}

func (c *tapConn) OnMessage(f func(*xmltree.Element)) {
	c.Client.OnMessage(func(m *xmltree.Element) {
		c.mu.Lock()
		c.msgs = append(c.msgs, m)
		c.mu.Unlock()
		f(m)
	})
}

func (c *tapConn) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

func (c *tapConn) since(mark int) []*xmltree.Element {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*xmltree.Element(nil), c.msgs[mark:]...)
}

func (c *tapConn) waitFor(t *testing.T, mark int, what string, match func(*xmltree.Element) bool) *xmltree.Element {
	t.Helper()
	var found *xmltree.Element
	testkit.WaitFor(t, 20*time.Second, what, func() bool {
		for _, m := range c.since(mark) {
			if match(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}
