package messaging

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/xep/dataform"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Bounds of single inbound fields beyond Limits: ids, threads and URLs are
// identifiers, never prose.
const (
	maxIDBytes     = 256
	maxURLBytes    = 2048
	maxNameBytes   = 256
	maxRefusalText = 200
)

// The fixed, safe sentences of the error replies (docs/messaging.md).
const (
	textNotChat     = "This agent does not take chat messages; it offers tools to agent clients (see its service discovery)."
	textUnavailable = "This agent cannot chat right now; try again later."
	textRate        = "Too many messages; slow down."
	textBusy        = "This agent is busy; try again later."
	textBadFile     = "A shared file is not an http or https URL without credentials."
	textBadForm     = "The submitted form is malformed."
)

// inbound is one parsed chat message.
type inbound struct {
	body       string
	hasBody    bool
	id         string // origin-id, else the stanza id
	thread     string
	replyTo    string
	files      []backendkit.File
	form       bool
	questionID string
	answer     map[string][]string
	receipt    bool
	chatState  bool
	problem    *agentproto.StanzaError // why the message cannot be a turn
	dropReason string                  // the burst-log reason of problem
}

// turn reports whether the message carries something for a backend: a
// bare chat state, receipt or marker does not.
func (in *inbound) turn() bool {
	return in.hasBody || len(in.files) > 0 || in.form || in.problem != nil
}

// parse reads a chat message within lim. Its text is data: it is copied
// out as strings and never re-parsed or rendered.
func parse(raw *xmltree.Element, lim Limits) *inbound {
	in := &inbound{}
	fail := func(reason string, se *agentproto.StanzaError) {
		if in.problem == nil {
			in.problem, in.dropReason = se, reason
		}
	}
	in.id = ident(raw.AttrValue("id"))
	for _, c := range raw.Children {
		switch {
		case c.Name.Local == "body" && (c.Name.Space == component.NSComponent || c.Name.Space == ns.Client || c.Name.Space == ""):
			if in.hasBody { // the first body (of several xml:lang variants) is the text
				continue
			}
			in.hasBody = true
			if len(c.Text) > lim.MaxBodyBytes {
				fail("oversize body", agentproto.ErrNotAcceptable(fmt.Sprintf("Message too large: the limit is %d bytes.", lim.MaxBodyBytes)))
				continue
			}
			// A text the stream carried is valid XML already; strip
			// anything else defensively rather than pass it on.
			in.body = xmltree.Sanitize(c.Text)
		case c.Name.Local == "thread" && (c.Name.Space == component.NSComponent || c.Name.Space == ns.Client || c.Name.Space == ""):
			in.thread = ident(c.Text)
		case c.Is(ns.StanzaID, "origin-id"):
			if id := ident(c.AttrValue("id")); id != "" {
				in.id = id
			}
		case c.Is(ns.Reply, "reply"):
			in.replyTo = ident(c.AttrValue("id"))
		case c.Is(ns.Receipts, "request"):
			in.receipt = true
		case c.Name.Space == ns.ChatStates:
			in.chatState = true
		case c.Is(ns.OOB, "x"):
			if len(in.files) >= lim.MaxFiles {
				fail("too many files", agentproto.ErrNotAcceptable(fmt.Sprintf("Too many files: the limit is %d per message.", lim.MaxFiles)))
				continue
			}
			f, ok := oobFile(c)
			if !ok {
				fail("bad file url", agentproto.ErrNotAcceptable(textBadFile))
				continue
			}
			in.files = append(in.files, f)
		case c.Is(ns.Data, "x"):
			in.form = true
			qid, ans, err := parseAnswer(c)
			if err != nil {
				fail("bad form", agentproto.ErrBadRequest(textBadForm))
				continue
			}
			in.questionID, in.answer = qid, ans
		}
	}
	// XEP-0184: a receipt can only name a message that has an id.
	if in.id == "" {
		in.receipt = false
	}
	return in
}

