package messaging

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Unit tests of the pure logic, with a recording sender; the wire is
// tested through Prosody in e2e/messaging (messaging_e2e_test.go).

type recSender struct {
	mu   sync.Mutex
	sent []*xmltree.Element
}

func (r *recSender) Send(_ context.Context, el *xmltree.Element) error {
	r.mu.Lock()
	r.sent = append(r.sent, el)
	r.mu.Unlock()
	return nil
}

func (r *recSender) SendIQ(context.Context, *xmltree.Element) (*xmltree.Element, error) {
	return nil, errors.New("no IQs here")
}

func (r *recSender) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

func (r *recSender) take() []*xmltree.Element {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

// resolver: "hidden" exists but is invisible, "nobody" does not exist.
type resolver struct{}

func (resolver) Resolve(_, ep jid.JID) (bool, bool) {
	switch ep.Localpart() {
	case "nobody":
		return false, false
	case "hidden":
		return true, false
	}
	return true, true
}

type conversant struct {
	mu    sync.Mutex
	turns []backendkit.Turn
	err   error
	can   bool
	rcpts []string
}

func (c *conversant) CanConverse(string) bool { return c.can }
func (c *conversant) Converse(_ context.Context, t backendkit.Turn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.turns = append(c.turns, t)
	return c.err
}
func (c *conversant) ChatRecipients(string) []string { return c.rcpts }
func (c *conversant) Turns() []backendkit.Turn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]backendkit.Turn(nil), c.turns...)
}

const domain = "agents.example.test"

type fixture struct {
	s    *Service
	out  *recSender
	conv *conversant
	log  *bytes.Buffer
}

func newFixture(t *testing.T, lim Limits) *fixture {
	t.Helper()
	f := &fixture{out: &recSender{}, conv: &conversant{can: true}, log: &bytes.Buffer{}}
	f.s = New(Options{
		Domain: jid.MustParse(domain), Sender: f.out, Resolver: resolver{},
		Backend: func(ep string) (any, bool) {
			switch ep {
			case "chat@" + domain:
				return f.conv, true
			case "tools@" + domain:
				return struct{}{}, true
			}
			return nil, false
		},
		Redact: func(s string) string { return strings.ReplaceAll(s, "s3cret", "[redacted]") },
		Limits: lim,
		Log:    slog.New(slog.NewTextHandler(&syncWriter{b: f.log}, nil)),
	})
	return f
}

type syncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// msg builds an inbound chat message from alice.
func msg(to, id, body string, extra ...*xmltree.Element) component.Message {
	raw := xmltree.New(component.NSComponent, "message", "type", "chat", "id", id, "to", to, "from", "alice@example.test/phone")
	if body != "" {
		raw.Add(xmltree.New(component.NSComponent, "body").WithText(body))
	}
	raw.Add(extra...)
	return component.Message{ID: id, Type: "chat", From: jid.MustParse("alice@example.test/phone"), To: jid.MustParse(to), Raw: raw}
}

func (f *fixture) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitTurns(t *testing.T, c *conversant, n int) []backendkit.Turn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ts := c.Turns(); len(ts) >= n {
			return ts
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("backend got %d turns, want %d", len(c.Turns()), n)
	return nil
}

func condition(t *testing.T, el *xmltree.Element) (agentproto.Condition, string) {
	t.Helper()
	if el.AttrValue("type") != "error" {
		t.Fatalf("not an error: %s", el)
	}
	se := agentproto.ParseError(el)
	return se.Condition, se.Text
}

