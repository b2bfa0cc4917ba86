package oan

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/oantest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// ownerInbox is what the owner's own XMPP client (through Prosody)
// receives from the endpoint: chat bodies and presence types.
type ownerInbox struct {
	mu       sync.Mutex
	bodies   []string
	presence []string
}

func watchOwner(conn *xmppclient.Client, ep string) *ownerInbox {
	in := &ownerInbox{}
	conn.OnMessage(func(m *xmltree.Element) {
		if !strings.HasPrefix(m.AttrValue("from"), ep) {
			return
		}
		if body := m.Child("", "body"); body != nil {
			in.mu.Lock()
			in.bodies = append(in.bodies, body.Text)
			in.mu.Unlock()
		}
	})
	conn.OnPresence(func(p *xmltree.Element) {
		if strings.SplitN(p.AttrValue("from"), "/", 2)[0] != ep {
			return
		}
		typ := p.AttrValue("type")
		if typ == "" {
			typ = "available"
		}
		in.mu.Lock()
		in.presence = append(in.presence, typ)
		in.mu.Unlock()
	})
	return in
}

func (in *ownerInbox) has(sub string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, b := range in.bodies {
		if strings.Contains(b, sub) {
			return true
		}
	}
	return false
}

func (in *ownerInbox) all() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.bodies...)
}

func (in *ownerInbox) presenceSince(n int) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if n > len(in.presence) {
		return nil
	}
	return append([]string(nil), in.presence[n:]...)
}

func (in *ownerInbox) presenceCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.presence)
}

func lastIs(list []string, want string) bool { return len(list) > 0 && list[len(list)-1] == want }

