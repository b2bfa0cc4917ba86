package messaging

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/xep/dataform"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Bounds of an outbound question form.
const (
	maxQuestionFields  = 32
	maxQuestionOptions = 64
	maxQuestionText    = 4 << 10
	questionIDVar      = "question_id"
)

// outFactor scales the conversation rate for what an endpoint sends: one
// peer may be a configured inbox that receives a whole IM network's
// traffic, and an agent may answer in several messages; the bound still
// stops a runaway backend from flooding a person.
const outFactor = 10

var questionFieldTypes = []string{"boolean", "list-single", "list-multi", "text-single", "text-multi", "fixed"}

// ChatFor returns the Chat a backend serving endpoints speaks through: it
// may only send from those endpoints (the spec: originate from a virtual
// JID only when authorized to act for it).
func (s *Service) ChatFor(endpoints ...string) backendkit.Chat {
	return &chat{s: s, own: endpoints}
}

type chat struct {
	s   *Service
	own []string
}

var (
	_ backendkit.Chat     = (*chat)(nil)
	_ backendkit.ChatLink = (*chat)(nil)
)

// Connected implements backendkit.ChatLink: whether the component stream
// is up (true when the sender cannot say).
func (c *chat) Connected() bool {
	if l, ok := c.s.o.Sender.(interface{ Connected() bool }); ok {
		return l.Connected()
	}
	return true
}

// addr checks the sending endpoint and the recipient.
func (c *chat) addr(endpoint, resource, to string) (jid.JID, jid.JID, convKey, error) {
	ep, err := jid.Parse(endpoint)
	if err != nil || ep.Localpart() == "" || ep.Resourcepart() != "" || ep.Domainpart() != c.s.domain {
		return jid.JID{}, jid.JID{}, convKey{}, fmt.Errorf("messaging: %q is not an endpoint of %s", endpoint, c.s.domain)
	}
	if !slices.Contains(c.own, ep.String()) {
		return jid.JID{}, jid.JID{}, convKey{}, ErrNotOwnEndpoint
	}
	from := ep
	if resource != "" {
		if from, err = jid.New(ep.Localpart(), ep.Domainpart(), resource); err != nil {
			return jid.JID{}, jid.JID{}, convKey{}, fmt.Errorf("messaging: invalid resource: %w", err)
		}
	}
	rcpt, err := jid.Parse(to)
	if err != nil || rcpt.Domainpart() == "" {
		return jid.JID{}, jid.JID{}, convKey{}, errors.New("messaging: invalid recipient JID")
	}
	if rcpt.Domainpart() == c.s.domain {
		// Our own endpoints would loop back into this service.
		return jid.JID{}, jid.JID{}, convKey{}, errors.New("messaging: the recipient is an endpoint of this gateway")
	}
	return from, rcpt, convKey{endpoint: ep.String(), peer: rcpt.Bare().String()}, nil
}

// consented reports whether the peer accepts messages the endpoint
// originates: it wrote (and bounced nothing since), or the operator's
// configuration names it. s.mu must be held.
func (c *chat) consented(k convKey) bool {
	conv, ok := c.s.convs.get(k)
	if ok && conv.bounced {
		return false
	}
	if ok && conv.wrote {
		return true
	}
	if c.s.o.Consent != nil && c.s.o.Consent(k.endpoint, k.peer) {
		return true
	}
	if b, ok := c.s.o.Backend(k.endpoint); ok {
		if cc, ok := b.(backendkit.ChatConsent); ok && slices.Contains(cc.ChatRecipients(k.endpoint), k.peer) {
			return true
		}
	}
	return false
}