// ident accepts an identifier-like value: bounded, valid XML text, no
// control characters; anything else reads as absent.
func ident(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxIDBytes || !utf8.ValidString(s) {
		return ""
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || !xmltree.IsChar(r) {
			return ""
		}
	}
	return s
}

// oobFile reads an XEP-0066 <x xmlns='jabber:x:oob'/>: an http(s) URL
// without credentials (an XEP-0363 upload URL is shared this way).
func oobFile(x *xmltree.Element) (backendkit.File, bool) {
	raw := strings.TrimSpace(text(x.Child(ns.OOB, "url")))
	if raw == "" || len(raw) > maxURLBytes || !xmltree.ValidText(raw) {
		return backendkit.File{}, false
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return backendkit.File{}, false
	}
	name := strings.TrimSpace(text(x.Child(ns.OOB, "desc")))
	if name == "" {
		name = path.Base(u.Path)
	}
	if len(name) > maxNameBytes || !xmltree.ValidText(name) || name == "/" || name == "." {
		name = ""
	}
	return backendkit.File{URL: u.String(), Name: name}, true
}

// parseAnswer reads a submitted question form: its hidden question_id and
// the other fields' values.
func parseAnswer(x *xmltree.Element) (string, map[string][]string, error) {
	f, err := dataform.Parse(x)
	if err != nil {
		return "", nil, err
	}
	if f.Type != dataform.TypeSubmit || (f.FormType != "" && f.FormType != ns.ChatQuestionForm) {
		return "", nil, dataform.ErrInvalid
	}
	ans := map[string][]string{}
	qid := ""
	for _, fl := range f.Fields {
		if fl.Var == questionIDVar {
			if len(fl.Values) == 1 {
				qid = ident(fl.Values[0])
			}
			continue
		}
		vals := make([]string, len(fl.Values))
		for i, v := range fl.Values {
			vals[i] = xmltree.Sanitize(v)
		}
		ans[fl.Var] = vals
	}
	return qid, ans, nil
}

// handle is the router's message handler. It runs on the component's
// per-sender worker and does only bounded in-memory work: the backend is
// called from Run's workers.
func (s *Service) handle(ctx context.Context, m component.Message) {
	to := m.To
	if to.Localpart() == "" || to.Domainpart() != s.domain || m.Raw == nil {
		return
	}
	switch m.Type {
	case "error":
		s.bounce(m)
		return
	case "chat", "normal", "":
	default: // groupchat and headline are not one-to-one chat
		return
	}
	for _, c := range m.Raw.Children {
		if c.Name.Space == ns.Task { // a task payload is the task wire's
			return
		}
	}
	in := parse(m.Raw, s.lim)
	ep, peer := to.Bare(), m.From.Bare()
	k := convKey{endpoint: ep.String(), peer: peer.String()}
	now := time.Now()

	if !in.turn() {
		// A bare chat state, receipt or marker: remember that the peer
		// speaks chat states, answer nothing.
		if in.chatState {
			s.mu.Lock()
			if c, ok := s.convs.get(k); ok {
				c.chatStates = true
			}
			s.mu.Unlock()
		}
		return
	}

	// The rate comes first, for every addressee alike, so a flood to a
	// hidden endpoint looks like one to a missing endpoint.
	s.mu.Lock()
	c := s.conv(k)
	if !c.in.allow(now, s.lim.PerSecond, s.lim.Burst) {
		first := !c.dropping
		c.dropping = true
		s.mu.Unlock()
		s.dropped.Add(1)
		s.bursts.drop(now, "rate", "endpoint", k.endpoint)
		if first {
			s.errorReply(ctx, m, agentproto.ErrResourceConstraint(textRate))
		}
		return
	}
	c.dropping = false
	if in.chatState {
		c.chatStates = true
	}
	s.mu.Unlock()

	exists, visible := s.o.Resolver.Resolve(peer, ep)
	if !exists || !visible {
		// RFC 6121 8.5.2: no such account. Hidden reads the same.
		s.errorReply(ctx, m, agentproto.ErrServiceUnavailable())
		return
	}
	b, _ := s.o.Backend(k.endpoint)
	conv, isConv := b.(backendkit.Conversant)
	switch {
	case !isConv:
		s.refused.Add(1)
		s.errorReply(ctx, m, agentproto.NewError(agentproto.CondFeatureNotImplemented, textNotChat))
		return
	case !conv.CanConverse(k.endpoint):
		s.refused.Add(1)
		s.errorReply(ctx, m, agentproto.NewError(agentproto.CondRecipientUnavailable, textUnavailable))
		return
	case in.problem != nil:
		s.dropped.Add(1)
		s.bursts.drop(now, in.dropReason, "endpoint", k.endpoint)
		s.errorReply(ctx, m, in.problem)
		return
	}

	dk := dedupKey{convKey: k, id: in.id}
	s.mu.Lock()
	if in.id != "" {
		if _, dup := s.seen.get(dk); dup {
			s.mu.Unlock()
			s.duplicates.Add(1)
			s.log.Debug("duplicate chat message ignored", "endpoint", k.endpoint, "peer", k.peer)
			return
		}
		s.seen.put(dk, struct{}{})
	}
	c = s.conv(k)
	c.wrote, c.bounced, c.blocked = true, false, false
	if in.receipt {
		s.receipts.put(dk, struct{}{})
	}
	s.mu.Unlock()

	s.peerBack(k)
	t := backendkit.Turn{
		Endpoint: k.endpoint, Resource: to.Resourcepart(), From: m.From.String(),
		ID: in.id, Thread: in.thread, Body: in.body, ReplyTo: in.replyTo, Files: in.files,
		QuestionID: in.questionID, Answer: in.answer, ReceiptRequested: in.receipt,
	}
	q := queued{c: conv, turn: t, key: dk, msgID: m.ID, from: m.From, to: m.To}
	select {
	case s.shards[shardOf(k)] <- q:
		s.queued.Add(1)
		s.turns.Add(1)
	default:
		s.forget(dk)
		s.dropped.Add(1)
		s.bursts.drop(now, "backlog full", "endpoint", k.endpoint)
		s.errorReply(ctx, m, agentproto.ErrResourceConstraint(textBusy))
	}
}

