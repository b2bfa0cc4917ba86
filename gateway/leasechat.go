package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/cluster"
	"github.com/agentgw/agentgw/tasks"
)

// Chat on a leased backend (docs/cluster.md, "Chat on a leased bridge").
// A connection-holding backend that converses (an xAgent IM connector, an
// OpenAgentNetwork account) speaks on the XMPP side from the member that
// holds its lease: the messaging service's Chat is attached to every lease
// term there. ejabberd hands an inbound chat message, a bounce or a
// presence to any member, so a member without the lease relays them to the
// holder over the cluster bus: a turn is a request that waits (bounded) for
// the holder's answer, so the sender is told the truth; bounces and "the
// peer is back" are hints.

// leaseChatChannel is the bus channel of the relay.
const leaseChatChannel = "lease-chat"

// leaseChatWait bounds how long a member waits for the holder to take a
// relayed turn.
const leaseChatWait = 10 * time.Second

// leaseChatMsg is one relay message.
type leaseChatMsg struct {
	Kind     string             `json:"k"` // turn, reply, bounce, back
	Endpoint string             `json:"ep"`
	From     string             `json:"from"`           // the sending member
	To       string             `json:"to"`             // the member addressed
	ID       string             `json:"id,omitempty"`   // turn/reply correlation
	Turn     *backendkit.Turn   `json:"turn,omitempty"` // kind turn
	Bounce   *backendkit.Bounce `json:"bounce,omitempty"`
	Peer     string             `json:"peer,omitempty"` // kind back
	Err      string             `json:"err,omitempty"`  // kind reply: "" taken, else a code or text
}

// Relay error codes for the refusals the messaging service words itself.
const (
	relayUnavailable = "\x00unavailable"
	relayTooLarge    = "\x00too-large"
	relayRateLimited = "\x00rate-limited"
)

func relayErr(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, backendkit.ErrChatUnavailable), errors.Is(err, context.DeadlineExceeded):
		return relayUnavailable
	case errors.Is(err, backendkit.ErrChatTooLarge):
		return relayTooLarge
	case errors.Is(err, backendkit.ErrChatRateLimited):
		return relayRateLimited
	}
	return err.Error() // a Conversant's error text is safe to show
}

func relayError(s string) error {
	switch s {
	case "":
		return nil
	case relayUnavailable:
		return backendkit.ErrChatUnavailable
	case relayTooLarge:
		return backendkit.ErrChatTooLarge
	case relayRateLimited:
		return backendkit.ErrChatRateLimited
	}
	return errors.New(s)
}

// leaseChat is this member's end of the relay: the chat-capable leased
// backends by endpoint and the turns waiting for a holder's answer.
type leaseChat struct {
	self string
	bus  cluster.Bus
	log  interface {
		Warn(string, ...any)
		Debug(string, ...any)
	}

	// wrote tells this member's messaging service that a relayed turn's
	// sender wrote (its consent and receipt live there).
	wrote func(backendkit.Turn)

	mu      sync.Mutex
	eps     map[string]*leasedChatBackend
	waiting map[string]chan string
	seq     atomic.Uint64
	unsub   func()
}

func (g *Gateway) leaseChat() *leaseChat {
	c := g.cl
	if c.chat == nil {
		c.chat = &leaseChat{self: c.instance, bus: c.bus, log: g.log.With("part", "lease-chat"),
			eps: map[string]*leasedChatBackend{}, waiting: map[string]chan string{},
			wrote: func(t backendkit.Turn) {
				if g.Messaging != nil {
					g.Messaging.PeerWrote(t)
				}
			}}
		c.chat.unsub = c.bus.Subscribe(leaseChatChannel, c.chat.onMsg)
	}
	return c.chat
}

func (r *leaseChat) publish(m leaseChatMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.bus.Publish(ctx, leaseChatChannel, b)
}

