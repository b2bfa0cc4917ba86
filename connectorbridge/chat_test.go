package connectorbridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/internal/transfer"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/testkit"
)

// These tests wire the IM v2 side against the reference connector with a
// recording Chat (the messaging package's side) and an in-process file
// host standing in for the XEP-0363 service; the proof through Prosody is
// in e2e/messaging.

const inbox = "alice@example.test"

// recChat records what the bridge asks the XMPP side to do.
type recChat struct {
	mu       sync.Mutex
	sent     []backendkit.Message
	acks     []backendkit.Ack
	activity []backendkit.Activity
	fail     bool
}

func (r *recChat) Send(_ context.Context, m backendkit.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return errors.New("xmpp down")
	}
	r.sent = append(r.sent, m)
	return nil
}

func (r *recChat) Ack(_ context.Context, a backendkit.Ack) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, a)
	return nil
}

func (r *recChat) Activity(_ context.Context, a backendkit.Activity) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.activity = append(r.activity, a)
	return nil
}

func (r *recChat) messages() []backendkit.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]backendkit.Message(nil), r.sent...)
}

// fileHost is an HTTP file store that plays the XEP-0363 service.
type fileHost struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	n     int
	gets  int
}

func newFileHost(t *testing.T) *fileHost {
	h := &fileHost{files: map[string][]byte{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		b, ok := h.files[r.URL.Path]
		h.gets++
		h.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *fileHost) Upload(_ context.Context, from, name, mt string, data []byte) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	p := fmt.Sprintf("/up/%d/%s", h.n, name)
	h.files[p] = append([]byte(nil), data...)
	return h.srv.URL + p, nil
}

func (h *fileHost) Origins() []string { return []string{h.srv.URL} }

func (h *fileHost) put(path string, data []byte) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[path] = data
	return h.srv.URL + path
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type chatEnv struct {
	*env
	chats *sqlite.Chats
	host  *fileHost
	chat  *recChat
	db    string
}

func newChatEnv(t *testing.T, opts ...envOpt) *chatEnv {
	opts = append([]envOpt{func(so *connectortest.Options, _ *Options) { so.RetryInterval = 100 * time.Millisecond }}, opts...)
	e := &chatEnv{env: newEnv(t, opts...), host: newFileHost(t), chat: &recChat{}}
	e.db = filepath.Join(e.dir, "chat.db")
	e.openChats()
	e.authForm()
	return e
}

func (e *chatEnv) openChats() {
	db, err := sqlite.Open(context.Background(), e.db)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	e.chats = sqlite.NewChats(db)
}

func (e *chatEnv) startChat(attach bool, mod func(*Options)) *Backend {
	b := e.start(func(o *Options) {
		o.Inbox, o.Chats, o.Uploader = inbox, e.chats, e.host
		o.ChatLimits.Retry = 50 * time.Millisecond
		if mod != nil {
			mod(o)
		}
	})
	if attach {
		b.AttachChat(e.chat)
	}
	testkit.WaitFor(e.t, 10*time.Second, "CanConverse", func() bool { return b.CanConverse(e.endpoint) })
	return b
}

func (e *chatEnv) waitSent(n int) []backendkit.Message {
	e.t.Helper()
	testkit.WaitFor(e.t, 10*time.Second, fmt.Sprintf("%d messages to the inbox", n), func() bool { return len(e.chat.messages()) >= n })
	return e.chat.messages()
}

func fetch(t *testing.T, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

func TestChatInboundReachesInboxWithFile(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	b := e.startChat(true, nil)
	data := []byte("\x89PNG fake image bytes " + strings.Repeat("x", 5000))
	id := e.srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_bob", SenderName: "Bob", Text: "hello <b>there</b> & \x01bye",
		Files: []connectortest.IMFile{{Name: "../../etc/pic.png", MimeType: "image/png", Data: data}}})
	msgs := e.waitSent(1)
	m := msgs[0]
	ch := b.Client().ChannelID()
	if m.Endpoint != e.endpoint || m.Resource != ch || m.To != inbox || m.Thread != "conv_bob" || m.Nick != "Bob" {
		t.Fatalf("message addressing = %+v (channel %s)", m, ch)
	}
	// Markup stays text; the XML-illegal control character is replaced.
	if m.Body != "hello <b>there</b> & \uFFFDbye" {
		t.Fatalf("body = %q", m.Body)
	}
	if m.ID != "im_"+id {
		t.Fatalf("id = %q, want im_%s", m.ID, id)
	}
	if len(m.Files) != 1 || m.Files[0].Name != "pic.png" || m.Files[0].MediaType != "image/png" {
		t.Fatalf("files = %+v", m.Files)
	}
	if got := fetch(t, m.Files[0].URL); sum(got) != sum(data) || m.Files[0].SHA256 != sum(data) {
		t.Fatal("the offered file differs from the IM file")
	}
	testkit.WaitFor(t, 5*time.Second, "the connector to see the ack", func() bool { return len(e.srv.Unacknowledged()) == 0 })
	acks := e.srv.InboundAcks()
	if len(acks) == 0 || acks[0].MessageID != id || acks[0].Code != "" {
		t.Fatalf("acks = %+v", acks)
	}
	// Redelivery of the same id (the connector lost our ack) is acked
	// again and not delivered twice.
	e.srv.InjectMessage(connectortest.IMMessage{MessageID: id, Conversation: "conv_bob", Text: "hello again"})
	testkit.WaitFor(t, 5*time.Second, "the second ack", func() bool { return len(e.srv.InboundAcks()) >= 2 })
	e.srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_bob", Text: "second", ReplyTo: id})
	msgs = e.waitSent(2)
	time.Sleep(300 * time.Millisecond) // let a wrong duplicate show up
	if msgs = e.chat.messages(); len(msgs) != 2 || msgs[1].Body != "second" {
		t.Fatalf("inbox got %d messages, last %q; want 2 (no duplicate)", len(msgs), msgs[len(msgs)-1].Body)
	}
	if msgs[1].ReplyTo != "im_"+id {
		t.Fatalf("reply to %q, want the XMPP id of the first message", msgs[1].ReplyTo)
	}
}

