package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// imConversation shows xAgent IM Profile v2: a person on the reference
// connector's simulated IM network writes (with a file), the message
// reaches the configured inbox (the demo user) from the endpoint's channel
// resource, the file through Prosody's XEP-0363 service; the inbox
// replies to that full JID and the reply, with a receipt, reaches the IM
// network.
func imConversation(ctx context.Context, srv *xmppharness.Server, conn *connectortest.Server) error {
	step("An IM conversation through the connector (xAgent IM Profile v2); the inbox is %s@%s", user, srv.Domain)
	got := make(chan *xmltree.Element, 16)
	c, err := xmppclient.Dial(ctx, xmppclient.Options{JID: user + "@" + srv.Domain, Password: password,
		Server: srv.C2SAddr, CAFile: srv.CAFile, Presence: true,
		OnMessage: func(m *xmltree.Element) {
			if m.Child(xmppclient.NS, "body") != nil || m.Child("urn:xmpp:receipts", "received") != nil {
				select {
				case got <- m:
				default:
				}
			}
		}})
	if err != nil {
		return err
	}
	defer c.Close()

	photo := []byte("a picture of a cat, as bytes\n")
	text := "Hi! Is the report ready?"
	say("  IM network: Bob writes %q and shares cat.png (%d bytes)", text, len(photo))
	if err := waitFor(ctx, 20*time.Second, func() bool {
		return conn.InjectMessage(connectortest.IMMessage{Conversation: "conv_bob", SenderName: "Bob", Text: text,
			Files: []connectortest.IMFile{{Name: "cat.png", MimeType: "image/png", Data: photo}}}) != ""
	}); err != nil {
		return fmt.Errorf("the connector channel is not signed in: %w", err)
	}
	var in *xmltree.Element
	select {
	case in = <-got:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the IM message did not reach the inbox")
	}
	from := in.AttrValue("from")
	say("  inbox <- %s: %q", from, strings.SplitN(in.Child(xmppclient.NS, "body").Text, "\n", 2)[0])
	for _, x := range in.ChildrenNamed("jabber:x:oob", "x") {
		u := x.Child("jabber:x:oob", "url").Text
		resp, err := http.Get(u)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a, w := sha256.Sum256(b), sha256.Sum256(photo)
		say("  inbox <- file %s (XEP-0363 on Prosody), %d bytes, SHA-256 %s… identical: %v", u, len(b), hex.EncodeToString(a[:4]), a == w)
	}

	reply := "Yes, sending it this afternoon."
	thread := ""
	if t := in.Child(xmppclient.NS, "thread"); t != nil {
		thread = t.Text
	}
	m := xmltree.New(xmppclient.NS, "message", "type", "chat", "to", from, "id", "demo-reply-1").Add(
		xmltree.New(xmppclient.NS, "body").WithText(reply),
		xmltree.New(xmppclient.NS, "thread").WithText(thread),
		xmltree.New("urn:xmpp:receipts", "request"))
	say("  inbox -> %s: %q (receipt requested)", from, reply)
	if err := c.Send(ctx, m); err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, func() bool { return len(conn.Outbound()) > 0 }); err != nil {
		return fmt.Errorf("the reply did not reach the IM network")
	}
	o := conn.Outbound()[0]
	say("  IM network: Bob receives %q (conversation %s)", o.Text, o.Conversation)
	select {
	case r := <-got:
		if rec := r.Child("urn:xmpp:receipts", "received"); rec != nil {
			say("  inbox <- receipt for %s: the IM network has it", rec.AttrValue("id"))
		}
	case <-time.After(10 * time.Second):
		return fmt.Errorf("no receipt for the reply")
	}
	return nil
}
