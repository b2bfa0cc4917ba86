package messaging

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// The xAgent IM Profile v2 through Prosody, the reference connector and
// the slixmpp inbox (testdata/slixmpp/iminbox.py): the sender's name, a
// file pending at the gateway's start, and an inbox that bounces.

// imEnv is one IM deployment: the reference connector, Prosody and the
// gateway config (not started).
type imEnv struct {
	srv    *connectortest.Server
	server *xmppharness.Server
	e      *e2e.Env
	ep     string
}

func newIMEnv(t *testing.T, po xmppharness.ProsodyOptions, extra func(*xmppharness.Server) string) *imEnv {
	t.Helper()
	e2e.NeedSlixmpp(t)
	srv, err := connectortest.Start(connectortest.Options{APIKey: e2e.ConnectorKey, FormToken: e2e.FormToken, RetryInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("AGENTGW_TEST_CONNECTOR_KEY", e2e.ConnectorKey)
	t.Setenv("AGENTGW_TEST_FORM_TOKEN", e2e.FormToken)
	server := xmppharness.StartProsody(t, po)
	more := ""
	if extra != nil {
		more = extra(server)
	}
	e := e2e.Prepare(t, e2e.Options{Server: server, Users: []string{"alice"}, TOML: fmt.Sprintf(`
[[agents]]
jid = "im@%s"
[agents.connector]
base_url = %q
api_key_env = "AGENTGW_TEST_CONNECTOR_KEY"
inbox = %q
%s
`, server.ComponentDomain, srv.URL(), "alice@"+server.Domain, more)})
	return &imEnv{srv: srv, server: server, e: e, ep: e.Endpoint("im").String()}
}

func (m *imEnv) auth() {
	m.e.Agentgw(0, "connector", "auth", "--config", m.e.ConfigPath, "--flow", "token_form",
		"--field", "account=alice", "--field-env", "token=AGENTGW_TEST_FORM_TOKEN", m.ep)
}

// inject writes msg on the IM network once a channel is signed in.
func (m *imEnv) inject(t *testing.T, msg connectortest.IMMessage) string {
	t.Helper()
	var id string
	testkit.WaitFor(t, 30*time.Second, "a signed-in channel at the connector", func() bool {
		id = m.srv.InjectMessage(msg)
		return id != ""
	})
	return id
}

// quit logs the inbox out and waits for its process to end.
func (h *inboxHuman) quit() {
	h.t.Helper()
	h.stdin.Write([]byte(`{"cmd":"quit"}` + "\n"))
	done := make(chan struct{})
	go func() { h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		h.t.Fatal("the inbox client did not log out")
	}
}

// subscribe asks for a presence subscription to to.
func (h *inboxHuman) subscribe(to string) {
	h.t.Helper()
	b, _ := json.Marshal(map[string]any{"cmd": "subscribe", "to": to})
	if _, err := h.stdin.Write(append(b, '\n')); err != nil {
		h.t.Fatal(err)
	}
}

// messagesWith lists the inbox's chat messages with origin-id im_<id>.
func (h *inboxHuman) messagesWith(id string) []map[string]any {
	var out []map[string]any
	for _, m := range h.of("message") {
		if m["origin_id"] == "im_"+id {
			out = append(out, m)
		}
	}
	return out
}

// TestIMSenderNickThroughProsody: the IM sender's display_name, where the
// seeds put it (seeds/000 §8.21: sender_id and display_name at the top of
// the payload), reaches the XMPP user as the message's XEP-0172 nick.
func TestIMSenderNickThroughProsody(t *testing.T) {
	m := newIMEnv(t, xmppharness.ProsodyOptions{}, nil)
	m.e.Serve("gw")
	m.auth()
	alice := startInbox(t, m.e, "alice")
	id := m.inject(t, connectortest.IMMessage{Conversation: "conv_alex", SenderID: "wx_user_1", SenderName: "Alex Example", Text: "going to sleep"})
	in := alice.wait(60*time.Second, "the IM message at the inbox", func(ev map[string]any) bool {
		return ev["event"] == "message" && ev["origin_id"] == "im_"+id
	})
	if in["nick"] != "Alex Example" {
		t.Fatalf("the inbox sees nick %q, want the IM sender's display_name %q (message %v)", in["nick"], "Alex Example", in)
	}
}

// TestIMFilePendingAtStartWaitsForComponent: an inbound IM message with a
// file that the connector holds while the gateway is down is taken at the
// gateway's start, before its component stream is up (the XMPP server is
// still down); it waits for the stream and its file reaches the inbox
// byte-identical through the configured XEP-0363 service.
func TestIMFilePendingAtStartWaitsForComponent(t *testing.T) {
	// upload_service is configured (no discovery).
	m := newIMEnv(t, xmppharness.ProsodyOptions{HTTPUpload: true}, func(s *xmppharness.Server) string {
		return fmt.Sprintf("upload_service = %q", s.UploadDomain)
	})
	gw := m.e.Serve("gw1")
	m.auth()
	testkit.WaitFor(t, 30*time.Second, "a signed-in channel at the connector", func() bool { return m.srv.InjectMessage(connectortest.IMMessage{Text: "warm-up"}) != "" })
	testkit.WaitFor(t, 30*time.Second, "the warm-up acknowledged", func() bool { return len(m.srv.Unacknowledged()) == 0 })
	gw.Stop()
	if err := m.server.Stop(); err != nil {
		t.Fatal(err)
	}
	// Queued at the connector while the gateway is down.
	pic := make([]byte, 120<<10)
	rand.Read(pic)
	id := m.inject(t, connectortest.IMMessage{Conversation: "conv_pic", SenderName: "Bob", Text: "a picture",
		Files: []connectortest.IMFile{{Name: "cat.png", MimeType: "image/png", Data: pic}}})

	// The gateway starts with the XMPP server down: it takes the message
	// (acknowledges it, stored) while no component stream can be up. The
	// XMPP server comes back a few seconds later.
	started := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(90 * time.Second)
		for len(m.srv.Unacknowledged()) != 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(4 * time.Second) // room for a too-early delivery to happen
		started <- m.server.Start(t.Context())
	}()
	gw2 := m.e.Serve("gw2") // returns once the component is connected
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if slices.Contains(m.srv.Unacknowledged(), id) {
		t.Fatal("the message was not acknowledged before the XMPP server came back")
	}
	alice := startInbox(t, m.e, "alice") // offline storage hands it over
	in := alice.wait(90*time.Second, "the pending message at the inbox", func(ev map[string]any) bool {
		return ev["event"] == "message" && ev["origin_id"] == "im_"+id
	})
	files, _ := in["files"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["sha256"] != hexSum(pic) || strings.Contains(in["body"].(string), "not transferred") {
		t.Fatalf("the file did not arrive byte-identical: %v\ngateway log:\n%s", in, e2e.Tail(gw2.Log(), 4000))
	}
	time.Sleep(2 * time.Second)
	if n := len(alice.messagesWith(id)); n != 1 {
		t.Fatalf("the message reached the inbox %d times", n)
	}
}

// TestIMInboxBounceKeepsMessageQueued: the inbox is offline and Prosody
// has no offline storage, so it bounces the IM message with
// service-unavailable. The message is back in the queue (pending, not
// left as delivered), is delivered exactly once when the inbox is back (its login
// probes the endpoint it subscribed to), and a message that expires while
// the inbox is away ends with a final chat_message_undeliverable ack to
// the IM side instead of a silent loss.
func TestIMInboxBounceKeepsMessageQueued(t *testing.T) {
	m := newIMEnv(t, xmppharness.ProsodyOptions{DisabledModules: []string{"offline"}}, nil)
	gw := m.e.Serve("gw")
	m.auth()
	db := filepath.Join(m.e.Dir, "agentgw.db")
	alice := startInbox(t, m.e, "alice")
	alice.subscribe(m.ep)
	alice.wait(30*time.Second, "the subscription to the endpoint approved", func(ev map[string]any) bool {
		return ev["event"] == "subscribed" && ev["from"] == m.ep
	})
	first := m.inject(t, connectortest.IMMessage{Conversation: "conv_b", SenderName: "Bob", Text: "hello"})
	alice.wait(60*time.Second, "the first message", func(ev map[string]any) bool { return ev["origin_id"] == "im_"+first })
	alice.quit()

	// The inbox is away: Prosody bounces the next message.
	away := m.inject(t, connectortest.IMMessage{Conversation: "conv_b", SenderName: "Bob", Text: "while you were away"})
	gw.WaitLog("bounced", 60*time.Second)
	time.Sleep(8 * time.Second) // room for a retry or two; the inbox is still away
	if !pendingIn(t, db)[away] {
		t.Fatalf("the bounced message is not queued (it was left finished as delivered)\ngateway log:\n%s", e2e.Tail(gw.Log(), 3000))
	}

	// The inbox is back: its login probes the endpoint; the message is
	// delivered once.
	alice2 := startInbox(t, m.e, "alice")
	alice2.wait(60*time.Second, "the bounced message after the inbox came back", func(ev map[string]any) bool {
		return ev["event"] == "message" && ev["origin_id"] == "im_"+away
	})
	if !strings.Contains(gw.Log(), "the inbox is back") {
		t.Errorf("the message went out without the inbox's return being seen (a probe timer?)\n%s", e2e.Tail(gw.Log(), 3000))
	}
	testkit.WaitFor(t, 30*time.Second, "the delivered message to leave the queue", func() bool { return !pendingIn(t, db)[away] })
	time.Sleep(3 * time.Second)
	if n := len(alice2.messagesWith(away)); n != 1 {
		t.Fatalf("the bounced message reached the inbox %d times", n)
	}
	for _, a := range m.srv.InboundAcks() {
		if a.MessageID == away && a.Code != "" {
			t.Fatalf("the IM side got a failure for a message that was delivered: %+v", a)
		}
	}
	alice2.quit()

	// A message that expires while the inbox bounces ends with a clear,
	// final failure on the IM side.
	doomed := m.inject(t, connectortest.IMMessage{Conversation: "conv_b", Text: "short-lived", ExpiresAt: time.Now().Add(12 * time.Second)})
	var fail connectortest.InboundAck
	testkit.WaitFor(t, 90*time.Second, "the final failure ack on the IM side", func() bool {
		for _, a := range m.srv.InboundAcks() {
			if a.MessageID == doomed && a.Code != "" {
				fail = a
				return true
			}
		}
		return false
	})
	if fail.Code != "chat_message_undeliverable" || fail.Retryable || fail.Status != "failed" {
		t.Fatalf("final failure ack: %+v", fail)
	}
	// The IM side is told first and the message finished after (a crash in
	// between tells it again), so the queue empties just after the ack.
	testkit.WaitFor(t, 30*time.Second, "the expired message out of the queue", func() bool { return !pendingIn(t, db)[doomed] })
	alice3 := startInbox(t, m.e, "alice")
	time.Sleep(4 * time.Second)
	if n := len(alice3.messagesWith(doomed)); n != 0 {
		t.Fatalf("the expired message was delivered after its failure was reported (%d times)", n)
	}
}