func TestParseTurnFields(t *testing.T) {
	lim := Limits{}.withDefaults()
	form := xmltree.New(ns.Data, "x", "type", "submit").Add(
		xmltree.New(ns.Data, "field", "var", "FORM_TYPE").Add(xmltree.New(ns.Data, "value").WithText(ns.ChatQuestionForm)),
		xmltree.New(ns.Data, "field", "var", "question_id").Add(xmltree.New(ns.Data, "value").WithText("q-1")),
		xmltree.New(ns.Data, "field", "var", "unit").Add(xmltree.New(ns.Data, "value").WithText("C")),
	)
	m := msg("chat@"+domain, "stanza-1", "hi \x01 there",
		xmltree.New(ns.StanzaID, "origin-id", "id", "origin-1"),
		xmltree.New(ns.Reply, "reply", "id", "prev-1", "to", "chat@"+domain),
		xmltree.New(ns.Receipts, "request"),
		xmltree.New(ns.ChatStates, "active"),
		xmltree.New(ns.OOB, "x").Add(xmltree.New(ns.OOB, "url").WithText("https://up.example.test/a/b.png")),
		form,
	)
	in := parse(m.Raw, lim)
	if in.problem != nil {
		t.Fatalf("problem %v", in.problem)
	}
	if in.id != "origin-1" || in.replyTo != "prev-1" || !in.receipt || !in.chatState {
		t.Fatalf("parsed %+v", in)
	}
	if in.body != "hi \uFFFD there" {
		t.Fatalf("XML-illegal character not replaced: %q", in.body)
	}
	if len(in.files) != 1 || in.files[0].Name != "b.png" {
		t.Fatalf("files %+v", in.files)
	}
	if in.questionID != "q-1" || len(in.answer) != 1 || in.answer["unit"][0] != "C" {
		t.Fatalf("answer %q %v", in.questionID, in.answer)
	}
	// No id at all: no receipt can be sent, so none is recorded.
	raw := xmltree.New(component.NSComponent, "message").Add(xmltree.New(component.NSComponent, "body").WithText("x"), xmltree.New(ns.Receipts, "request"))
	if in := parse(raw, lim); in.receipt || in.id != "" {
		t.Fatalf("receipt without an id: %+v", in)
	}
	// Identifiers with control characters or beyond the bound read as absent.
	if ident("a\x02b") != "" || ident(strings.Repeat("a", maxIDBytes+1)) != "" || ident(" ok ") != "ok" {
		t.Fatal("ident accepts a non-identifier")
	}
}

func TestParseHostile(t *testing.T) {
	lim := Limits{MaxBodyBytes: 10, MaxFiles: 1}.withDefaults()
	oob := func(u string) *xmltree.Element {
		return xmltree.New(ns.OOB, "x").Add(xmltree.New(ns.OOB, "url").WithText(u))
	}
	for name, tc := range map[string]struct {
		m    component.Message
		cond agentproto.Condition
	}{
		"oversize":        {msg("chat@"+domain, "1", strings.Repeat("x", 11)), agentproto.CondNotAcceptable},
		"too many files":  {msg("chat@"+domain, "1", "", oob("https://a.test/1"), oob("https://a.test/2")), agentproto.CondNotAcceptable},
		"file scheme":     {msg("chat@"+domain, "1", "", oob("file:///etc/passwd")), agentproto.CondNotAcceptable},
		"credentials":     {msg("chat@"+domain, "1", "", oob("https://u:p@a.test/x")), agentproto.CondNotAcceptable},
		"other form type": {msg("chat@"+domain, "1", "", xmltree.New(ns.Data, "x", "type", "submit").Add(xmltree.New(ns.Data, "field", "var", "FORM_TYPE").Add(xmltree.New(ns.Data, "value").WithText("urn:other")))), agentproto.CondBadRequest},
	} {
		in := parse(tc.m.Raw, lim)
		if in.problem == nil || in.problem.Condition != tc.cond {
			t.Errorf("%s: problem %v, want %s", name, in.problem, tc.cond)
		}
		if in.problem != nil && strings.Contains(in.problem.Text, "passwd") {
			t.Errorf("%s: the error reflects input: %q", name, in.problem.Text)
		}
	}
}