// conv returns the conversation of k, creating it; s.mu must be held.
func (s *Service) conv(k convKey) *conversation {
	c, ok := s.convs.get(k)
	if !ok {
		c = &conversation{}
		s.convs.put(k, c)
	}
	return c
}

// forget lets a turn that never reached its backend be sent again.
func (s *Service) forget(k dedupKey) {
	s.mu.Lock()
	s.seen.remove(k)
	s.receipts.remove(k)
	s.mu.Unlock()
}

// deliver hands one turn to its backend; a refusal is told to the sender.
func (s *Service) deliver(ctx context.Context, q queued) {
	tctx, cancel := context.WithTimeout(ctx, s.o.TurnTimeout)
	err := q.c.Converse(tctx, q.turn)
	cancel()
	if err == nil || ctx.Err() != nil {
		return
	}
	s.forget(q.key)
	s.refused.Add(1)
	s.bursts.drop(time.Now(), "backend refused", "endpoint", q.turn.Endpoint)
	s.sendError(ctx, q.msgID, q.to, q.from, s.refusal(err))
}

// refusal words a Conversant's error for the sender.
func (s *Service) refusal(err error) *agentproto.StanzaError {
	switch {
	case errors.Is(err, backendkit.ErrChatUnavailable), errors.Is(err, context.DeadlineExceeded):
		return agentproto.NewError(agentproto.CondRecipientUnavailable, textUnavailable)
	case errors.Is(err, backendkit.ErrChatTooLarge):
		return agentproto.ErrNotAcceptable("Message too large.")
	case errors.Is(err, backendkit.ErrChatRateLimited):
		return agentproto.ErrResourceConstraint(textRate)
	}
	text := err.Error()
	if s.o.Redact != nil {
		text = s.o.Redact(text)
	}
	text = xmltree.Sanitize(text)
	if len(text) > maxRefusalText {
		text = strings.ToValidUTF8(text[:maxRefusalText], "") + "…"
	}
	return agentproto.NewError(agentproto.CondUndefinedCondition, text)
}