// onMsg runs on the bus's delivery goroutine: it never blocks.
func (r *leaseChat) onMsg(payload []byte) {
	var m leaseChatMsg
	if json.Unmarshal(payload, &m) != nil || m.To != r.self || m.From == r.self {
		return
	}
	if m.Kind == "reply" {
		r.mu.Lock()
		ch := r.waiting[m.ID]
		delete(r.waiting, m.ID)
		r.mu.Unlock()
		if ch != nil {
			ch <- m.Err
		}
		return
	}
	r.mu.Lock()
	lb := r.eps[m.Endpoint]
	r.mu.Unlock()
	if lb == nil {
		return
	}
	switch m.Kind {
	case "turn":
		if m.Turn == nil {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), leaseChatWait)
			defer cancel()
			if r.wrote != nil && lb.term() != nil {
				r.wrote(*m.Turn)
			}
			err := lb.converseHere(ctx, *m.Turn)
			if perr := r.publish(leaseChatMsg{Kind: "reply", Endpoint: m.Endpoint, From: r.self, To: m.From, ID: m.ID, Err: relayErr(err)}); perr != nil {
				r.log.Warn("lease chat: cannot answer a relayed turn; the sender is told the agent is unavailable", "endpoint", m.Endpoint, "err", perr)
			}
		}()
	case "bounce":
		if w, ok := lb.term().(backendkit.ChatWatcher); ok && m.Bounce != nil {
			w.ChatBounced(*m.Bounce)
		}
	case "back":
		if w, ok := lb.term().(backendkit.ChatWatcher); ok {
			w.ChatPeerBack(m.Endpoint, m.Peer)
		}
	}
}

// relayTurn hands t to holder and waits for its answer.
func (r *leaseChat) relayTurn(ctx context.Context, holder string, t backendkit.Turn) error {
	id := r.self + "-" + strconv.FormatUint(r.seq.Add(1), 36)
	ch := make(chan string, 1)
	r.mu.Lock()
	r.waiting[id] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
	}()
	if err := r.publish(leaseChatMsg{Kind: "turn", Endpoint: t.Endpoint, From: r.self, To: holder, ID: id, Turn: &t}); err != nil {
		r.log.Warn("lease chat: cannot relay a chat turn to the lease holder", "endpoint", t.Endpoint, "holder", holder, "err", err)
		return backendkit.ErrChatUnavailable
	}
	wctx, cancel := context.WithTimeout(ctx, leaseChatWait)
	defer cancel()
	select {
	case e := <-ch:
		return relayError(e)
	case <-wctx.Done():
		r.log.Warn("lease chat: the lease holder did not take a relayed chat turn in time; the sender is told the agent is unavailable",
			"endpoint", t.Endpoint, "holder", holder, "wait", leaseChatWait)
		return backendkit.ErrChatUnavailable
	}
}

// originatesChat reports whether a leased endpoint's backend chats: it
// converses, takes the messaging Chat, and (when it says whom it
// messages) has a configured recipient (an IM connector without an inbox
// does not chat, and stays a plain leased backend).
func originatesChat(ep string, template any) bool {
	_, conv := template.(backendkit.Conversant)
	_, att := template.(backendkit.ChatAttacher)
	if !conv || !att {
		return false
	}
	if cc, ok := template.(backendkit.ChatConsent); ok {
		return len(cc.ChatRecipients(ep)) > 0
	}
	return true
}

// leasedChatBackend is a leased endpoint whose backend converses: it
// implements the chat interfaces for the messaging service on every
// member, this member's backend answering while it holds the lease and
// the others relaying to the holder. Tasks go to Backend: the
// leasedBackend of a connection-holding backend, or the endpoint's own
// backend for an endpoint of a held shared resource (the ACC listener).
type leasedChatBackend struct {
	tasks.Backend
	self  string
	ep    string
	relay *leaseChat
	// tmpl answers what the configuration decides (ChatRecipients) on a
	// member without the lease.
	tmpl any
	// local is this member's conversing backend while it holds the
	// lease, else nil; holder is the holder seen last ("" unknown).
	local  func() any
	holder func() string
	// fixed: the endpoint's backend is permanent (tmpl, a held endpoint's
	// own backend) and takes the Chat once; otherwise each lease term
	// gets it (attach).
	fixed bool
	chat  atomic.Pointer[chatBox]
}

type chatBox struct{ c backendkit.Chat }

var (
	_ backendkit.Conversant   = (*leasedChatBackend)(nil)
	_ backendkit.ChatAttacher = (*leasedChatBackend)(nil)
	_ backendkit.ChatConsent  = (*leasedChatBackend)(nil)
	_ backendkit.ChatWatcher  = (*leasedChatBackend)(nil)
	_ backendkit.Readiness    = (*leasedChatBackend)(nil)
)