func TestErrorRepliesAndNoOracle(t *testing.T) {
	f := newFixture(t, Limits{})
	ctx := context.Background()
	f.s.handle(ctx, msg("tools@"+domain, "t1", "hello"))
	f.s.handle(ctx, msg("hidden@"+domain, "h1", "hello"))
	f.s.handle(ctx, msg("nobody@"+domain, "h1", "hello"))
	f.conv.can = false
	f.s.handle(ctx, msg("chat@"+domain, "c1", "hello"))
	out := f.out.take()
	if len(out) != 4 {
		t.Fatalf("%d replies, want 4", len(out))
	}
	if c, text := condition(t, out[0]); c != agentproto.CondFeatureNotImplemented || text != textNotChat {
		t.Fatalf("non-conversing: %s %q", c, text)
	}
	if out[0].Child("", "body") != nil || out[0].AttrValue("id") != "t1" || out[0].AttrValue("from") != "tools@"+domain {
		t.Fatalf("error reply %s", out[0])
	}
	hidden := strings.ReplaceAll(out[1].String(), "hidden@", "X@")
	missing := strings.ReplaceAll(out[2].String(), "nobody@", "X@")
	if hidden != missing {
		t.Fatalf("a hidden endpoint answers differently from a missing one:\n%s\n%s", hidden, missing)
	}
	if c, text := condition(t, out[1]); c != agentproto.CondServiceUnavailable || text != "" {
		t.Fatalf("hidden: %s %q", c, text)
	}
	if c, _ := condition(t, out[3]); c != agentproto.CondRecipientUnavailable {
		t.Fatalf("cannot converse now: %s", c)
	}
	if f.s.Features("chat@"+domain) != nil || f.s.Features("tools@"+domain) != nil {
		t.Fatal("features advertised while the backend cannot converse")
	}
	f.conv.can = true
	if len(f.s.Features("chat@"+domain)) == 0 {
		t.Fatal("no features while the backend converses")
	}
	// Errors, groupchat and headline messages get no answer at all.
	for _, typ := range []string{"error", "groupchat", "headline"} {
		m := msg("tools@"+domain, "x", "hello")
		m.Type = typ
		f.s.handle(ctx, m)
	}
	if out := f.out.take(); len(out) != 0 {
		t.Fatalf("answered %d messages of other types", len(out))
	}
}

