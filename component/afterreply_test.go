package component

import (
	"context"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/xep/xmltree"
)

// AfterReply's function runs once the IQ's reply is on the outbound queue,
// so a stanza it queues follows the reply; outside an IQ handler it is
// refused.
func TestAfterReplyRunsAfterTheReplyIsQueued(t *testing.T) {
	t.Parallel()
	const ns = "urn:agentgw:test:after"
	domain := jid.MustParse("agents.example.test")
	r := NewRouter(domain, nil, nil)
	var c *Component
	var queuedAtHook = -1
	registered := false
	r.HandleGatewayIQ(IQSet, ns, "q", IQHandlerFunc(func(ctx context.Context, iq IQ) (*xmltree.Element, error) {
		registered = AfterReply(ctx, func() {
			queuedAtHook = len(c.queue)
			c.queue <- outItem{el: NewMessage("after-1", iq.To, iq.From, xmltree.New(ns, "after"))}
		})
		return xmltree.New(ns, "done"), nil
	}))
	c = New(Config{Domain: domain}, r)
	el := xmltree.New(NSComponent, "iq", "type", "set", "id", "iq-1", "from", "alice@example.test/a", "to", domain.String()).
		Add(xmltree.New(ns, "q"))
	c.serveIQ(context.Background(), el)
	if !registered {
		t.Fatal("AfterReply refused inside an IQ handler")
	}
	if queuedAtHook != 1 {
		t.Fatalf("the hook ran with %d stanzas queued, want the reply (1)", queuedAtHook)
	}
	first, second := <-c.queue, <-c.queue
	if first.el.Name.Local != "iq" || first.el.AttrValue("type") != "result" || second.el.Name.Local != "message" {
		t.Fatalf("queued %s then %s, want the IQ result then the message", first.el.Name.Local, second.el.Name.Local)
	}
	if AfterReply(context.Background(), func() { t.Error("ran outside an IQ") }) {
		t.Fatal("AfterReply accepted a context that is not an IQ handler's")
	}
}
