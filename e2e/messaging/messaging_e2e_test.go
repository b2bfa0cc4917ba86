package messaging

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// echoChat is a test-only Conversant (a wiring test of the messaging
// service, not the proof of a real conversing bridge): for each turn it
// sends composing, acks the turn, sends paused, then replies.
type echoChat struct {
	*taskstest.Executor
	mu    sync.Mutex
	chat  backendkit.Chat
	turns []backendkit.Turn
}

var (
	_ backendkit.Conversant   = (*echoChat)(nil)
	_ backendkit.ChatAttacher = (*echoChat)(nil)
	_ tasks.Backend           = (*echoChat)(nil)
)

func newEchoChat() *echoChat { return &echoChat{Executor: e2e.DefaultExecutor()} }

func (b *echoChat) CanConverse(string) bool { return true }

func (b *echoChat) AttachChat(c backendkit.Chat) {
	b.mu.Lock()
	b.chat = c
	b.mu.Unlock()
}

func (b *echoChat) Chat() backendkit.Chat {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.chat
}

func (b *echoChat) Turns() []backendkit.Turn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]backendkit.Turn(nil), b.turns...)
}

// Converse answers synchronously (on the messaging worker, not the
// stanza handler), so replies keep the order of the turns.
func (b *echoChat) Converse(ctx context.Context, t backendkit.Turn) error {
	b.mu.Lock()
	b.turns = append(b.turns, t)
	c := b.chat
	b.mu.Unlock()
	if t.Body == "refuse" {
		return backendkit.ErrChatUnavailable
	}
	act := func(s backendkit.ChatState) error {
		return c.Activity(ctx, backendkit.Activity{Endpoint: t.Endpoint, Resource: t.Resource, To: t.From, State: s})
	}
	if err := act(backendkit.ChatComposing); err != nil {
		return err
	}
	if err := c.Ack(ctx, backendkit.Ack{Endpoint: t.Endpoint, Resource: t.Resource, To: t.From, ID: t.ID}); err != nil {
		return err
	}
	if err := act(backendkit.ChatPaused); err != nil {
		return err
	}
	m := backendkit.Message{Endpoint: t.Endpoint, Resource: t.Resource, To: t.From, ReplyTo: t.ID, Thread: t.Thread, Store: true}
	switch {
	case t.Answer != nil:
		var kv []string
		for k, v := range t.Answer {
			kv = append(kv, k+"="+strings.Join(v, ","))
		}
		sort.Strings(kv)
		m.Body = "echo: answer: " + t.QuestionID + " " + strings.Join(kv, " ")
	case t.Body == "hostile":
		m.Body = "bad\x01 \uFFFE <i>not markup</i>"
	case t.Body == "ask":
		m.Question = &backendkit.Question{ID: "q-" + t.ID, Title: "Which unit?", Fields: []backendkit.QuestionField{
			{Var: "unit", Type: "list-single", Label: "Unit", Options: []string{"C", "F"}, Required: true},
		}}
	default:
		m.Body = "echo: " + t.Body
		for _, f := range t.Files {
			m.Body += fmt.Sprintf(" files: %s %s", f.URL, f.Name)
		}
	}
	return c.Send(ctx, m)
}

// messagingEnv starts the gateway on srv with a conversing endpoint "chat"
// (echoChat) and, with mcp, the reference MCP server as "everything" (an
// endpoint that cannot converse).
func messagingEnv(t *testing.T, srv *xmppharness.Server, mcp bool) (*e2e.Env, *echoChat) {
	t.Helper()
	b := newEchoChat()
	chatEP := "chat@" + srv.ComponentDomain
	toml := `
[messaging]
max_body_bytes = 2048
per_conversation_per_second = 2
per_conversation_burst = 20
`
	if mcp {
		toml = e2e.EverythingTOML(t, "everything", srv.ComponentDomain) + toml
	}
	e := e2e.Start(t, e2e.Options{
		Server:   srv,
		Users:    []string{"alice", "bob"},
		Agents:   []e2e.Agent{{Localpart: "chat"}},
		Backends: map[string]tasks.Backend{chatEP: b},
		TOML:     toml,
	})
	if mcp {
		testkit.WaitFor(t, 90*time.Second, "the MCP endpoint to be active", func() bool {
			_, ok := e.Gateway.Registry.Active(e.Endpoint("everything").String())
			return ok
		})
	}
	return e, b
}

