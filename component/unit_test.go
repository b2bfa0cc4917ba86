package component

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stream"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/xep/xmltree"
)

func TestParentDomain(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"agents.example.test": "example.test",
		"a.b":                 "b",
		"localhost":           "localhost",
	} {
		if got := ParentDomain(jid.MustParse(in)).String(); got != want {
			t.Errorf("ParentDomain(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestPendingCorrelation(t *testing.T) {
	t.Parallel()
	domain, server := jid.MustParse("agents.example.test"), jid.MustParse("example.test")
	tab := newPendingTable(domain, server)
	if _, err := tab.register("x", server); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("register before open: %v", err)
	}
	tab.setOpen()
	alice := jid.MustParse("alice@example.test/phone")
	p, err := tab.register("id1", alice)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tab.register("id1", alice); !errors.Is(err, errDuplicateID) {
		t.Fatalf("duplicate id: %v", err)
	}
	if tab.resolve("id1", jid.MustParse("mallory@example.test/x"), xmltree.New(NSComponent, "iq")) {
		t.Fatal("an answer from a third party was accepted")
	}
	if tab.resolve("other", alice, xmltree.New(NSComponent, "iq")) {
		t.Fatal("an answer with an unknown id was accepted")
	}
	if !tab.live("id1", p) {
		t.Fatal("request not live")
	}
	el := xmltree.New(NSComponent, "iq", "type", "result")
	if !tab.resolve("id1", alice.Bare(), el) {
		t.Fatal("answer from the bare JID rejected")
	}
	if out := <-p.ch; out.el != el || out.err != nil {
		t.Fatalf("outcome %+v", out)
	}
	if tab.live("id1", p) || tab.len() != 0 {
		t.Fatal("answered request still pending")
	}

	// No "to": the server (or mellium's blanked own domain) answers.
	q, _ := tab.register("id2", jid.JID{})
	if !tab.resolve("id2", server, el) {
		t.Fatal("server answer to a request without 'to' rejected")
	}
	<-q.ch

	// Losing the stream fails everything and closes the table.
	r1, _ := tab.register("id3", server)
	r2, _ := tab.register("id4", alice)
	tab.failAll(ErrStreamLost)
	for _, r := range []*pendingIQ{r1, r2} {
		if out := <-r.ch; !errors.Is(out.err, ErrStreamLost) {
			t.Fatalf("outcome %+v", out)
		}
	}
	if _, err := tab.register("id5", server); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("register after failAll: %v", err)
	}

	tab.setOpen()
	r3, _ := tab.register("id6", server)
	tab.cancel("id6", r3)
	if tab.resolve("id6", server, el) {
		t.Fatal("cancelled request resolved")
	}
}

func TestParseStanzaErrorKeepsNoRemoteText(t *testing.T) {
	t.Parallel()
	el, err := xmltree.Parse([]byte(`<iq xmlns="jabber:component:accept" type="error" id="1"><error type="auth"><forbidden xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/><text xmlns="urn:ietf:params:xml:ns:xmpp-stanzas">&lt;script&gt;</text></error></iq>`), xmltree.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	se := parseStanzaError(el)
	if se.Type != "auth" || se.Condition != "forbidden" || se.Text != "" {
		t.Fatalf("got %+v", se)
	}
	if !errors.Is(se, agentproto.ErrForbidden("x")) {
		t.Fatal("errors.Is does not match on condition")
	}
	odd, _ := xmltree.Parse([]byte(`<iq type="error"><error type="evil"><made-up xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/></error></iq>`), xmltree.Limits{})
	if se := parseStanzaError(odd); se.Type != "cancel" || se.Condition != "undefined-condition" {
		t.Fatalf("got %+v", se)
	}
}

func TestClassifyFatalStreamErrors(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-value"
	c := newTestComponent(t, Config{Secret: secret})
	for _, cond := range []string{"conflict", "not-authorized", "host-unknown"} {
		err := c.classify(stream.Error{Err: cond})
		var fe *FatalError
		if !errors.As(err, &fe) || fe.Condition != cond || fe.Advice == "" {
			t.Fatalf("%s: got %v", cond, err)
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "agents.example.test") {
			t.Fatalf("%s: message %q", cond, err)
		}
	}
	if err := c.classify(stream.Error{Err: "system-shutdown"}); errors.As(err, new(*FatalError)) {
		t.Fatal("system-shutdown treated as fatal")
	}
	if err := c.classify(errors.New("EOF")); errors.As(err, new(*FatalError)) {
		t.Fatal("EOF treated as fatal")
	}
}

func newTestComponent(t *testing.T, cfg Config) *Component {
	t.Helper()
	r := NewRouter(jid.MustParse("agents.example.test"), nil, nil)
	cfg.Addr = "127.0.0.1:1"
	return New(cfg, r)
}

func TestSendChecksAndQueueBound(t *testing.T) {
	t.Parallel()
	c := newTestComponent(t, Config{QueueSize: 2})
	ctx := context.Background()
	alice := jid.MustParse("alice@example.test")
	bad := []*xmltree.Element{
		nil,
		xmltree.New("jabber:client", "message"),
		xmltree.New(NSComponent, "handshake"),
		xmltree.New(NSComponent, "message", "from", "weather@elsewhere.test"),
		xmltree.New(NSComponent, "message", "from", "@@"),
	}
	for i, el := range bad {
		if err := c.Send(ctx, el); err == nil {
			t.Fatalf("bad stanza %d accepted", i)
		}
	}
	noFrom := xmltree.New("", "presence", "to", alice.String())
	if err := c.Send(ctx, noFrom); err != nil {
		t.Fatal(err)
	}
	if got := noFrom.AttrValue("from"); got != "agents.example.test" {
		t.Fatalf("from = %q", got)
	}
	if err := c.Send(ctx, NewMessage("m1", jid.MustParse("weather@agents.example.test/r"), alice)); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, NewMessage("m2", c.Domain(), alice)); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third stanza in a queue of 2: %v", err)
	}
	if got := c.Stats().QueueLen; got != 2 {
		t.Fatalf("QueueLen = %d", got)
	}
	// No stream: SendIQ fails at once instead of waiting.
	if _, err := c.SendIQ(ctx, NewIQ("get", "", c.Domain(), alice, xmltree.New("urn:xmpp:ping", "ping"))); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("SendIQ without a stream: %v", err)
	}
	if _, err := c.SendIQ(ctx, NewIQ("result", "x", c.Domain(), alice, nil)); err == nil {
		t.Fatal("SendIQ accepted a result")
	}
}

