package component

import (
	"context"
	"encoding/xml"
	"errors"
	"hash/fnv"
	"strings"
	"sync"

	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/telemetry"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// handler is the mellium handler. It only reads each stanza whole into a
// tree and hands it on: mellium holds the stream's locks while a handler
// runs, so nothing slow and no send may happen here.
func (c *Component) handler(runCtx, connCtx context.Context) xmpp.Handler {
	return xmpp.HandlerFunc(func(r xmlstream.TokenReadEncoder, start *xml.StartElement) error {
		c.lastIn.Store(c.clk.Now().UnixNano())
		if start.Name.Space != NSComponent || !isStanza(start.Name.Local) {
			return nil // mellium skips the rest of the element
		}
		c.received.Add(1)
		tctx, sp := telemetry.Start(context.Background(), telemetry.Stanza)
		_, dsp := telemetry.Start(tctx, telemetry.Decode)
		el, err := xmltree.Decode(r, *start, c.limits)
		dsp.End()
		if errors.Is(err, xmltree.ErrLimit) {
			// mellium drains the rest of the element after we return.
			sp.Fail("stanza exceeds the size limit")
			sp.End()
			c.rejectOversize(runCtx, connCtx, start)
			return nil
		}
		if err != nil {
			sp.End()
			return err
		}
		c.route(runCtx, connCtx, el, sp)
		return nil
	})
}

func isStanza(local string) bool {
	return local == "iq" || local == "message" || local == "presence"
}

// inIQ is an IQ get or set queued for the workers, with the span of its
// handling (the zero Span when tracing is off).
type inIQ struct {
	el *xmltree.Element
	sp telemetry.Span
}

// route correlates IQ answers at once and queues everything else for the
// workers. Queueing blocks when the workers are behind, which stops reading
// and pushes back on the server.
func (c *Component) route(runCtx, connCtx context.Context, el *xmltree.Element, sp telemetry.Span) {
	var ch chan *xmltree.Element
	sp.Str(telemetry.AttrStanza, el.Name.Local)
	if el.Name.Local == "iq" {
		switch el.AttrValue("type") {
		case "result", "error":
			sp.End()
			from, err := c.parseFrom(el.AttrValue("from"))
			if err != nil || !c.pending.resolve(el.AttrValue("id"), from, el) {
				c.unmatched(el)
			}
			return
		case "get", "set":
			c.queueIQ(runCtx, connCtx, inIQ{el: el, sp: sp})
			return
		default:
			sp.End()
			c.log.Debug("component: dropped an IQ without a valid type")
			return
		}
	} else {
		sp.End() // a message or presence: the span covers its decode
		// Sharded by the sender's bare JID, so that everything one account
		// sends is handled in order: the server speaks for the bare JID
		// too (Prosody acknowledges a subscription request with
		// "unavailable" from it, then sends each resource's presence), and
		// a bare "unavailable" handled after a resource's presence would
		// erase it.
		h := fnv.New32a()
		h.Write([]byte(bareOf(el.AttrValue("from"))))
		ch = c.shards[h.Sum32()%uint32(len(c.shards))]
	}
	select {
	case ch <- el:
		return
	default:
	}
	// The workers are behind. While we wait the stream is not idle, just
	// unread: keepalive must not mistake that for a dead server.
	c.readerBlocked.Store(true)
	defer func() {
		c.lastIn.Store(c.clk.Now().UnixNano())
		c.readerBlocked.Store(false)
	}()
	select {
	case ch <- el:
	case <-runCtx.Done():
	case <-connCtx.Done():
	}
}

// bareOf is the bare part of a JID string: everything before the first
// '/', which starts the resource (RFC 7622 3.1).
func bareOf(from string) string {
	if i := strings.IndexByte(from, '/'); i >= 0 {
		return from[:i]
	}
	return from
}

// queueIQ is route's queueing for IQ get and set.
func (c *Component) queueIQ(runCtx, connCtx context.Context, in inIQ) {
	select {
	case c.iqIn <- in:
		return
	default:
	}
	c.readerBlocked.Store(true)
	defer func() {
		c.lastIn.Store(c.clk.Now().UnixNano())
		c.readerBlocked.Store(false)
	}()
	select {
	case c.iqIn <- in:
	case <-runCtx.Done():
		in.sp.End()
	case <-connCtx.Done():
		in.sp.End()
	}
}

// rejectOversize answers an IQ get or set that exceeded the stanza limits
// with resource-constraint; oversize messages and presence are dropped.
func (c *Component) rejectOversize(runCtx, connCtx context.Context, start *xml.StartElement) {
	var id, typ, fromS, toS string
	for _, a := range start.Attr {
		if a.Name.Space != "" {
			continue
		}
		switch a.Name.Local {
		case "id":
			id = a.Value
		case "type":
			typ = a.Value
		case "from":
			fromS = a.Value
		case "to":
			toS = a.Value
		}
	}
	if start.Name.Local != "iq" || (typ != "get" && typ != "set") {
		c.log.Debug("component: dropped an oversize stanza", "stanza", start.Name.Local)
		return
	}
	from, err := c.parseFrom(fromS)
	if err != nil {
		return
	}
	to, err := jid.Parse(toS)
	if err != nil {
		to = c.cfg.Domain
	}
	c.log.Debug("component: rejected an oversize IQ", "from", from.String())
	reply := NewIQ("error", id, to, from, nil).Add(agentproto.ErrResourceConstraint("stanza exceeds the size limit").Element(NSComponent))
	c.fixFrom(reply)
	c.localize(reply)
	select {
	case c.queue <- outItem{el: reply}:
	case <-runCtx.Done():
	case <-connCtx.Done():
	}
}

// parseFrom parses a "from" attribute. mellium blanks a "from" equal to our
// own domain, so an empty one means the component domain.
func (c *Component) parseFrom(s string) (jid.JID, error) {
	if s == "" {
		return c.cfg.Domain, nil
	}
	return jid.Parse(s)
}

// fixFrom keeps a reply's "from" inside the component domain: the server
// closes the whole stream for a foreign one.
func (c *Component) fixFrom(el *xmltree.Element) {
	j, err := jid.Parse(el.AttrValue("from"))
	if err != nil || j.Domainpart() != c.cfg.Domain.Domainpart() {
		el.SetAttr("from", c.cfg.Domain.String())
	}
}

// worker runs handlers until ctx ends.
func (c *Component) worker(ctx context.Context, shard chan *xmltree.Element) {
	for {
		select {
		case <-ctx.Done():
			return
		case in := <-c.iqIn:
			c.serveIQ(in.sp.Context(ctx), in.el)
			in.sp.End()
		case el := <-shard:
			c.serveOther(ctx, el)
		}
	}
}

// serveIQ answers one IQ get or set: exactly one reply, whatever happens.
func (c *Component) serveIQ(ctx context.Context, el *xmltree.Element) {
	rc := &replyCtx{Context: ctx}
	ctx = rc
	defer rc.run() // after the reply is queued (see AfterReply)
	id := el.AttrValue("id")
	from, err := c.parseFrom(el.AttrValue("from"))
	if err != nil {
		// The server validated it; without it no reply can be addressed.
		c.log.Debug("component: dropped an IQ with a malformed sender")
		return
	}
	var reply *xmltree.Element
	to, err := jid.Parse(el.AttrValue("to"))
	if err != nil {
		malformed := agentproto.NewError(agentproto.CondJIDMalformed, "")
		reply = NewIQ("error", id, c.cfg.Domain, from, nil).Add(malformed.Element(NSComponent))
	} else {
		iq := IQ{ID: id, Type: el.AttrValue("type"), From: from, To: to, Raw: el}
		if len(el.Children) > 0 {
			iq.Payload = el.Children[0]
		}
		reply = c.dispatchIQ(ctx, iq)
	}
	c.fixFrom(reply)
	c.enqueueWait(ctx, reply)
}

// dispatchIQ runs the router, turning a handler panic into
// internal-server-error so the requester still gets its one reply.
func (c *Component) dispatchIQ(ctx context.Context, iq IQ) (reply *xmltree.Element) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("component: IQ handler panicked", "payload", payloadName(iq.Payload), "panic", p)
			reply = NewIQ("error", iq.ID, iq.To, iq.From, nil).Add(agentproto.ErrInternal().Element(NSComponent))
		}
	}()
	return c.router.DispatchIQ(ctx, iq)
}