// errorReply answers m with an error message (never for an error).
func (s *Service) errorReply(ctx context.Context, m component.Message, se *agentproto.StanzaError) {
	s.sendError(ctx, m.ID, m.To, m.From, se)
}

// sendError sends the error message: from the address the sender used,
// with the sender's id, the condition and a fixed text, and nothing of the
// original payload (no reflection).
func (s *Service) sendError(ctx context.Context, id string, from, to jid.JID, se *agentproto.StanzaError) {
	el := xmltree.New(component.NSComponent, "message", "type", "error", "from", from.String(), "to", to.String())
	if id != "" {
		el.SetAttr("id", id)
	}
	el.Add(se.Element(component.NSComponent))
	if err := s.o.Sender.Send(ctx, el); err != nil {
		s.bursts.drop(time.Now(), "error reply not sent", "err", err.Error())
	}
}

// bounce reads an error answering one of our messages: blocked (XEP-0191's
// <blocked/>) or service-unavailable (what Prosody's mod_blocklist bounces
// for a blocked sender) stops further messages to that peer until it
// writes again. The absence of a bounce proves nothing (the spec).
func (s *Service) bounce(m component.Message) {
	if m.ID == "" {
		return
	}
	se := agentproto.ParseError(m.Raw)
	if se == nil {
		return
	}
	blocked := false
	if e := m.Raw.Child("", "error"); e != nil && e.Child(ns.BlockingError, "blocked") != nil {
		blocked = true
	}
	if !blocked && se.Condition != agentproto.CondServiceUnavailable && se.Condition != agentproto.CondNotAcceptable {
		return
	}
	s.mu.Lock()
	k, ok := s.sent.get(m.ID)
	if !ok || k.peer != m.From.Bare().String() || k.endpoint != m.To.Bare().String() {
		s.mu.Unlock()
		return
	}
	s.sent.remove(m.ID)
	c := s.conv(k)
	c.bounced = true
	c.blocked = c.blocked || blocked
	s.mu.Unlock()
	s.log.Info("chat recipient bounced a message; not sending more until it is back or writes", "endpoint", k.endpoint, "condition", string(se.Condition), "blocked", blocked)
	if w := s.watcher(k.endpoint); w != nil {
		w.ChatBounced(backendkit.Bounce{Endpoint: k.endpoint, Resource: m.To.Resourcepart(), Peer: k.peer, ID: m.ID,
			Condition: string(se.Condition), Blocked: blocked})
	}
}

// watcher is the endpoint's backend if it watches bounces.
func (s *Service) watcher(endpoint string) backendkit.ChatWatcher {
	b, ok := s.o.Backend(endpoint)
	if !ok {
		return nil
	}
	w, _ := b.(backendkit.ChatWatcher)
	return w
}

// peerBack tells the endpoint's backend that the peer is back.
func (s *Service) peerBack(k convKey) {
	if w := s.watcher(k.endpoint); w != nil {
		w.ChatPeerBack(k.endpoint, k.peer)
	}
}

// presence reads a peer's presence to an endpoint: an available presence
// or a probe (its server sends one when the peer comes online and is
// subscribed to the endpoint) means the peer is back. A peer that bounced
// as unavailable (not as blocked) may be messaged again, and the
// endpoint's backend is told, so messages held for it go out.
func (s *Service) presence(_ context.Context, p component.Presence) {
	to := p.To
	if to.Localpart() == "" || to.Domainpart() != s.domain || (p.Type != "" && p.Type != "available" && p.Type != "probe") {
		return
	}
	k := convKey{endpoint: to.Bare().String(), peer: p.From.Bare().String()}
	s.mu.Lock()
	if c, ok := s.convs.get(k); ok && c.bounced && !c.blocked {
		c.bounced = false
	}
	s.mu.Unlock()
	s.peerBack(k)
}

// text is e's character data, "" for a missing element.
func text(e *xmltree.Element) string {
	if e == nil {
		return ""
	}
	return e.Text
}
