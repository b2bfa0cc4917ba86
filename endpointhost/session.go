package endpointhost

import (
	"context"
	"sync/atomic"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// clientSender is the seam that lets the gateway's wire handlers serve a
// C2S session: it implements component.Sender over whichever xmppclient
// session is current, and feeds that session's inbound stanzas to a
// component.Router, exactly as component.Component does for the XEP-0114
// stream. The handlers build jabber:component:accept stanzas; they leave
// here as jabber:client, without a 'from' (the server stamps the session's
// full JID, the only sender a C2S client may claim).
type clientSender struct {
	cur atomic.Pointer[xmppclient.Client]
}

var _ component.Sender = (*clientSender)(nil)

func (s *clientSender) Send(ctx context.Context, el *xmltree.Element) error {
	c := s.cur.Load()
	if c == nil {
		return component.ErrNotConnected
	}
	return c.Send(ctx, toClient(el))
}

func (s *clientSender) SendIQ(ctx context.Context, iq *xmltree.Element) (*xmltree.Element, error) {
	c := s.cur.Load()
	if c == nil {
		return nil, component.ErrNotConnected
	}
	reply, err := c.SendIQ(ctx, toClient(iq))
	if err != nil {
		return nil, err
	}
	if reply.AttrValue("type") == "error" {
		// Like component.SendIQ: type and condition, never the remote text.
		se := agentproto.ParseError(reply)
		se.Text = ""
		return reply, se
	}
	return reply, nil
}

// toClient copies a stanza built for the component stream into the client
// namespace and drops its 'from'.
func toClient(el *xmltree.Element) *xmltree.Element {
	out := rename(el)
	dropAttr(out, "from")
	return out
}

func rename(el *xmltree.Element) *xmltree.Element {
	out := &xmltree.Element{Name: el.Name, Text: el.Text, Attr: append(el.Attr[:0:0], el.Attr...)}
	if out.Name.Space == component.NSComponent {
		out.Name.Space = xmppclient.NS
	}
	for _, ch := range el.Children {
		if ch != nil {
			out.Children = append(out.Children, rename(ch))
		}
	}
	return out
}

// pump turns one session's inbound stanzas into router calls.
type pump struct {
	router  *component.Router
	sender  *clientSender
	self    jid.JID // the session's full JID
	account jid.JID // its bare JID
	log     interface {
		Error(msg string, args ...any)
	}
}

// addresses reads from and to. A stanza without 'from' comes from the
// account's own server on the account's behalf; one without 'to' is for
// this session.
func (p *pump) addresses(el *xmltree.Element) (from, to jid.JID, ok bool) {
	var err error
	from, to = p.account, p.self
	if s := el.AttrValue("from"); s != "" {
		if from, err = jid.Parse(s); err != nil {
			return from, to, false
		}
	}
	if s := el.AttrValue("to"); s != "" {
		if to, err = jid.Parse(s); err != nil {
			return from, to, false
		}
	}
	return from, to, true
}

// iq answers one IQ get or set: exactly one reply, whatever happens.
func (p *pump) iq(ctx context.Context, el *xmltree.Element) *xmltree.Element {
	from, to, ok := p.addresses(el)
	id := el.AttrValue("id")
	var reply *xmltree.Element
	if !ok {
		reply = component.NewIQ("error", id, p.self, from, agentproto.NewError(agentproto.CondJIDMalformed, "").Element(component.NSComponent))
	} else if isRosterPush(el, from, p.account) {
		// RFC 6121 2.1.6: acknowledge the server's roster pushes.
		reply = component.NewIQ("result", id, p.self, from, nil)
	} else {
		iq := component.IQ{ID: id, Type: el.AttrValue("type"), From: from, To: to, Raw: el}
		if len(el.Children) > 0 {
			iq.Payload = el.Children[0]
		}
		reply = p.dispatch(ctx, iq)
	}
	if el.AttrValue("from") == "" {
		dropAttr(reply, "to") // back to our own server
	}
	return toClient(reply)
}

func (p *pump) dispatch(ctx context.Context, iq component.IQ) (reply *xmltree.Element) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("host: IQ handler panicked", "panic", r)
			reply = component.NewIQ("error", iq.ID, iq.To, iq.From, nil).Add(agentproto.ErrInternal().Element(component.NSComponent))
		}
	}()
	return p.router.DispatchIQ(ctx, iq)
}

func (p *pump) message(ctx context.Context, el *xmltree.Element) {
	from, to, ok := p.addresses(el)
	if !ok {
		return
	}
	p.router.DispatchMessage(ctx, component.Message{ID: el.AttrValue("id"), Type: el.AttrValue("type"), From: from, To: to, Raw: el})
}

func (p *pump) presence(ctx context.Context, el *xmltree.Element) {
	from, to, ok := p.addresses(el)
	if !ok {
		return
	}
	p.router.DispatchPresence(ctx, component.Presence{ID: el.AttrValue("id"), Type: el.AttrValue("type"), From: from, To: to, Raw: el})
}

// dropAttr removes an unqualified attribute.
func dropAttr(el *xmltree.Element, local string) {
	kept := el.Attr[:0]
	for _, a := range el.Attr {
		if a.Name.Space != "" || a.Name.Local != local {
			kept = append(kept, a)
		}
	}
	el.Attr = kept
}

// isRosterPush reports a roster push from the account's own server.
func isRosterPush(el *xmltree.Element, from, account jid.JID) bool {
	return el.AttrValue("type") == "set" && from.Equal(account) && len(el.Children) == 1 &&
		el.Children[0].Name.Space == "jabber:iq:roster"
}