// serveOther hands a message or presence to the router.
func (c *Component) serveOther(ctx context.Context, el *xmltree.Element) {
	from, err := c.parseFrom(el.AttrValue("from"))
	if err != nil {
		return
	}
	to, err := jid.Parse(el.AttrValue("to"))
	if err != nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("component: stanza handler panicked", "stanza", el.Name.Local, "panic", p)
		}
	}()
	id, typ := el.AttrValue("id"), el.AttrValue("type")
	if el.Name.Local == "message" {
		c.router.DispatchMessage(ctx, Message{ID: id, Type: typ, From: from, To: to, Raw: el})
	} else {
		c.router.DispatchPresence(ctx, Presence{ID: id, Type: typ, From: from, To: to, Raw: el})
	}
}

// replyCtx is the context of one served IQ; it collects AfterReply's
// functions.
type replyCtx struct {
	context.Context
	mu sync.Mutex
	fs []func()
}

type afterReplyKey struct{}

func (r *replyCtx) Value(k any) any {
	if k == (afterReplyKey{}) {
		return r
	}
	return r.Context.Value(k)
}

func (r *replyCtx) run() {
	r.mu.Lock()
	fs := r.fs
	r.fs = nil
	r.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// AfterReply runs f once the reply to the IQ whose handler got ctx has
// been queued for sending, so that a stanza f queues follows the reply on
// the stream (a task's first lifecycle event after its <accepted/>). It
// reports false, without running f, when ctx is not an IQ handler's (a
// router called directly).
func AfterReply(ctx context.Context, f func()) bool {
	r, ok := ctx.Value(afterReplyKey{}).(*replyCtx)
	if !ok {
		return false
	}
	r.mu.Lock()
	r.fs = append(r.fs, f)
	r.mu.Unlock()
	return true
}