func TestChatReplyReachesIMWithFileAndReceipt(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	b := e.startChat(true, nil)
	e.srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_bob", Text: "ping"})
	in := e.waitSent(1)[0]
	data := []byte(strings.Repeat("report line\n", 2000))
	u := e.host.put("/shared/report.txt", data)
	turn := backendkit.Turn{Endpoint: e.endpoint, Resource: in.Resource, From: inbox + "/phone", ID: "origin-1",
		Thread: "conv_bob", Body: "pong", ReplyTo: in.ID, ReceiptRequested: true,
		Files: []backendkit.File{{URL: u, Name: "report.txt", MediaType: "text/plain"}}}
	if err := b.Converse(context.Background(), turn); err != nil {
		t.Fatal(err)
	}
	// The same turn again (an XMPP resend) is not sent twice.
	if err := b.Converse(context.Background(), turn); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the reply on the IM side", func() bool { return len(e.srv.Outbound()) == 1 })
	out := e.srv.Outbound()[0]
	if out.Text != "pong" || out.Conversation != "conv_bob" || out.ChannelID != in.Resource || out.ReplyTo != strings.TrimPrefix(in.ID, "im_") {
		t.Fatalf("outbound = %+v", out)
	}
	if len(out.Files) != 1 || out.Files[0].SHA256 != sum(data) || out.Files[0].Filename != "report.txt" {
		t.Fatalf("outbound files = %+v", out.Files)
	}
	testkit.WaitFor(t, 5*time.Second, "the receipt", func() bool {
		e.chat.mu.Lock()
		defer e.chat.mu.Unlock()
		return len(e.chat.acks) == 1
	})
	e.chat.mu.Lock()
	a := e.chat.acks[0]
	e.chat.mu.Unlock()
	if a.To != inbox+"/phone" || a.ID != "origin-1" || a.Resource != in.Resource {
		t.Fatalf("receipt = %+v", a)
	}
	time.Sleep(200 * time.Millisecond)
	for id, n := range e.srv.OutboundReceipts() {
		if n != 1 {
			t.Fatalf("message %s reached the connector %d times", id, n)
		}
	}
	// Activity from the IM side becomes a chat state to the inbox.
	e.srv.SendActivity("conv_bob", "typing")
	testkit.WaitFor(t, 5*time.Second, "composing", func() bool {
		e.chat.mu.Lock()
		defer e.chat.mu.Unlock()
		return len(e.chat.activity) == 1 && e.chat.activity[0].State == backendkit.ChatComposing && e.chat.activity[0].To == inbox
	})
}