// Send delivers one message from the endpoint.
func (c *chat) Send(ctx context.Context, m backendkit.Message) error {
	s := c.s
	from, to, k, err := c.addr(m.Endpoint, m.Resource, m.To)
	if err != nil {
		return err
	}
	body := xmltree.Sanitize(m.Body)
	if len(body) > s.lim.MaxBodyBytes || len(m.Files) > s.lim.MaxFiles {
		return backendkit.ErrChatTooLarge
	}
	id := m.ID
	if id == "" {
		id = ids.New("m-")
	} else if ident(id) != id {
		return errors.New("messaging: message id is not an identifier")
	}
	el := xmltree.New(component.NSComponent, "message", "type", "chat", "id", id, "from", from.String(), "to", to.String())
	var oob []*xmltree.Element
	for _, f := range m.Files {
		u, err := url.Parse(f.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || len(f.URL) > maxURLBytes {
			return errors.New("messaging: a file URL is not an http(s) URL without credentials")
		}
		x := xmltree.New(ns.OOB, "x").Add(xmltree.New(ns.OOB, "url").WithText(u.String()))
		if f.Name != "" {
			x.Add(xmltree.New(ns.OOB, "desc").WithText(xmltree.Sanitize(f.Name)))
		}
		oob = append(oob, x)
	}
	var form *xmltree.Element
	if m.Question != nil {
		if form, err = questionForm(m.Question); err != nil {
			return err
		}
		if body == "" {
			body = questionText(m.Question)
		}
	}
	if body == "" && len(m.Files) == 1 {
		body = m.Files[0].URL // how clients (XEP-0363 users) show a shared file
	}
	if body == "" && form == nil && len(oob) == 0 {
		return errors.New("messaging: empty message")
	}

	s.mu.Lock()
	if !c.consented(k) {
		s.mu.Unlock()
		return backendkit.ErrChatRefused
	}
	conv := s.conv(k)
	if !conv.out.allow(time.Now(), outFactor*s.lim.PerSecond, outFactor*s.lim.Burst) {
		s.mu.Unlock()
		return backendkit.ErrChatRateLimited
	}
	s.sent.put(id, k)
	s.mu.Unlock()

	if body != "" {
		el.Add(xmltree.New(component.NSComponent, "body").WithText(body))
	}
	if t := ident(m.Thread); t != "" {
		el.Add(xmltree.New(component.NSComponent, "thread").WithText(t))
	}
	el.Add(xmltree.New(ns.StanzaID, "origin-id", "id", id))
	if r := ident(m.ReplyTo); r != "" {
		el.Add(xmltree.New(ns.Reply, "reply", "id", r, "to", to.Bare().String()))
	}
	if n := clipTo(m.Nick, maxNameBytes); n != "" {
		// XEP-0172: the display name of the person the message speaks
		// for (an IM network user behind a connector).
		el.Add(xmltree.New(ns.Nick, "nick").WithText(n))
	}
	el.Add(oob...)
	el.Add(form)
	// XEP-0085 5.1: a message may carry <active/> whether or not the
	// peer is known to support chat states.
	el.Add(xmltree.New(ns.ChatStates, string(backendkit.ChatActive)))
	if m.Store {
		el.Add(xmltree.New(ns.Hints, "store"))
	}
	if err := s.o.Sender.Send(ctx, el); err != nil {
		if errors.Is(err, component.ErrQueueFull) {
			return fmt.Errorf("%w (%v)", backendkit.ErrChatRateLimited, err)
		}
		return err
	}
	s.outbound.Add(1)
	return nil
}

// Ack sends the XEP-0184 receipt for a turn, only if its sender asked for
// one, and only once.
func (c *chat) Ack(ctx context.Context, a backendkit.Ack) error {
	s := c.s
	from, to, k, err := c.addr(a.Endpoint, a.Resource, a.To)
	if err != nil {
		return err
	}
	dk := dedupKey{convKey: k, id: a.ID}
	s.mu.Lock()
	_, asked := s.receipts.get(dk)
	if asked {
		s.receipts.remove(dk)
	}
	ok := asked && c.consented(k)
	s.mu.Unlock()
	if !ok {
		return nil // not requested: a receipt is never volunteered
	}
	el := xmltree.New(component.NSComponent, "message", "type", "chat", "id", ids.New("r-"), "from", from.String(), "to", to.String())
	el.Add(xmltree.New(ns.Receipts, "received", "id", a.ID))
	return s.o.Sender.Send(ctx, el)
}

// Activity sends an XEP-0085 standalone chat state, only to a peer that
// showed it speaks chat states (XEP-0085 5.1) and only when it changes.
func (c *chat) Activity(ctx context.Context, a backendkit.Activity) error {
	s := c.s
	switch a.State {
	case backendkit.ChatActive, backendkit.ChatComposing, backendkit.ChatPaused, backendkit.ChatInactive, backendkit.ChatGone:
	default:
		return fmt.Errorf("messaging: unknown chat state %q", a.State)
	}
	from, to, k, err := c.addr(a.Endpoint, a.Resource, a.To)
	if err != nil {
		return err
	}
	s.mu.Lock()
	conv, ok := s.convs.get(k)
	send := ok && conv.chatStates && c.consented(k) && conv.lastState != a.State
	if send {
		conv.lastState = a.State
	}
	s.mu.Unlock()
	if !send {
		return nil
	}
	el := xmltree.New(component.NSComponent, "message", "type", "chat", "from", from.String(), "to", to.String())
	el.Add(xmltree.New(ns.ChatStates, string(a.State)), xmltree.New(ns.Hints, "no-store"))
	return s.o.Sender.Send(ctx, el)
}

// questionForm renders a Question as an XEP-0004 form whose hidden
// question_id correlates the submitted answer.
func questionForm(q *backendkit.Question) (*xmltree.Element, error) {
	if len(q.Fields) == 0 || len(q.Fields) > maxQuestionFields {
		return nil, fmt.Errorf("messaging: a question has 1 to %d fields", maxQuestionFields)
	}
	qid := q.ID
	if qid == "" || ident(qid) != qid {
		return nil, errors.New("messaging: a question needs an identifier id")
	}
	x := xmltree.New(ns.Data, "x", "type", dataform.TypeForm)
	if q.Title != "" {
		x.Add(xmltree.New(ns.Data, "title").WithText(clip(q.Title)))
	}
	if q.Instructions != "" {
		x.Add(xmltree.New(ns.Data, "instructions").WithText(clip(q.Instructions)))
	}
	hidden := func(v, val string) *xmltree.Element {
		return xmltree.New(ns.Data, "field", "var", v, "type", dataform.FieldHidden).Add(xmltree.New(ns.Data, "value").WithText(val))
	}
	x.Add(hidden(dataform.FormTypeVar, ns.ChatQuestionForm), hidden(questionIDVar, qid))
	seen := map[string]bool{}
	for _, f := range q.Fields {
		if !slices.Contains(questionFieldTypes, f.Type) {
			return nil, fmt.Errorf("messaging: question field type %q is not supported", f.Type)
		}
		v := ident(f.Var)
		if f.Type != "fixed" && (v == "" || v != f.Var || v == dataform.FormTypeVar || v == questionIDVar || seen[v]) {
			return nil, errors.New("messaging: question field vars must be distinct identifiers")
		}
		seen[v] = true
		if len(f.Options) > maxQuestionOptions {
			return nil, fmt.Errorf("messaging: a question field has at most %d options", maxQuestionOptions)
		}
		fl := xmltree.New(ns.Data, "field", "type", f.Type)
		if v != "" {
			fl.SetAttr("var", v)
		}
		if f.Label != "" {
			fl.SetAttr("label", clip(f.Label))
		}
		if f.Desc != "" {
			fl.Add(xmltree.New(ns.Data, "desc").WithText(clip(f.Desc)))
		}
		if f.Required {
			fl.Add(xmltree.New(ns.Data, "required"))
		}
		for _, o := range f.Options {
			o = clip(o)
			fl.Add(xmltree.New(ns.Data, "option", "label", o).Add(xmltree.New(ns.Data, "value").WithText(o)))
		}
		x.Add(fl)
	}
	return x, nil
}

// questionText is the plain-text rendering of a question for clients that
// show no forms.
func questionText(q *backendkit.Question) string {
	var b strings.Builder
	for _, s := range []string{q.Title, q.Instructions} {
		if s != "" {
			b.WriteString(clip(s) + "\n")
		}
	}
	for _, f := range q.Fields {
		label := f.Label
		if label == "" {
			label = f.Var
		}
		b.WriteString("- " + clip(label))
		if len(f.Options) > 0 && len(f.Options) <= maxQuestionOptions {
			opts := make([]string, len(f.Options))
			for i, o := range f.Options {
				opts[i] = clip(o)
			}
			b.WriteString(" (" + strings.Join(opts, ", ") + ")")
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// clip is untrusted display text made safe for XML and bounded.
func clip(s string) string { return clipTo(s, maxQuestionText) }

func clipTo(s string, n int) string {
	s = strings.TrimSpace(xmltree.Sanitize(s))
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return s
}