func TestTurnsDedupAndReceipts(t *testing.T) {
	f := newFixture(t, Limits{DedupWindow: 2})
	f.run(t)
	ctx := context.Background()
	ep := "chat@" + domain
	f.s.handle(ctx, msg(ep+"/channel-1", "a", "one", xmltree.New(ns.Receipts, "request")))
	f.s.handle(ctx, msg(ep, "a", "one again"))
	ts := waitTurns(t, f.conv, 1)
	if ts[0].Resource != "channel-1" || ts[0].From != "alice@example.test/phone" || !ts[0].ReceiptRequested || ts[0].Endpoint != ep {
		t.Fatalf("turn %+v", ts[0])
	}
	f.s.handle(ctx, msg(ep, "b", "two"))
	f.s.handle(ctx, msg(ep, "c", "three"))
	// The window holds two ids: "a" is forgotten and counts as new.
	f.s.handle(ctx, msg(ep, "a", "one, much later"))
	ts = waitTurns(t, f.conv, 4)
	if got := f.s.Stats().Duplicates; got != 1 {
		t.Fatalf("%d duplicates, want 1", got)
	}
	chat := f.s.ChatFor(ep)
	// Receipts: only for a turn that asked, only once.
	if err := chat.Ack(ctx, backendkit.Ack{Endpoint: ep, To: "alice@example.test/phone", ID: "b"}); err != nil {
		t.Fatal(err)
	}
	if out := f.out.take(); len(out) != 0 {
		t.Fatalf("a receipt for a turn that did not ask: %s", out[0])
	}
	// "a" was forgotten by the window, so its receipt request was too.
	f.s.handle(ctx, msg(ep, "d", "four", xmltree.New(ns.Receipts, "request")))
	waitTurns(t, f.conv, 5)
	for i := 0; i < 2; i++ {
		if err := chat.Ack(ctx, backendkit.Ack{Endpoint: ep, Resource: "channel-1", To: "alice@example.test/phone", ID: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	out := f.out.take()
	if len(out) != 1 || out[0].Child(ns.Receipts, "received").AttrValue("id") != "d" || out[0].AttrValue("from") != ep+"/channel-1" {
		t.Fatalf("receipts %v", out)
	}
}

func TestRateBacklogAndRefusals(t *testing.T) {
	f := newFixture(t, Limits{PerSecond: 0.001, Burst: 3})
	ctx := context.Background()
	ep := "chat@" + domain
	for i := 0; i < 20; i++ {
		f.s.handle(ctx, msg(ep, "r"+string(rune('a'+i)), "flood"))
	}
	out := f.out.take()
	if len(out) != 1 {
		t.Fatalf("%d error replies to a flood, want one per burst: %v", len(out), out)
	}
	if c, _ := condition(t, out[0]); c != agentproto.CondResourceConstraint {
		t.Fatalf("flood: %s", c)
	}
	if n := strings.Count(f.log.String(), "reason=rate"); n != 1 {
		t.Fatalf("rate drops logged %d times, want 1:\n%s", n, f.log)
	}
	// Backlog: MaxQueued 4 over 4 shards is one per shard, and Run is not
	// running, so a second turn of one conversation finds its shard full.
	g := newFixture(t, Limits{MaxQueued: 4})
	g.s.handle(ctx, msg(ep, "q1", "one"))
	g.s.handle(ctx, msg(ep, "q2", "two"))
	out = g.out.take()
	if len(out) != 1 {
		t.Fatalf("%d replies with a full backlog", len(out))
	}
	if c, text := condition(t, out[0]); c != agentproto.CondResourceConstraint || text != textBusy {
		t.Fatalf("backlog: %s %q", c, text)
	}
	// A refused turn is told to the sender (redacted, bounded) and may be
	// sent again.
	h := newFixture(t, Limits{})
	h.conv.err = errors.New("upstream said s3cret " + strings.Repeat("z", 500))
	h.run(t)
	h.s.handle(ctx, msg(ep, "x1", "hello"))
	waitTurns(t, h.conv, 1)
	deadline := time.Now().Add(10 * time.Second)
	for h.out.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	out = h.out.take()
	if len(out) != 1 {
		t.Fatalf("%d replies to a refused turn", len(out))
	}
	c, text := condition(t, out[0])
	if c != agentproto.CondUndefinedCondition || strings.Contains(text, "s3cret") || len(text) > maxRefusalText+4 {
		t.Fatalf("refusal %s %q", c, text)
	}
	h.conv.mu.Lock()
	h.conv.err = backendkit.ErrChatUnavailable
	h.conv.mu.Unlock()
	h.s.handle(ctx, msg(ep, "x1", "hello"))
	waitTurns(t, h.conv, 2)
}

func TestChatSendConsentAndShape(t *testing.T) {
	f := newFixture(t, Limits{MaxBodyBytes: 64})
	ctx := context.Background()
	ep := "chat@" + domain
	chat := f.s.ChatFor(ep)
	alice := "alice@example.test/phone"
	if err := f.s.ChatFor("other@"+domain).Send(ctx, backendkit.Message{Endpoint: ep, To: alice, Body: "x"}); !errors.Is(err, ErrNotOwnEndpoint) {
		t.Fatalf("sending for another endpoint: %v", err)
	}
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: alice, Body: "x"}); !errors.Is(err, backendkit.ErrChatRefused) {
		t.Fatalf("a message to a stranger: %v", err)
	}
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: "x@" + domain, Body: "x"}); err == nil {
		t.Fatal("a message to our own domain was accepted")
	}
	// The backend's ChatConsent names bob.
	f.conv.rcpts = []string{"bob@example.test"}
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: "bob@example.test", Body: "hi bob"}); err != nil {
		t.Fatal(err)
	}
	// Alice writes: replies are consented.
	f.s.handle(ctx, msg(ep, "a1", "hello", xmltree.New(ns.ChatStates, "active")))
	if out := f.out.take(); len(out) != 1 || out[0].AttrValue("to") != "bob@example.test" {
		t.Fatalf("the consented message to bob: %v", out)
	}
	err := chat.Send(ctx, backendkit.Message{Endpoint: ep, Resource: "ch", To: alice, ID: "reply-1", Body: "<x/> \x00 ok", ReplyTo: "a1", Store: true, Nick: " Bob\x01 ",
		Files: []backendkit.File{{URL: "https://up.example.test/f.txt", Name: "f\x01.txt"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: alice, Body: strings.Repeat("y", 65)}); !errors.Is(err, backendkit.ErrChatTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: alice, Question: &backendkit.Question{ID: "q1", Fields: []backendkit.QuestionField{{Var: "v", Type: "jid-multi"}}}}); err == nil {
		t.Fatal("an unsupported field type was accepted")
	}
	out := f.out.take()
	if len(out) != 1 {
		t.Fatalf("%d stanzas sent, want 1: %v", len(out), out)
	}
	m := out[0]
	if m.AttrValue("from") != ep+"/ch" || m.AttrValue("id") != "reply-1" || m.Child(ns.StanzaID, "origin-id").AttrValue("id") != "reply-1" {
		t.Fatalf("message %s", m)
	}
	if b := m.Child("", "body").Text; b != "<x/> \uFFFD ok" {
		t.Fatalf("body %q", b)
	}
	if m.Child(ns.Reply, "reply").AttrValue("id") != "a1" || m.Child(ns.Hints, "store") == nil || m.Child(ns.ChatStates, "active") == nil {
		t.Fatalf("message %s", m)
	}
	if n := m.Child(ns.Nick, "nick"); n == nil || n.Text != "Bob\uFFFD" {
		t.Fatalf("nick %v", n)
	}
	if d := m.Child(ns.OOB, "x").Child(ns.OOB, "desc").Text; d != "f\uFFFD.txt" {
		t.Fatalf("file name %q", d)
	}
	// Chat states: alice sent <active/>, so composing goes out, once.
	for i := 0; i < 2; i++ {
		if err := chat.Activity(ctx, backendkit.Activity{Endpoint: ep, To: alice, State: backendkit.ChatComposing}); err != nil {
			t.Fatal(err)
		}
	}
	if err := chat.Activity(ctx, backendkit.Activity{Endpoint: ep, To: "bob@example.test", State: backendkit.ChatComposing}); err != nil {
		t.Fatal(err)
	}
	out = f.out.take()
	if len(out) != 1 || out[0].Child(ns.ChatStates, "composing") == nil || out[0].AttrValue("to") != alice {
		t.Fatalf("chat states %v", out)
	}
	// A bounce marking a block stops messages until alice writes again.
	bounce := xmltree.New(component.NSComponent, "message", "type", "error", "id", "reply-1", "from", "alice@example.test", "to", ep)
	bounce.Add(xmltree.New(component.NSComponent, "error", "type", "cancel").Add(xmltree.New(ns.Stanzas, "not-acceptable"), xmltree.New(ns.BlockingError, "blocked")))
	f.s.handle(ctx, component.Message{ID: "reply-1", Type: "error", From: jid.MustParse("alice@example.test"), To: jid.MustParse(ep), Raw: bounce})
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: alice, Body: "still there?"}); !errors.Is(err, backendkit.ErrChatRefused) {
		t.Fatalf("after a blocked bounce: %v", err)
	}
	f.s.handle(ctx, msg(ep, "a2", "back"))
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: alice, Body: "welcome back"}); err != nil {
		t.Fatalf("after alice wrote again: %v", err)
	}
}