func TestChatRefusesOthersAndOversize(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	b := e.startChat(true, nil)
	ch := b.Client().ChannelID()
	ctx := context.Background()
	if err := b.Converse(ctx, backendkit.Turn{From: "mallory@example.test/x", Resource: ch, Body: "hi", ID: "1"}); !errors.Is(err, errNotInbox) {
		t.Fatalf("a stranger's turn: %v", err)
	}
	if err := b.Converse(ctx, backendkit.Turn{From: inbox, Resource: "cch_nope", Body: "hi", ID: "2"}); !errors.Is(err, errNoChannel) {
		t.Fatalf("an unknown resource: %v", err)
	}
	if err := b.Converse(ctx, backendkit.Turn{From: inbox, Resource: ch, Body: strings.Repeat("a", 64<<10+1), ID: "3"}); !errors.Is(err, backendkit.ErrChatTooLarge) {
		t.Fatalf("an oversize body: %v", err)
	}
	id := e.srv.InjectMessage(connectortest.IMMessage{Text: strings.Repeat("b", 64<<10+1)})
	testkit.WaitFor(t, 5*time.Second, "the refusal", func() bool { return len(e.srv.InboundAcks()) > 0 })
	if a := e.srv.InboundAcks()[0]; a.MessageID != id || a.Code != "chat_message_rejected" {
		t.Fatalf("oversize ack = %+v", a)
	}
	if len(e.srv.Unacknowledged()) != 0 {
		t.Fatal("a refused message is still pending at the connector")
	}
	if n := len(e.chat.messages()); n != 0 {
		t.Fatalf("%d messages reached the inbox", n)
	}
}