// TestSlixmppMessaging: a person (slixmpp) chats with a conversing
// endpoint and with one that cannot converse, through real Prosody.
func TestSlixmppMessaging(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e, b := messagingEnv(t, srv, true)
	checks := e2e.RunSlixmpp(t, e, "chat.py", "alice",
		"--chat", e.Endpoint("chat").String(), "--tools", e.Endpoint("everything").String(),
		"--missing", e.Endpoint("nobody").String(), "--max-body", "2048")
	e2e.RequireChecks(t, checks, "disco", "not-conversing", "presence-subscribe", "receipt-and-chat-states",
		"no-receipt-unrequested", "task-payload-not-a-turn", "dedup", "markup-is-text", "oversize",
		"question-form", "files", "flood", "xml-illegal-closed")

	var dup string
	for _, c := range checks {
		if c["check"] == "dedup" {
			dup = c["dup"].(string)
		}
	}
	turns := b.Turns()
	n := 0
	for _, tr := range turns {
		if tr.ID == dup {
			n++
		}
		if strings.Contains(tr.Body, "task?") {
			t.Errorf("a message with a task payload became a turn: %+v", tr)
		}
		if tr.Body == "<b>bold</b> & \"q\" <![CDATA[x]]>" {
			continue
		}
		if !xmltree.ValidText(tr.Body) {
			t.Errorf("a turn body is not valid XML text: %q", tr.Body)
		}
	}
	if n != 1 {
		t.Fatalf("the message sent three times reached the backend %d times", n)
	}
	markup := false
	for _, tr := range turns {
		if tr.Body == "<b>bold</b> & \"q\" <![CDATA[x]]>" {
			markup = true
		}
	}
	if !markup {
		t.Error("the markup body did not reach the backend as the same text")
	}
	for _, tr := range b.Turns() {
		if strings.Contains(tr.Body, "bad") && strings.Contains(tr.Body, "char") {
			t.Errorf("the XML-illegal message reached the backend: %q", tr.Body)
		}
	}
	// The gateway still chats after the hostile client was cut off.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, bob := e.DialConn("bob")
	replied := make(chan string, 8)
	bob.OnMessage(func(m *xmltree.Element) {
		if body := m.Child("", "body"); body != nil {
			replied <- body.Text
		}
	})
	m := xmltree.New(ns.Client, "message", "type", "chat", "to", e.Endpoint("chat").String(), "id", "bob-1")
	m.Add(xmltree.New(ns.Client, "body").WithText("still there?"))
	if err := bob.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-replied:
		if got != "echo: still there?" {
			t.Fatalf("bob got %q", got)
		}
	case <-ctx.Done():
		t.Fatal("no reply after the hostile client")
	}
	// This Prosody runs without mod_blocklist: the gateway says so.
	testkit.WaitFor(t, 30*time.Second, "the warning about a server without XEP-0191", func() bool {
		return strings.Contains(e.Log.String(), "does not advertise XEP-0191 blocking")
	})
	st := e.Gateway.Messaging.Stats()
	logged := strings.Count(e.Log.String(), "reason=rate")
	t.Logf("messaging stats %+v; rate drops logged %d times", st, logged)
	if st.Dropped < 30 {
		t.Errorf("only %d messages dropped in a flood of 60", st.Dropped)
	}
	if logged < 1 || logged > 2 {
		t.Errorf("the flood's rate drops were logged %d times, want once per burst", logged)
	}
}

// TestMessagingBlocking: Prosody's mod_blocklist enforces an XEP-0191
// block of an endpoint JID for stanzas the component originates (checked
// here), and the gateway stops messaging a peer whose server bounced a
// message until the peer writes again.
func TestMessagingBlocking(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{Modules: []string{"blocklist"}})
	checkBlocking(t, srv)
}

// TestMessagingBlockingEjabberd is the same check against ejabberd with
// mod_blocking (over mod_privacy).
func TestMessagingBlockingEjabberd(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartEjabberd(t, xmppharness.EjabberdOptions{Modules: []string{"mod_privacy", "mod_blocking"}})
	checkBlocking(t, srv)
}

