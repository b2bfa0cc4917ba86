package component

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// memRelay is an in-process Relay for the pure logic of forwarding; the
// real one (PostgreSQL LISTEN/NOTIFY) is exercised by e2e/cluster.
type memRelay struct {
	mu   sync.Mutex
	subs map[string][]func([]byte)
	sent int
}

func (r *memRelay) Publish(_ context.Context, ch string, p []byte) error {
	r.mu.Lock()
	fns := append([]func([]byte){}, r.subs[ch]...)
	r.sent++
	r.mu.Unlock()
	for _, f := range fns {
		f(append([]byte(nil), p...))
	}
	return nil
}

func (r *memRelay) Subscribe(ch string, fn func([]byte)) func() {
	r.mu.Lock()
	if r.subs == nil {
		r.subs = map[string][]func([]byte){}
	}
	r.subs[ch] = append(r.subs[ch], fn)
	r.mu.Unlock()
	return func() {}
}

func relayMember(t *testing.T, r *memRelay, instance string, maxBytes int) *Component {
	t.Helper()
	d := jid.MustParse("agents.example.test")
	c := New(Config{Domain: d, Instance: instance, Relay: r, RelayMaxBytes: maxBytes,
		Logger: slog.New(slog.DiscardHandler)}, NewRouter(d, nil, nil))
	r.Subscribe(relayChannelPrefix+instance, c.relayed)
	c.pending.setOpen()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.forwarder(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func answerEl(id, from, typ string, payload *xmltree.Element) *xmltree.Element {
	el := xmltree.New(NSComponent, "iq", "type", typ, "id", id, "from", from, "to", "agents.example.test")
	if payload != nil {
		el.Add(payload)
	}
	return el
}

func waitOutcome(t *testing.T, p *pendingIQ) iqOutcome {
	t.Helper()
	select {
	case out := <-p.ch:
		return out
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter got nothing")
		return iqOutcome{}
	}
}

func TestRelayAnswerReachesTheMemberThatAsked(t *testing.T) {
	r := &memRelay{}
	a, b := relayMember(t, r, "gw-a", 0), relayMember(t, r, "gw-b", 0)
	server := jid.MustParse("example.test")
	id := a.tagID("")
	if idOwner(id) != "gw-a" || !strings.HasPrefix(id, "gw-a~") {
		t.Fatalf("tagged id %q", id)
	}
	if got := a.tagID("caller-id"); got != "gw-a~caller-id" || a.tagID(got) != got {
		t.Fatalf("a caller's id is tagged %q", got)
	}
	p, err := a.pending.register(id, server)
	if err != nil {
		t.Fatal(err)
	}
	// The server handed a's answer to b.
	el := answerEl(id, "example.test", "result", xmltree.New("urn:xmpp:http:upload:0", "slot"))
	b.unmatched(el)
	out := waitOutcome(t, p)
	if out.err != nil || out.el.AttrValue("id") != id || out.el.Child("urn:xmpp:http:upload:0", "slot") == nil {
		t.Fatalf("outcome %+v", out)
	}
	// The counters move after the answer is handed over: wait for them.
	testkit.WaitFor(t, 10*time.Second, "the relay counters", func() bool { return b.forwarded.Load() == 1 && a.relayedIn.Load() == 1 })
	if b.forwarded.Load() != 1 || a.relayedIn.Load() != 1 || a.droppedAnswers.Load()+b.droppedAnswers.Load() != 0 {
		t.Fatalf("forwarded %d relayed %d", b.forwarded.Load(), a.relayedIn.Load())
	}
}

func TestRelayDropsWhatNobodyWaitsFor(t *testing.T) {
	r := &memRelay{}
	a, b := relayMember(t, r, "gw-a", 0), relayMember(t, r, "gw-b", 0)
	// An untagged answer and one tagged with b itself: dropped, not
	// forwarded.
	b.unmatched(answerEl("plain-id", "example.test", "result", nil))
	b.unmatched(answerEl("gw-b~gone", "example.test", "result", nil))
	// Tagged with a, which no longer waits: forwarded once, dropped there
	// and never forwarded again.
	b.unmatched(answerEl("gw-a~gone", "example.test", "result", nil))
	testkit.WaitFor(t, 10*time.Second, "the owner drops the forwarded answer", func() bool { return a.droppedAnswers.Load() == 1 })
	if b.droppedAnswers.Load() != 2 || b.forwarded.Load() != 1 || a.forwarded.Load() != 0 {
		t.Fatalf("b dropped %d forwarded %d, a forwarded %d", b.droppedAnswers.Load(), b.forwarded.Load(), a.forwarded.Load())
	}
	r.mu.Lock()
	sent := r.sent
	r.mu.Unlock()
	if sent != 1 {
		t.Fatalf("%d publications, want 1 (no forwarding loop)", sent)
	}
}

func TestRelayRejectsForgedOrMalformedPayloads(t *testing.T) {
	r := &memRelay{}
	a := relayMember(t, r, "gw-a", 0)
	alice := jid.MustParse("alice@example.test/phone")
	id := a.tagID("")
	p, err := a.pending.register(id, alice)
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{
		`not json`,
		`{"id":"gw-b~x","from":"alice@example.test/phone","xml":"<iq/>"}`,                                                                                                // not ours
		`{"id":"` + id + `","from":"mallory@example.test/x","xml":"<iq xmlns='jabber:component:accept' type='result' id='` + id + `' from='mallory@example.test/x'/>"}`,  // wrong answerer
		`{"id":"` + id + `","from":"alice@example.test/phone","xml":"<iq xmlns='jabber:component:accept' type='get' id='` + id + `' from='alice@example.test/phone'/>"}`, // a request
		`{"id":"` + id + `","from":"alice@example.test/phone","xml":"<message xmlns='jabber:component:accept' id='` + id + `' from='alice@example.test/phone'/>"}`,       // not an iq
		`{"id":"` + id + `","from":"alice@example.test/phone","xml":"<iq xmlns='jabber:component:accept' type='result' id='other' from='alice@example.test/phone'/>"}`,   // id differs
		`{"id":"` + id + `","from":"alice@example.test/phone","xml":"<iq type='result'"}`,                                                                                // truncated
	}
	for _, s := range bad {
		a.relayed([]byte(s))
	}
	select {
	case out := <-p.ch:
		t.Fatalf("a forged or malformed payload completed the wait: %+v", out)
	default:
	}
	if got := a.droppedAnswers.Load(); got != uint64(len(bad)) {
		t.Fatalf("dropped %d of %d", got, len(bad))
	}
	a.relayed([]byte(`{"id":"` + id + `","from":"alice@example.test/phone","xml":"<iq xmlns='jabber:component:accept' type='result' id='` + id + `' from='alice@example.test/phone'/>"}`))
	if out := waitOutcome(t, p); out.err != nil || out.el == nil {
		t.Fatalf("the genuine answer: %+v", out)
	}
}

func TestRelayTooLargeFailsTheWaiterAtOnce(t *testing.T) {
	r := &memRelay{}
	a, b := relayMember(t, r, "gw-a", 0), relayMember(t, r, "gw-b", 512)
	id := a.tagID("")
	p, err := a.pending.register(id, jid.MustParse("example.test"))
	if err != nil {
		t.Fatal(err)
	}
	b.unmatched(answerEl(id, "example.test", "result", xmltree.New("urn:example", "big").WithText(strings.Repeat("x", 4096))))
	if out := waitOutcome(t, p); !errors.Is(out.err, ErrAnswerTooLarge) {
		t.Fatalf("outcome %+v, want ErrAnswerTooLarge", out)
	}
}

func TestStreamHeaderBytes(t *testing.T) {
	d := jid.MustParse("agents.example.test")
	if got, want := streamHeader(d, false), `<stream:stream xmlns='jabber:component:accept' xmlns:stream='http://etherx.jabber.org/streams' to='agents.example.test'>`; got != want {
		t.Errorf("header\n got %s\nwant %s", got, want)
	}
	if got, want := streamHeader(d, true), `<stream:stream xmlns='jabber:component:accept' xmlns:stream='http://etherx.jabber.org/streams' to='agents.example.test' allowMultiple='true'>`; got != want {
		t.Errorf("header with allowMultiple\n got %s\nwant %s", got, want)
	}
}

// TestHandshakeSendsAllowMultiple plays the server's side of XEP-0114 on a
// pipe: the component's first bytes are exactly the header, and the
// handshake digest is SHA-1(stream id + secret).
func TestHandshakeSendsAllowMultiple(t *testing.T) {
	for _, allow := range []bool{true, false} {
		cli, srv := net.Pipe()
		d := jid.MustParse("agents.example.test")
		want := streamHeader(d, allow)
		errc := make(chan error, 1)
		go func() {
			defer srv.Close()
			buf := make([]byte, len(want))
			if _, err := io.ReadFull(srv, buf); err != nil {
				errc <- err
				return
			}
			if string(buf) != want {
				errc <- errors.New("header " + string(buf))
				return
			}
			io.WriteString(srv, `<?xml version='1.0'?><stream:stream xmlns:stream='http://etherx.jabber.org/streams' xmlns='jabber:component:accept' id='3BF96D32' from='agents.example.test'>`)
			rd := bufio.NewReader(srv)
			hs, err := rd.ReadString('>')
			if err == nil {
				var rest string
				rest, err = rd.ReadString('>')
				hs += rest
			}
			if err != nil {
				errc <- err
				return
			}
			if hs != "<handshake>"+handshakeDigest("3BF96D32", []byte("s3cret"))+"</handshake>" {
				errc <- errors.New("handshake " + hs)
				return
			}
			io.WriteString(srv, `<handshake/>`)
			errc <- nil
			io.Copy(io.Discard, srv)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		sess, err := newSession(ctx, d, []byte("s3cret"), allow, cli)
		cancel()
		if err != nil {
			t.Fatalf("allowMultiple=%v: %v", allow, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("allowMultiple=%v: server saw %v", allow, err)
		}
		cli.Close()
		_ = sess
	}
	// SHA-1 of the stream id and the secret, in lower-case hex.
	if got := handshakeDigest("3BF96D32", []byte("secret")); got != "b09ea9b3b7f586be8a08d0a3dd7466f110aeb136" {
		t.Fatalf("digest %q", got)
	}
}

// TestSendIQTimeoutLogsOneLine: an answer that never arrives (in a
// cluster: lost with a dead member, or dropped on the way) leaves one
// clear log line naming the IQ, and the id the member sent is tagged.
func TestSendIQTimeoutLogsOneLine(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var buf strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	c := newTestComponent(t, Config{IQTimeout: 5 * time.Second, Clock: fake, Logger: log, Instance: "gw-1", Relay: &memRelay{}})
	c.pending.setOpen()
	errc := make(chan error, 1)
	iq := NewIQ("get", "", c.Domain(), jid.MustParse("upload.example.test"), xmltree.New("urn:xmpp:http:upload:0", "request"))
	go func() {
		_, err := c.SendIQ(context.Background(), iq)
		errc <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "the IQ is pending", func() bool { return c.Stats().PendingIQs == 1 })
	fake.Advance(5 * time.Second)
	if err := <-errc; !errors.Is(err, ErrIQTimeout) {
		t.Fatalf("got %v", err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	id := iq.AttrValue("id")
	if idOwner(id) != "gw-1" {
		t.Fatalf("id %q is not tagged with the instance", id)
	}
	if strings.Count(out, "component: no answer to an IQ in time") != 1 || !strings.Contains(out, "id="+id) ||
		!strings.Contains(out, "urn:xmpp:http:upload:0 request") || !strings.Contains(out, "to=upload.example.test") {
		t.Fatalf("log:\n%s", out)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