func TestChatHostileFiles(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	other := newFileHost(t)
	offHost := other.put("/evil.bin", []byte("not for you"))
	// A redirect from the connector's own origin to another host.
	redir := httptest.NewServer(http.RedirectHandler(offHost, http.StatusFound))
	t.Cleanup(redir.Close)
	e.startChat(true, func(o *Options) { o.ChatLimits.MaxFileBytes = 1000 })
	e.srv.InjectMessage(connectortest.IMMessage{Text: "files", Files: []connectortest.IMFile{
		{Name: "a.bin", DownloadURL: offHost},
		{Name: "r.bin", RedirectTo: offHost},
		{Name: "big.bin", Data: make([]byte, 1001)},
		{Name: "ok.bin", Data: []byte("fine")},
	}})
	m := e.waitSent(1)[0]
	if len(m.Files) != 1 || m.Files[0].Name != "ok.bin" {
		t.Fatalf("files = %+v", m.Files)
	}
	for _, want := range []string{`[file "a.bin" was not transferred: its address is not on an allowed host]`,
		`[file "big.bin" was not transferred: it is too large]`,
		`[file "r.bin" was not transferred: it redirected elsewhere]`} {
		if !strings.Contains(m.Body, want) {
			t.Fatalf("body %q lacks %q", m.Body, want)
		}
	}
	if strings.Contains(m.Body, other.srv.URL) {
		t.Fatal("the body reflects the hostile URL")
	}
	other.mu.Lock()
	gets := other.gets
	other.mu.Unlock()
	if gets != 0 {
		t.Fatalf("the other host was fetched from %d times", gets)
	}
	// An XMPP user's file on an origin that is not allowed is not fetched.
	ch := e.b.Client().ChannelID()
	if err := e.b.Converse(context.Background(), backendkit.Turn{From: inbox, Resource: ch, ID: "f1", Body: "see",
		Files: []backendkit.File{{URL: offHost, Name: "x.bin"}}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the reply", func() bool { return len(e.srv.Outbound()) == 1 })
	if out := e.srv.Outbound()[0]; len(out.Files) != 0 || !strings.Contains(out.Text, "not on an allowed host") {
		t.Fatalf("outbound = %+v", out)
	}
	// A same-origin redirect chain that leaves the origin is refused.
	fe := transfer.Fetcher{Allow: []string{redir.URL}}
	if _, err := fe.Fetch(context.Background(), redir.URL+"/x"); !errors.Is(err, transfer.ErrRedirect) {
		t.Fatalf("redirect off the origin: %v", err)
	}
}

func TestChatFloodIsBounded(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	e.startChat(true, func(o *Options) { o.ChatLimits.Burst, o.ChatLimits.PerMinute = 5, 1 })
	for i := 0; i < 20; i++ {
		e.srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_flood", MessageID: fmt.Sprintf("flood_%d", i), Text: "spam"})
	}
	e.waitSent(5)
	testkit.WaitFor(t, 5*time.Second, "rate-limited acks", func() bool {
		n := 0
		for _, a := range e.srv.InboundAcks() {
			if a.Code == "chat_rate_limited" {
				n++
			}
		}
		return n >= 15
	})
	time.Sleep(200 * time.Millisecond)
	if n := len(e.chat.messages()); n != 5 {
		t.Fatalf("inbox got %d messages, want the burst of 5", n)
	}
	// Refusals are logged a bounded number of times.
	if n := strings.Count(e.logs.String(), "inbound chat message refused"); n > 5 {
		t.Fatalf("refusal logged %d times", n)
	}
	// Another conversation is not starved.
	e.srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_calm", Text: "hi"})
	e.waitSent(6)
}

func TestChatSurvivesGatewayRestart(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	// First gateway: no XMPP side attached, so the message is accepted
	// (durable, acked) but not delivered.
	b1, err := New(e.backendOptions(func(o *Options) {
		o.Inbox, o.Chats, o.Uploader = inbox, e.chats, e.host
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan struct{})
	go func() { b1.Start(ctx1); close(done1) }()
	testkit.WaitFor(t, 10*time.Second, "first gateway", func() bool { return b1.CanConverse(e.endpoint) })
	id := e.srv.InjectMessage(connectortest.IMMessage{Text: "while you were out"})
	testkit.WaitFor(t, 5*time.Second, "the ack", func() bool { return len(e.srv.Unacknowledged()) == 0 })
	n, _ := e.chats.Backlog(context.Background(), e.endpoint, "in", "")
	if n != 1 {
		t.Fatalf("backlog = %d, want 1", n)
	}
	cancel1()
	<-done1
	// The connector restarts too and redelivers nothing (it had the ack).
	if err := e.srv.Restart(50 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The second gateway on the same store delivers it once.
	e.openChats()
	e.startChat(true, nil)
	msgs := e.waitSent(1)
	time.Sleep(300 * time.Millisecond)
	if msgs = e.chat.messages(); len(msgs) != 1 || msgs[0].ID != "im_"+id {
		t.Fatalf("after restart the inbox got %+v", msgs)
	}
}

func TestChatOutboundSurvivesConnectorRestart(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	b := e.startChat(true, nil)
	ch := b.Client().ChannelID()
	e.srv.Close() // the connector goes away
	testkit.WaitFor(t, 5*time.Second, "the data plane to drop", func() bool { s, _, _, _ := b.c.live(); return s == nil })
	if err := b.Converse(context.Background(), backendkit.Turn{From: inbox, Resource: ch, ID: "while-down", Body: "queued"}); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Restart(0); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the queued reply after the restart", func() bool { return len(e.srv.Outbound()) == 1 })
	if out := e.srv.Outbound()[0]; out.Text != "queued" {
		t.Fatalf("outbound = %+v", out)
	}
}

// A maximal message of characters JSON would escape still fits the queue.
func TestChatMaximalEscapableText(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	e.startChat(true, nil)
	text := strings.Repeat("<&>", (64<<10)/3)
	id := e.srv.InjectMessage(connectortest.IMMessage{Text: text})
	m := e.waitSent(1)[0]
	if m.Body != text || m.ID != "im_"+id {
		t.Fatalf("body of %d bytes, id %s", len(m.Body), m.ID)
	}
}

// A refusal that says "retry later" carries error.retryable, so a
// connector can tell it from a final one without knowing the codes.
func TestChatRetryLaterRefusalsAreMarked(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	e.startChat(true, func(o *Options) { o.ChatLimits.Burst, o.ChatLimits.PerMinute = 1, 1 })
	e.srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_r", MessageID: "r_0", Text: "first"})
	e.srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_r", MessageID: "r_1", Text: "too soon"})
	e.srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_big", MessageID: "big_0", Text: strings.Repeat("a", 64<<10+1)})
	find := func(id, code string) (connectortest.InboundAck, bool) {
		for _, a := range e.srv.InboundAcks() {
			if a.MessageID == id && a.Code == code {
				return a, true
			}
		}
		return connectortest.InboundAck{}, false
	}
	testkit.WaitFor(t, 10*time.Second, "the rate-limited and the rejected acks", func() bool {
		_, a := find("r_1", "chat_rate_limited")
		_, b := find("big_0", "chat_message_rejected")
		return a && b
	})
	if a, _ := find("r_1", "chat_rate_limited"); !a.Retryable {
		t.Errorf("chat_rate_limited ack without the retryable marker: %+v", a)
	}
	if a, _ := find("big_0", "chat_message_rejected"); a.Retryable {
		t.Errorf("a final refusal is marked retryable: %+v", a)
	}
	if a, ok := find("r_0", ""); !ok || a.Retryable {
		t.Errorf("the accepted message's ack: %+v %v", a, ok)
	}
}

// An inbound message the inbox bounces stays queued, is held until the
// inbox is back and then sent again; one that keeps bouncing fails for
// good after MaxBounces, and the connector is told with a final ack.
func TestChatBouncedInboundStaysQueued(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	b := e.startChat(true, func(o *Options) { o.ChatLimits.MaxBounces = 3 })
	ctx := context.Background()
	backlog := func() int {
		n, err := e.chats.Backlog(ctx, e.endpoint, "in", "")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	bounce := func(id string) {
		b.ChatBounced(backendkit.Bounce{Endpoint: e.endpoint, Resource: "x", Peer: inbox, ID: "im_" + id, Condition: "service-unavailable"})
	}
	id := e.srv.InjectMessage(connectortest.IMMessage{Text: "are you there?"})
	e.waitSent(1)
	bounce(id)
	testkit.WaitFor(t, 10*time.Second, "the bounced message queued again", func() bool { return backlog() == 1 })
	time.Sleep(time.Second)
	if n := len(e.chat.messages()); n != 1 || backlog() != 1 {
		t.Fatalf("after the bounce: %d sent, backlog %d; want 1 sent, 1 queued (held)", n, backlog())
	}
	b.ChatPeerBack(e.endpoint, inbox)
	msgs := e.waitSent(2)
	if msgs[1].ID != "im_"+id {
		t.Fatalf("resent %+v", msgs[1])
	}
	testkit.WaitFor(t, 15*time.Second, "the resent message delivered", func() bool { return backlog() == 0 })
	for _, a := range e.srv.InboundAcks() {
		if a.MessageID == id && a.Code != "" {
			t.Fatalf("the connector got a failure for a delivered message: %+v", a)
		}
	}

	// One that keeps bouncing.
	id2 := e.srv.InjectMessage(connectortest.IMMessage{Text: "hello?"})
	for i := 0; i < 3; i++ {
		e.waitSent(3 + i)
		bounce(id2)
		if i < 2 {
			time.Sleep(200 * time.Millisecond)
			b.ChatPeerBack(e.endpoint, inbox)
		}
	}
	var fail connectortest.InboundAck
	testkit.WaitFor(t, 15*time.Second, "the final failure ack", func() bool {
		for _, a := range e.srv.InboundAcks() {
			if a.MessageID == id2 && a.Code != "" {
				fail = a
				return true
			}
		}
		return false
	})
	if fail.Code != "chat_message_undeliverable" || fail.Retryable || fail.Status != "failed" {
		t.Fatalf("final ack %+v", fail)
	}
	// The connector is told first and the message finished after, so that
	// a crash in between tells it again rather than never.
	testkit.WaitFor(t, 15*time.Second, "the failed message out of the queue", func() bool { return backlog() == 0 })
	b.ChatPeerBack(e.endpoint, inbox)
	time.Sleep(500 * time.Millisecond)
	if n := len(e.chat.messages()); n != 5 {
		t.Fatalf("%d messages sent, want 5 (no send after the failure)", n)
	}
}

// A held message that expires while the data plane is down is not
// finished silently: it waits for the data plane, and the connector gets
// the final chat_message_undeliverable ack once it is back.
func TestChatExpiryNoticeWaitsForDataPlane(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	b := e.startChat(true, nil)
	id := e.srv.InjectMessage(connectortest.IMMessage{Text: "soon gone", ExpiresAt: time.Now().Add(5 * time.Second)})
	e.waitSent(1)
	b.ChatBounced(backendkit.Bounce{Endpoint: e.endpoint, Peer: inbox, ID: "im_" + id, Condition: "service-unavailable"})
	restarted := make(chan error, 1)
	go func() { restarted <- e.srv.Restart(8 * time.Second) }()
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	var fail connectortest.InboundAck
	testkit.WaitFor(t, 30*time.Second, "the final failure ack after the data plane is back", func() bool {
		for _, a := range e.srv.InboundAcks() {
			if a.MessageID == id && a.Code != "" {
				fail = a
				return true
			}
		}
		return false
	})
	if fail.Code != "chat_message_undeliverable" || fail.Retryable || fail.Status != "failed" {
		t.Fatalf("final ack %+v", fail)
	}
	testkit.WaitFor(t, 10*time.Second, "the expired message finished", func() bool {
		n, _ := e.chats.Backlog(context.Background(), e.endpoint, "in", "")
		return n == 0
	})
	if n := len(e.chat.messages()); n != 1 {
		t.Fatalf("the expired message was sent %d times", n)
	}
}

// A bounce is re-queued durably before ChatBounced returns, not on the
// next delivery pass: a kill -9 right after the bounce must not leave the
// message counted delivered.
func TestChatBounceQueuedBeforeItReturns(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t)
	b := e.startChat(true, nil)
	ctx := context.Background()
	id := e.srv.InjectMessage(connectortest.IMMessage{Text: "still there?"})
	e.waitSent(1)
	testkit.WaitFor(t, 10*time.Second, "the message marked delivered", func() bool {
		st, found, err := e.chats.Lookup(ctx, e.endpoint, "in", id)
		return err == nil && found && st == chatdb.Delivered
	})
	b.ChatBounced(backendkit.Bounce{Endpoint: e.endpoint, Resource: "x", Peer: inbox, ID: "im_" + id, Condition: "recipient-unavailable"})
	st, found, err := e.chats.Lookup(ctx, e.endpoint, "in", id)
	if err != nil || !found || st != chatdb.Pending {
		t.Fatalf("right after the bounce the message is %q (found %v, err %v), want pending", st, found, err)
	}
}