// newLeasedChat wraps a leased endpoint's backend for chat.
func newLeasedChat(g *Gateway, ep string, backend tasks.Backend, tmpl any, local func() any, holder func() string, fixed bool) *leasedChatBackend {
	lc := &leasedChatBackend{Backend: backend, self: g.cl.instance, ep: ep, relay: g.leaseChat(), tmpl: tmpl,
		local: local, holder: holder, fixed: fixed}
	lc.relay.mu.Lock()
	lc.relay.eps[ep] = lc
	lc.relay.mu.Unlock()
	return lc
}

// Ready is the task backend's.
func (l *leasedChatBackend) Ready() bool {
	if r, ok := l.Backend.(backendkit.Readiness); ok {
		return r.Ready()
	}
	return true
}

// term is this member's conversing backend, nil without the lease.
func (l *leasedChatBackend) term() any { return l.local() }

func (l *leasedChatBackend) holderNow() string { return l.holder() }

// AttachChat keeps the messaging service's Chat for every term.
func (l *leasedChatBackend) AttachChat(c backendkit.Chat) {
	l.chat.Store(&chatBox{c})
	b := l.term()
	if l.fixed {
		b = l.tmpl
	}
	if a, ok := b.(backendkit.ChatAttacher); ok {
		a.AttachChat(c)
	}
}

// attach gives a new term the Chat before it runs.
func (l *leasedChatBackend) attach(b any) {
	if box := l.chat.Load(); box != nil {
		if a, ok := b.(backendkit.ChatAttacher); ok {
			a.AttachChat(box.c)
		}
	}
}

// CanConverse: the holder's term says; another member converses while it
// knows a live holder (and relays).
func (l *leasedChatBackend) CanConverse(endpoint string) bool {
	if t := l.term(); t != nil {
		c, ok := t.(backendkit.Conversant)
		return ok && c.CanConverse(endpoint)
	}
	h := l.holderNow()
	return h != "" && h != l.self
}

// Converse takes the turn on the holder, relaying it there from another
// member.
func (l *leasedChatBackend) Converse(ctx context.Context, t backendkit.Turn) error {
	if l.term() != nil {
		return l.converseHere(ctx, t)
	}
	h := l.holderNow()
	if h == "" || h == l.self {
		return backendkit.ErrChatUnavailable
	}
	return l.relay.relayTurn(ctx, h, t)
}

func (l *leasedChatBackend) converseHere(ctx context.Context, t backendkit.Turn) error {
	c, ok := l.term().(backendkit.Conversant)
	if !ok {
		return backendkit.ErrChatUnavailable
	}
	if !c.CanConverse(t.Endpoint) {
		return backendkit.ErrChatUnavailable
	}
	return c.Converse(ctx, t)
}

// ChatRecipients: the configured recipients, the same on every member.
func (l *leasedChatBackend) ChatRecipients(endpoint string) []string {
	b := l.term()
	if b == nil {
		b = l.tmpl
	}
	if c, ok := b.(backendkit.ChatConsent); ok {
		return c.ChatRecipients(endpoint)
	}
	return nil
}

// ChatBounced and ChatPeerBack reach the holder's term, relayed from
// another member (hints: they must not block).
func (l *leasedChatBackend) ChatBounced(b backendkit.Bounce) {
	if w, ok := l.term().(backendkit.ChatWatcher); ok {
		w.ChatBounced(b)
		return
	}
	if h := l.holderNow(); h != "" && h != l.self {
		go l.relay.publish(leaseChatMsg{Kind: "bounce", Endpoint: l.ep, From: l.self, To: h, Bounce: &b})
	}
}

func (l *leasedChatBackend) ChatPeerBack(endpoint, peer string) {
	if w, ok := l.term().(backendkit.ChatWatcher); ok {
		w.ChatPeerBack(endpoint, peer)
		return
	}
	if h := l.holderNow(); h != "" && h != l.self && strings.EqualFold(endpoint, l.ep) {
		go l.relay.publish(leaseChatMsg{Kind: "back", Endpoint: l.ep, From: l.self, To: h, Peer: peer})
	}
}