func TestLRUAndBucket(t *testing.T) {
	l := newLRU[int, int](2)
	l.put(1, 1)
	l.put(2, 2)
	l.get(1)
	l.put(3, 3)
	if _, ok := l.get(2); ok || l.len() != 2 {
		t.Fatal("the least recently used entry was kept")
	}
	var b bucket
	now := time.Unix(0, 0)
	for i := 0; i < 3; i++ {
		if !b.allow(now, 1, 3) {
			t.Fatal("burst refused")
		}
	}
	if b.allow(now, 1, 3) {
		t.Fatal("beyond the burst allowed")
	}
	if !b.allow(now.Add(time.Second), 1, 3) {
		t.Fatal("no refill")
	}
}

func TestOutboundRate(t *testing.T) {
	f := newFixture(t, Limits{PerSecond: 0.001, Burst: 1})
	ctx := context.Background()
	ep := "chat@" + domain
	f.conv.rcpts = []string{"inbox@example.test"}
	chat := f.s.ChatFor(ep)
	for i := 0; i < outFactor; i++ {
		if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: "inbox@example.test", Body: "m"}); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: "inbox@example.test", Body: "m"}); !errors.Is(err, backendkit.ErrChatRateLimited) {
		t.Fatalf("beyond the outbound burst: %v", err)
	}
}

// iqSender answers disco#info for two servers.
type iqSender struct{ recSender }

func (s *iqSender) SendIQ(_ context.Context, iq *xmltree.Element) (*xmltree.Element, error) {
	q := xmltree.New(ns.DiscoInfo, "query")
	switch iq.AttrValue("to") {
	case "blocks.test":
		q.Add(xmltree.New(ns.DiscoInfo, "feature", "var", "urn:xmpp:blocking"))
	case "plain.test":
		q.Add(xmltree.New(ns.DiscoInfo, "feature", "var", ns.DiscoInfo))
	default:
		return nil, errors.New("remote-server-not-found")
	}
	return xmltree.New(component.NSComponent, "iq", "type", "result").Add(q), nil
}

func TestCheckBlocking(t *testing.T) {
	var log bytes.Buffer
	s := New(Options{Domain: jid.MustParse(domain), Sender: &iqSender{}, Resolver: resolver{},
		Backend: func(string) (any, bool) { return nil, false }, Log: slog.New(slog.NewTextHandler(&syncWriter{b: &log}, nil))})
	got := s.CheckBlocking(context.Background(), []string{"blocks.test", "plain.test", "gone.test"})
	if !got["blocks.test"] || got["plain.test"] || got["gone.test"] {
		t.Fatalf("answers %v", got)
	}
	if n := strings.Count(log.String(), "level=WARN"); n != 2 {
		t.Fatalf("%d warnings, want 2 (no feature, no answer):\n%s", n, log.String())
	}
}