func TestSendIQTimeoutOnFakeClock(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newTestComponent(t, Config{IQTimeout: 5 * time.Second, Clock: fake})
	c.pending.setOpen()
	errc := make(chan error, 1)
	iq := NewIQ("get", "", c.Domain(), jid.MustParse("alice@example.test/x"), xmltree.New("urn:xmpp:ping", "ping"))
	go func() {
		_, err := c.SendIQ(context.Background(), iq)
		errc <- err
	}()
	for c.Stats().PendingIQs == 0 {
		time.Sleep(time.Millisecond)
	}
	if iq.AttrValue("id") == "" {
		t.Fatal("SendIQ set no id")
	}
	fake.Advance(5*time.Second - time.Nanosecond)
	select {
	case err := <-errc:
		t.Fatalf("returned before the timeout: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	fake.Advance(time.Nanosecond)
	if err := <-errc; !errors.Is(err, ErrIQTimeout) {
		t.Fatalf("got %v", err)
	}
	if c.Stats().PendingIQs != 0 {
		t.Fatal("timed-out request still pending")
	}
}

func TestSendIQStreamLost(t *testing.T) {
	t.Parallel()
	c := newTestComponent(t, Config{})
	c.pending.setOpen()
	errc := make(chan error, 1)
	go func() {
		_, err := c.SendIQ(context.Background(), NewIQ("get", "", c.Domain(), jid.MustParse("alice@example.test/x"), nil))
		errc <- err
	}()
	for c.Stats().PendingIQs == 0 {
		time.Sleep(time.Millisecond)
	}
	c.pending.failAll(ErrStreamLost)
	if err := <-errc; !errors.Is(err, ErrStreamLost) {
		t.Fatalf("got %v", err)
	}
	// The request is still queued; the next writer must skip it.
	it := <-c.queue
	if c.pending.live(it.id, it.iq) {
		t.Fatal("failed request still live")
	}
}

func TestNewRegistersPingAndPanicsOnDomainMismatch(t *testing.T) {
	t.Parallel()
	r := NewRouter(jid.MustParse("agents.example.test"), nil, nil)
	New(Config{Addr: "x"}, r)
	reply := r.DispatchIQ(context.Background(), IQ{
		ID: "p", Type: "get", From: jid.MustParse("alice@example.test/x"), To: jid.MustParse("agents.example.test"),
		Payload: xmltree.New("urn:xmpp:ping", "ping"),
	})
	if reply.AttrValue("type") != "result" {
		t.Fatalf("ping reply %s", reply)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a domain mismatch")
		}
	}()
	New(Config{Domain: jid.MustParse("other.example.test")}, NewRouter(jid.MustParse("agents.example.test"), nil, nil))
}
