package xmppclient_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

func dial(t *testing.T, srv *xmppharness.Server, user, pw string, presence bool) *xmppclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := xmppclient.Dial(ctx, xmppclient.Options{
		JID: user + "@" + srv.Domain, Password: pw, Server: srv.C2SAddr, CAFile: srv.CAFile,
		IQTimeout: 10 * time.Second, Presence: presence,
	})
	if err != nil {
		t.Fatalf("dial %s: %v", user, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ping(to string) *xmltree.Element {
	return xmltree.New(xmppclient.NS, "iq", "type", "get", "to", to).Add(xmltree.New("urn:xmpp:ping", "ping"))
}

func TestClientAgainstProsody(t *testing.T) {
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, u := range []string{"alice", "bob"} {
		if err := srv.Register(ctx, u, u+"-pw"); err != nil {
			t.Fatal(err)
		}
	}
	alice := dial(t, srv, "alice", "alice-pw", true)
	if got := alice.JID(); got.Bare().String() != "alice@example.test" || got.Resourcepart() == "" {
		t.Fatalf("bound JID = %v", got)
	}

	t.Run("ping server", func(t *testing.T) {
		reply, err := alice.SendIQ(ctx, ping(srv.Domain))
		if err != nil {
			t.Fatal(err)
		}
		if reply.AttrValue("type") != "result" || reply.AttrValue("from") != srv.Domain {
			t.Fatalf("reply = %s", reply)
		}
	})

	t.Run("error reply is a stanza, not a Go error", func(t *testing.T) {
		// The server has no handler for this payload.
		iq := xmltree.New("", "iq", "type", "get", "to", srv.Domain).Add(xmltree.New("urn:agentgw:test:nothing", "query"))
		reply, err := alice.SendIQ(ctx, iq)
		if err != nil {
			t.Fatal(err)
		}
		if got := xmppclient.StanzaErrorCondition(reply); got != "service-unavailable" && got != "feature-not-implemented" {
			t.Fatalf("condition = %q in %s", got, reply)
		}
		if got := xmppclient.StanzaErrorCondition(xmltree.New("", "iq", "type", "result")); got != "" {
			t.Fatalf("condition of a result = %q", got)
		}
	})

	t.Run("messages, presence and IQs between clients", func(t *testing.T) {
		bob := dial(t, srv, "bob", "bob-pw", true)
		got := make(chan *xmltree.Element, 1)
		bob.OnMessage(func(m *xmltree.Element) {
			// Callbacks may send: this must not deadlock the stream.
			if _, err := bob.SendIQ(ctx, ping(srv.Domain)); err != nil {
				t.Errorf("SendIQ from callback: %v", err)
			}
			got <- m
		})
		msg := xmltree.New("", "message", "to", bob.JID().String(), "type", "chat").
			Add(xmltree.New("", "body").WithText("hi <bob> & co"))
		if err := alice.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			if body := m.Child(xmppclient.NS, "body"); body == nil || body.Text != "hi <bob> & co" {
				t.Fatalf("message = %s", m)
			}
			if m.AttrValue("from") != alice.JID().String() {
				t.Fatalf("from = %q", m.AttrValue("from"))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("message not delivered")
		}

		// The client answers pings and refuses other IQs.
		reply, err := alice.SendIQ(ctx, ping(bob.JID().String()))
		if err != nil || reply.AttrValue("type") != "result" {
			t.Fatalf("ping bob: %v %s", err, reply)
		}
		iq := xmltree.New("", "iq", "type", "get", "to", bob.JID().String()).Add(xmltree.New("jabber:iq:version", "query"))
		reply, err = alice.SendIQ(ctx, iq)
		if err != nil {
			t.Fatal(err)
		}
		if got := xmppclient.StanzaErrorCondition(reply); got != "service-unavailable" {
			t.Fatalf("condition = %q in %s", got, reply)
		}
	})

	t.Run("messages before OnMessage are held for it", func(t *testing.T) {
		bob := dial(t, srv, "bob", "bob-pw", true)
		for _, text := range []string{"one", "two"} {
			msg := xmltree.New("", "message", "to", bob.JID().String()).Add(xmltree.New("", "body").WithText(text))
			if err := alice.Send(ctx, msg); err != nil {
				t.Fatal(err)
			}
		}
		// Stanzas between two parties arrive in order: once bob answered
		// this ping, both messages have reached his client.
		if reply, err := alice.SendIQ(ctx, ping(bob.JID().String())); err != nil || reply.AttrValue("type") != "result" {
			t.Fatalf("ping bob: %v %s", err, reply)
		}
		got := make(chan string, 2)
		bob.OnMessage(func(m *xmltree.Element) { got <- m.Child(xmppclient.NS, "body").Text })
		for _, want := range []string{"one", "two"} {
			select {
			case text := <-got:
				if text != want {
					t.Fatalf("got %q, want %q", text, want)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("held message %q not delivered", want)
			}
		}
	})

	t.Run("wrong password says not-authorized", func(t *testing.T) {
		_, err := xmppclient.Dial(ctx, xmppclient.Options{JID: "alice@example.test", Password: "nope",
			Server: srv.C2SAddr, CAFile: srv.CAFile})
		if err == nil || !strings.Contains(err.Error(), "auth failed (not-authorized)") {
			t.Fatalf("err = %v", err)
		}
		if strings.Contains(err.Error(), "nope") {
			t.Fatal("error leaks the password")
		}
	})

	t.Run("untrusted certificate fails in TLS", func(t *testing.T) {
		_, err := xmppclient.Dial(ctx, xmppclient.Options{JID: "alice@example.test", Password: "alice-pw",
			Server: srv.C2SAddr})
		if err == nil || !strings.Contains(err.Error(), "TLS failed") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("nothing listening fails in connect", func(t *testing.T) {
		_, err := xmppclient.Dial(ctx, xmppclient.Options{JID: "alice@example.test", Password: "x",
			Server: "127.0.0.1:1"})
		if err == nil || !strings.Contains(err.Error(), "connect to 127.0.0.1:1") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("stream loss ends pending IQs and Done", func(t *testing.T) {
		// Kill last: this subtest takes the server down.
		c := dial(t, srv, "bob", "bob-pw", false)
		mute := muteSession(t, srv, "alice", "alice-pw")
		errc := make(chan error, 1)
		go func() {
			_, err := c.SendIQ(ctx, ping(mute.String()))
			errc <- err
		}()
		time.Sleep(200 * time.Millisecond) // let the IQ reach the mute session
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done not closed after server death")
		}
		select {
		case err := <-errc:
			if !errors.Is(err, xmppclient.ErrClosed) {
				t.Fatalf("err = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("SendIQ hangs after stream loss")
		}
		if _, err := c.SendIQ(ctx, ping(srv.Domain)); !errors.Is(err, xmppclient.ErrClosed) {
			t.Fatalf("SendIQ on dead stream: %v", err)
		}
	})
}

// muteSession logs user in with plain mellium and never reads the stream,
// so IQs sent to it are never answered.
func muteSession(t *testing.T, srv *xmppharness.Server, user, pw string) jid.JID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := net.Dial("tcp", srv.C2SAddr)
	if err != nil {
		t.Fatal(err)
	}
	addr := jid.MustParse(user + "@" + srv.Domain + "/mute")
	s, err := xmpp.NewClientSession(ctx, addr, conn,
		xmpp.StartTLS(&tls.Config{ServerName: srv.Domain, InsecureSkipVerify: true}),
		xmpp.SASL("", pw, sasl.ScramSha1, sasl.Plain), xmpp.BindResource())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return s.LocalAddr()
}

func TestSendIQTimeout(t *testing.T) {
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	ctx := context.Background()
	if err := srv.Register(ctx, "carol", "pw"); err != nil {
		t.Fatal(err)
	}
	c, err := xmppclient.Dial(ctx, xmppclient.Options{JID: "carol@example.test", Password: "pw",
		Server: srv.C2SAddr, CAFile: srv.CAFile, IQTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mute := muteSession(t, srv, "carol", "pw")
	_, err = c.SendIQ(ctx, ping(mute.String()))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	// The stream survives a timeout.
	if reply, err := c.SendIQ(ctx, ping(srv.Domain)); err != nil || reply.AttrValue("type") != "result" {
		t.Fatalf("ping after timeout: %v %s", err, reply)
	}
}

// TestRequestedResourceIsBound: a JID with a resource binds exactly it
// (agentgw host's callers address account/agent).
func TestRequestedResourceIsBound(t *testing.T) {
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Register(ctx, "bot", "bot-pw"); err != nil {
		t.Fatal(err)
	}
	c, err := xmppclient.Dial(ctx, xmppclient.Options{JID: "bot@" + srv.Domain + "/agent", Password: "bot-pw", Server: srv.C2SAddr,
		TLS: &tls.Config{InsecureSkipVerify: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.JID().String(); got != "bot@"+srv.Domain+"/agent" {
		t.Fatalf("bound %s, want resource agent", got)
	}
}

// TestOversizeIQKeepsTheSession: an IQ nested past the limits is answered
// resource-constraint and the receiving session stays up.
func TestOversizeIQKeepsTheSession(t *testing.T) {
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, u := range []string{"bot", "eve"} {
		if err := srv.Register(ctx, u, u+"-pw"); err != nil {
			t.Fatal(err)
		}
	}
	tlsCfg := &tls.Config{InsecureSkipVerify: true}
	bot, err := xmppclient.Dial(ctx, xmppclient.Options{JID: "bot@" + srv.Domain + "/agent", Password: "bot-pw", Server: srv.C2SAddr, TLS: tlsCfg,
		OnIQ: func(el *xmltree.Element) *xmltree.Element {
			return xmltree.New("", "iq", "type", "result", "id", el.AttrValue("id"), "to", el.AttrValue("from"))
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Close()
	eve := dial(t, srv, "eve", "eve-pw", false)
	deep := xmltree.New("urn:agentgw:test:deep", "q")
	for cur, i := deep, 0; i < 40; i++ {
		next := xmltree.New("", "n")
		cur.Add(next)
		cur = next
	}
	to := "bot@" + srv.Domain + "/agent"
	reply, err := eve.SendIQ(ctx, xmltree.New("", "iq", "type", "get", "to", to).Add(deep))
	if err != nil {
		t.Fatal(err)
	}
	if c := xmppclient.StanzaErrorCondition(reply); c != "resource-constraint" {
		t.Fatalf("deep IQ: condition %q, want resource-constraint: %s", c, reply)
	}
	reply, err = eve.SendIQ(ctx, xmltree.New("", "iq", "type", "get", "to", to).Add(xmltree.New("urn:agentgw:test:flat", "q")))
	if err != nil || reply.AttrValue("type") != "result" {
		t.Fatalf("after the deep IQ the session does not answer: %v %v", reply, err)
	}
}