// watching is a conversant that watches bounces (backendkit.ChatWatcher).
type watching struct {
	conversant
	wmu     sync.Mutex
	bounces []backendkit.Bounce
	back    []string
}

func (w *watching) ChatBounced(b backendkit.Bounce) {
	w.wmu.Lock()
	w.bounces = append(w.bounces, b)
	w.wmu.Unlock()
}

func (w *watching) ChatPeerBack(endpoint, peer string) {
	w.wmu.Lock()
	w.back = append(w.back, endpoint+" "+peer)
	w.wmu.Unlock()
}

// A bounce of one of the backend's messages is reported to it; an
// offline bounce (no <blocked/>) is lifted by the peer's presence or
// probe, which the backend hears of too; a blocked bounce only by the
// peer's own message.
func TestBounceAndPresenceReachTheBackend(t *testing.T) {
	f := newFixture(t, Limits{})
	w := &watching{conversant: conversant{can: true, rcpts: []string{"alice@example.test"}}}
	ep := "chat@" + domain
	f.s.o.Backend = func(e string) (any, bool) { return w, e == ep }
	ctx := context.Background()
	chat := f.s.ChatFor(ep)
	alice := jid.MustParse("alice@example.test")
	bounce := func(id string, blocked bool) {
		el := xmltree.New(component.NSComponent, "message", "type", "error", "id", id, "from", alice.String(), "to", ep+"/ch")
		e := xmltree.New(component.NSComponent, "error", "type", "cancel").Add(xmltree.New(ns.Stanzas, "service-unavailable"))
		if blocked {
			e.Add(xmltree.New(ns.BlockingError, "blocked"))
		}
		el.Add(e)
		f.s.handle(ctx, component.Message{ID: id, Type: "error", From: alice, To: jid.MustParse(ep + "/ch"), Raw: el})
	}
	presence := func(typ string) {
		f.s.presence(ctx, component.Presence{Type: typ, From: jid.MustParse("alice@example.test/phone"), To: jid.MustParse(ep)})
	}
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, Resource: "ch", To: alice.String(), ID: "im_1", Body: "hi"}); err != nil {
		t.Fatal(err)
	}
	bounce("im_1", false)
	if len(w.bounces) != 1 || w.bounces[0].ID != "im_1" || w.bounces[0].Peer != "alice@example.test" || w.bounces[0].Condition != "service-unavailable" || w.bounces[0].Blocked || w.bounces[0].Resource != "ch" {
		t.Fatalf("bounces %+v", w.bounces)
	}
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: alice.String(), ID: "im_2", Body: "again"}); !errors.Is(err, backendkit.ErrChatRefused) {
		t.Fatalf("after a bounce: %v", err)
	}
	presence("unavailable")
	if len(w.back) != 0 {
		t.Fatalf("unavailable presence read as back: %v", w.back)
	}
	presence("probe")
	if len(w.back) != 1 || w.back[0] != ep+" alice@example.test" {
		t.Fatalf("peer back %v", w.back)
	}
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: alice.String(), ID: "im_2", Body: "again"}); err != nil {
		t.Fatalf("after alice's probe: %v", err)
	}
	// A blocked bounce: presence does not lift it, alice's message does.
	bounce("im_2", true)
	if len(w.bounces) != 2 || !w.bounces[1].Blocked {
		t.Fatalf("bounces %+v", w.bounces)
	}
	presence("")
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: alice.String(), ID: "im_3", Body: "x"}); !errors.Is(err, backendkit.ErrChatRefused) {
		t.Fatalf("a presence lifted a block: %v", err)
	}
	f.s.handle(ctx, msg(ep, "a1", "unblocked"))
	if err := chat.Send(ctx, backendkit.Message{Endpoint: ep, To: alice.String(), ID: "im_3", Body: "x"}); err != nil {
		t.Fatalf("after alice wrote: %v", err)
	}
	// A bounce of an id we never sent is nobody's.
	bounce("forged", false)
	if len(w.bounces) != 2 {
		t.Fatalf("a forged bounce reached the backend: %+v", w.bounces)
	}
}