// TestOANOwnerThroughProsody: issue 27 §4, through Prosody, the reference
// OAN server (Node, real socket.io) and `agentgw serve` as a process, with
// the owner's own XMPP client:
//   - the configured owner receives the Gofer's unprompted messages without
//     ever writing first, and again after a kill -9 and restart;
//   - events whose reply.path is hostile (the reference server's
//     hostileReplyPath switch) are dropped, logged once each, the cursor
//     moves past them, and the owner sees none of them;
//   - a subscriber sees the endpoint unavailable on revocation and on a ban,
//     and available again after re-pairing.
func TestOANOwnerThroughProsody(t *testing.T) {
	t.Parallel()
	srv := e2e.StartOAN(t)
	e := e2e.Prepare(t, e2e.Options{Users: []string{"alice"}, TOML: fmt.Sprintf(`
[[agents]]
jid = "gofers@%s"
[agents.oan]
base_url = %q
api_key_file = "oan.key"
owner = "alice@%s"
reply_timeout_seconds = 3
`, "agents.example.test", srv.URL, "example.test")})
	ep := e.Endpoint("gofers")
	code, _ := srv.PairingCode()
	e.Agentgw(0, "oan", "pair", "--config", e.ConfigPath, "--code", code, ep.String())
	gw := e.Serve("gw1")
	gw.WaitLog("OAN event stream connected", 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := e.Dial("alice")
	testkit.WaitFor(t, 30*time.Second, "the OAN manifest", func() bool {
		_, err := c.Pin(ctx, ep, "create_gofer")
		return err == nil
	})
	res, err := c.Call(ctx, ep, "create_gofer", json.RawMessage(`{}`), agentclient.CallOptions{})
	if err != nil || res.State != "completed" {
		t.Fatalf("create_gofer: %v %+v", err, res)
	}
	var p struct {
		Result struct {
			StructuredContent struct {
				GoferID string `json:"gofer_id"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	json.Unmarshal(res.Payload, &p)
	gofer := p.Result.StructuredContent.GoferID
	if gofer == "" {
		t.Fatalf("create_gofer: %s", res.Payload)
	}

	// The owner's own client: it never writes to the endpoint.
	_, ownerConn := e.DialConn("alice")
	owner := watchOwner(ownerConn, ep.String())
	goferSays := func(text string) {
		t.Helper()
		if _, err := srv.Emit(map[string]any{"type": "gofer_message", "goferId": gofer, "source": "own_gofer",
			"payload": map[string]any{"messageId": "m-" + strings.ReplaceAll(text, " ", "-"), "content": text}}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("owner-receives-unprompted", func(t *testing.T) {
		goferSays("unprompted one")
		testkit.WaitFor(t, 30*time.Second, "the owner to receive the Gofer's unprompted message", func() bool { return owner.has("unprompted one") })
		if _, err := srv.MatchRequest(gofer, "Counterpart N"); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 30*time.Second, "the owner to receive the match notice", func() bool { return owner.has("New match request from «Counterpart N»") })
		if strings.Contains(gw.Log(), "the recipient does not accept messages from this agent") {
			t.Fatalf("delivery to the configured owner was refused:\n%s", e2e.Tail(gw.Log(), 2000))
		}
	})

	// kill -9 and a fresh process: the owner still receives, without
	// writing first.
	gw.Kill()
	gw = e.Serve("gw2")
	gw.WaitLog("OAN event stream connected", 60*time.Second)

	t.Run("owner-receives-after-restart", func(t *testing.T) {
		goferSays("after the restart")
		testkit.WaitFor(t, 30*time.Second, "the owner to receive a message after the restart", func() bool { return owner.has("after the restart") })
		if strings.Contains(gw.Log(), "the recipient does not accept messages from this agent") {
			t.Fatalf("delivery to the configured owner was refused after a restart:\n%s", e2e.Tail(gw.Log(), 2000))
		}
	})

	t.Run("hostile-reply-path", func(t *testing.T) {
		st, closeStore := oanStore(t, e)
		defer closeStore()
		paths := []struct{ name, path string }{
			{"absolute-url", "https://evil.example/api/v1/gofers/" + gofer + "/chat/messages"},
			{"scheme-relative", "//evil.example/api/v1/gofers/" + gofer + "/chat/messages"},
			{"dot-dot", "/api/v1/gofers/" + gofer + "/../../api-keys"},
			{"percent-2F", "/api/v1/gofers/" + gofer + "%2Fchat%2Fmessages"},
			{"query", "/api/v1/gofers/" + gofer + "/chat/messages?redirect=https://evil.example"},
			{"other-gofer", "/api/v1/gofers/someone-elses-gofer/chat/messages"},
			{"other-conversation", "/api/v1/conversations/someone-elses-conv/messages"},
		}
		for i, hp := range paths {
			if err := srv.Mode(map[string]any{"hostileReplyPath": hp.path}); err != nil {
				t.Fatal(err)
			}
			var evs []oantest.Event
			msg, _ := srv.Emit(map[string]any{"type": "gofer_message", "goferId": gofer, "source": "own_gofer",
				"payload": map[string]any{"messageId": fmt.Sprintf("h-%d", i), "content": "HOSTILE-GOFER-" + hp.name}})
			relay, _ := srv.Relay(gofer, "conv-h", "HOSTILE-RELAY-"+hp.name)
			evs = append(evs, msg, relay)
			srv.Mode(map[string]any{"hostileReplyPath": ""})
			l, _ := srv.Log()
			testkit.WaitFor(t, 30*time.Second, hp.name+": the cursor past the hostile events", func() bool {
				c, _ := st.Cursor(ctx, ep.String())
				return fmt.Sprint(c) == l.Cursor
			})
			for _, ev := range evs {
				if ev.EventID == "" {
					t.Fatalf("%s: the server did not record the event", hp.name)
				}
				if n := strings.Count(gw.Log(), ev.EventID); n != 1 {
					t.Errorf("%s: event %s (%s) appears %d times in the log, want one refusal:\n%s", hp.name, ev.EventID, ev.Type, n, e2e.Tail(gw.Log(), 3000))
				}
			}
			if pend, err := st.PendingOutbound(ctx, ep.String()); err == nil {
				for _, m := range pend {
					if strings.Contains(m.Body, "HOSTILE") {
						t.Errorf("%s: a hostile event is queued for the owner: %q", hp.name, m.Body)
					}
				}
			}
		}
		if items, _ := st.Items(ctx, ep.String(), oandb.StatePending, oandb.StateDeferred); len(items) > 0 {
			for _, it := range items {
				if strings.Contains(it.ReplyPath, "evil") || strings.Contains(it.ReplyPath, "someone-elses") {
					t.Errorf("a hostile reply path became an open item: %s", it.ReplyPath)
				}
			}
		}
		// A clean event after them reaches the owner: the hostile ones
		// did not (they came first).
		goferSays("clean sentinel")
		testkit.WaitFor(t, 30*time.Second, "the clean sentinel", func() bool { return owner.has("clean sentinel") })
		for _, b := range owner.all() {
			if strings.Contains(b, "HOSTILE") {
				t.Errorf("the owner was shown a hostile event: %q", b)
			}
		}
	})

	t.Run("presence-on-revoke-ban-repair", func(t *testing.T) {
		n := owner.presenceCount()
		sub := xmltree.New("jabber:client", "presence", "type", "subscribe", "to", ep.String())
		if err := ownerConn.Send(ctx, sub); err != nil {
			t.Fatal(err)
		}
		expect := func(want, what string) {
			t.Helper()
			testkit.WaitFor(t, 60*time.Second, want+" presence "+what, func() bool { return lastIs(owner.presenceSince(n), want) })
			n = owner.presenceCount()
		}
		repair := func() {
			t.Helper()
			code, _ := srv.PairingCode()
			e.Agentgw(0, "oan", "pair", "--config", e.ConfigPath, "--force", "--code", code, ep.String())
		}
		expect("available", "after subscribing")
		// A revocation with the forced disconnect.
		srv.Revoke()
		expect("unavailable", "on revocation")
		repair()
		expect("available", "after re-pairing")
		// A revocation OAN could not announce: a call meets the 401.
		srv.RevokeQuiet()
		if res, err := c.Call(ctx, ep, "list_gofers", json.RawMessage(`{}`), agentclient.CallOptions{}); err != nil || res.State != "failed" {
			t.Fatalf("list_gofers with a revoked key: %v %+v", err, res)
		}
		expect("unavailable", "on a revocation seen by a call")
		repair()
		expect("available", "after re-pairing")
		// A ban announced by system_notice only (the sockets stay up).
		srv.BanQuiet()
		expect("unavailable", "on a ban notice")
		srv.Unban()
		repair()
		expect("available", "after the ban is lifted and re-paired")
		t.Logf("the subscriber saw the endpoint's presence change as expected at every step")
	})
}