func checkBlocking(t *testing.T, srv *xmppharness.Server) {
	e, b := messagingEnv(t, srv, false)
	testkit.WaitFor(t, 30*time.Second, "the gateway to find the server's XEP-0191 support", func() bool {
		return strings.Contains(e.Log.String(), "the XMPP server advertises XEP-0191 blocking")
	})
	if strings.Contains(e.Log.String(), "does not advertise XEP-0191") {
		t.Error("warned about missing blocking on a server that blocks")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, alice := e.DialConn("alice")
	var mu sync.Mutex
	var bodies []string
	alice.OnMessage(func(m *xmltree.Element) {
		if body := m.Child("", "body"); body != nil {
			mu.Lock()
			bodies = append(bodies, body.Text)
			mu.Unlock()
		}
	})
	got := func(s string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range bodies {
			if b == s {
				return true
			}
		}
		return false
	}
	ep := e.Endpoint("chat")
	say := func(body string) {
		t.Helper()
		m := xmltree.New(ns.Client, "message", "type", "chat", "to", ep.String(), "id", "m-"+strings.ReplaceAll(body, " ", "-"))
		m.Add(xmltree.New(ns.Client, "body").WithText(body))
		if err := alice.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	blocking := func(op string) {
		t.Helper()
		iq := xmltree.New(ns.Client, "iq", "type", "set", "id", "b-"+op)
		iq.Add(xmltree.New("urn:xmpp:blocking", op).Add(xmltree.New("urn:xmpp:blocking", "item", "jid", ep.String())))
		if _, err := alice.SendIQ(ctx, iq); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	say("hello")
	testkit.WaitFor(t, 30*time.Second, "the reply to hello", func() bool { return got("echo: hello") })
	full := b.Turns()[0].From
	chat := b.Chat()
	send := func(to, body string) error {
		return chat.Send(ctx, backendkit.Message{Endpoint: ep.String(), To: to, Body: body})
	}

	blocking("block")
	// To the full JID of a session Prosody drops silently (its #690).
	if err := send(full, "while blocked (full)"); err != nil {
		t.Fatalf("send while blocked: %v", err)
	}
	// To the bare JID Prosody bounces service-unavailable; the gateway
	// reads the bounce and refuses further messages.
	if err := send(alice.JID().Bare().String(), "while blocked (bare)"); err != nil {
		t.Fatalf("send while blocked: %v", err)
	}
	testkit.WaitFor(t, 30*time.Second, "the gateway to refuse after the bounce", func() bool {
		return errors.Is(send(full, "probe after bounce"), backendkit.ErrChatRefused)
	})
	for _, l := range strings.Split(e.Log.String(), "\n") {
		if strings.Contains(l, "chat recipient bounced") {
			t.Logf("%s: %s", srv.Kind, l)
		}
	}
	blocking("unblock")
	if err := send(full, "refused until alice writes"); !errors.Is(err, backendkit.ErrChatRefused) {
		t.Fatalf("send after the bounce, before alice wrote: %v, want ErrChatRefused", err)
	}
	say("again")
	testkit.WaitFor(t, 30*time.Second, "the reply to again", func() bool { return got("echo: again") })
	// The stream is ordered: whatever was delivered while blocked would
	// have arrived before the reply to "again".
	for _, s := range []string{"while blocked (full)", "while blocked (bare)", "probe after bounce", "refused until alice writes"} {
		if got(s) {
			t.Errorf("%q reached alice although she blocked the endpoint", s)
		}
	}
	// Before the reply to "again" only the reply to "hello" arrived.
	mu.Lock()
	t.Logf("alice received %q", bodies)
	mu.Unlock()
}

// TestMessagingThroughConnector is the Human Messaging proof with a real
// conversing backend: the connector bridge's IM Profile v2 behind the
// reference connector, `agentgw serve`, Prosody, and slixmpp as the human
// (the agent's inbox). The endpoint advertises the messaging features
// while it converses; the human's message reaches the IM side, with a
// receipt only when one was asked for; the IM side's typing becomes chat
// states; a message resent with the same id reaches the IM side once; an
// IM message carries its sender's nickname; and anyone but the inbox gets
// the bridge's refusal as a clear error reply.
func TestMessagingThroughConnector(t *testing.T) {
	e2e.NeedSlixmpp(t)
	srv, err := connectortest.Start(connectortest.Options{APIKey: e2e.ConnectorKey, FormToken: e2e.FormToken, RetryInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("AGENTGW_TEST_CONNECTOR_KEY", e2e.ConnectorKey)
	t.Setenv("AGENTGW_TEST_FORM_TOKEN", e2e.FormToken)
	server := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{HTTPUpload: true})
	e := e2e.Prepare(t, e2e.Options{Server: server, Users: []string{"alice", "bob"}, TOML: fmt.Sprintf(`
[[agents]]
jid = "im@%s"
[agents.connector]
base_url = %q
api_key_env = "AGENTGW_TEST_CONNECTOR_KEY"
inbox = %q
`, server.ComponentDomain, srv.URL(), "alice@"+server.Domain)})
	gw := e.Serve("gw")
	defer gw.Stop()
	e.Agentgw(0, "connector", "auth", "--config", e.ConfigPath, "--flow", "token_form",
		"--field", "account=alice", "--field-env", "token=AGENTGW_TEST_FORM_TOKEN", e.Endpoint("im").String())
	ep := e.Endpoint("im").String()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, bob := e.DialConn("bob")

	// disco#info lists the messaging features once the channel converses.
	features := func() map[string]bool {
		iq := xmltree.New(ns.Client, "iq", "type", "get", "to", ep, "id", ids.New("d-"))
		iq.Add(xmltree.New(ns.DiscoInfo, "query"))
		res, err := bob.SendIQ(ctx, iq)
		if err != nil {
			return nil
		}
		out := map[string]bool{}
		for _, f := range res.Child(ns.DiscoInfo, "query").ChildrenNamed(ns.DiscoInfo, "feature") {
			out[f.AttrValue("var")] = true
		}
		return out
	}
	testkit.WaitFor(t, 60*time.Second, "the IM endpoint to advertise chat", func() bool {
		f := features()
		return f[ns.ChatStates] && f[ns.Receipts] && f[ns.Reply] && f[ns.StanzaID]
	})

	alice := startInbox(t, e, "alice")
	var first string
	testkit.WaitFor(t, 30*time.Second, "a signed-in channel at the connector", func() bool {
		first = srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_bob", SenderName: "Bob", Text: "hi alice"})
		return first != ""
	})
	in := alice.wait(60*time.Second, "the IM message at the inbox", func(m map[string]any) bool {
		return m["event"] == "message" && m["origin_id"] == "im_"+first
	})
	if in["nick"] != "Bob" {
		t.Errorf("the IM sender's nickname did not arrive: %v", in)
	}
	from := in["from"].(string)

	outbound := func(text string) int {
		n := 0
		for _, o := range srv.Outbound() {
			if o.Text == text {
				n++
			}
		}
		return n
	}
	// A receipt when asked for ...
	alice.send(map[string]any{"to": from, "body": "hello Bob", "thread": "conv_bob", "id": "alice-r1"})
	alice.wait(60*time.Second, "the receipt for a message that asked", func(m map[string]any) bool {
		return m["event"] == "receipt" && m["id"] == "alice-r1"
	})
	// ... and none when not: the connector acknowledges both, in order.
	alice.send(map[string]any{"to": from, "body": "no receipt please", "thread": "conv_bob", "id": "alice-q1", "receipt": false})
	alice.send(map[string]any{"to": from, "body": "and this one asks", "thread": "conv_bob", "id": "alice-r2"})
	alice.wait(60*time.Second, "the receipt of the later message", func(m map[string]any) bool {
		return m["event"] == "receipt" && m["id"] == "alice-r2"
	})
	testkit.WaitFor(t, 30*time.Second, "the unreceipted message on the IM side", func() bool { return outbound("no receipt please") == 1 })
	for _, m := range alice.of("receipt") {
		if m["id"] == "alice-q1" {
			t.Errorf("a receipt for a message that did not ask for one: %v", m)
		}
	}

	// The IM side types: chat states (alice sent <active/>, so she speaks them).
	if !srv.SendActivity("conv_bob", "typing") {
		t.Fatal("no channel for chat.activity")
	}
	alice.wait(30*time.Second, "composing from the IM side", func(m map[string]any) bool {
		return m["event"] == "chatstate" && m["state"] == "composing" && m["from"] == from
	})
	srv.SendActivity("conv_bob", "paused")
	alice.wait(30*time.Second, "paused from the IM side", func(m map[string]any) bool {
		return m["event"] == "chatstate" && m["state"] == "paused"
	})

	// A message resent with the same id reaches the IM side once.
	for i := 0; i < 2; i++ {
		alice.send(map[string]any{"to": from, "body": "sent twice", "thread": "conv_bob", "id": "alice-dup"})
	}
	alice.send(map[string]any{"to": from, "body": "after the resend", "thread": "conv_bob", "id": "alice-after"})
	testkit.WaitFor(t, 60*time.Second, "the message after the resend on the IM side", func() bool { return outbound("after the resend") == 1 })
	if n := outbound("sent twice"); n != 1 {
		t.Errorf("a message sent twice with one id reached the IM side %d times", n)
	}

	// Anyone but the inbox: the bridge refuses, and the sender is told.
	got := make(chan *xmltree.Element, 4)
	bob.OnMessage(func(m *xmltree.Element) {
		if m.AttrValue("type") == "error" {
			got <- m
		}
	})
	m := xmltree.New(ns.Client, "message", "type", "chat", "to", from, "id", "bob-1")
	m.Add(xmltree.New(ns.Client, "body").WithText("let me in"))
	if err := bob.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	select {
	case er := <-got:
		se := agentproto.ParseError(er)
		if er.AttrValue("id") != "bob-1" || se == nil || !strings.Contains(se.Text, "inbox") || er.Child("", "body") != nil {
			t.Fatalf("bob's error reply: %s", er)
		}
		t.Logf("bob was told: %s (%s)", se.Text, se.Condition)
	case <-ctx.Done():
		t.Fatal("bob got no error reply")
	}
	if outbound("let me in") != 0 {
		t.Error("a stranger's message reached the IM side")
	}
	if t.Failed() {
		t.Logf("gateway log tail:\n%s", e2e.Tail(gw.Log(), 6000))
	}
}
