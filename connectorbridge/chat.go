package connectorbridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/internal/transfer"
)

// xAgent IM Profile v2, the gateway in xAgent's role. A chat.message from
// the connector (a person wrote on the IM network) is stored durably,
// acknowledged, and delivered as an XMPP chat message from the endpoint's
// resource named after the connector channel to the configured inbox. The
// inbox's replies to that full JID are stored durably and sent to the
// connector as chat.message on the same channel; the connector's
// chat.message.ack becomes an XEP-0184 receipt. Both queues live in
// chatdb, so an accepted message survives reconnects and kill -9 and is
// delivered once (keyed by message id). Files cross through the Transfer
// Plane: connector → fetch → XEP-0363 upload → URL in the XMPP message;
// XMPP URL → fetch → POST /files/uploads → file_ref in chat.message.files.

// FileUploader offers bytes to the XMPP side and returns the URL to share
// (transfer.HTTPUpload, XEP-0363).
type FileUploader = backendkit.FileUploader

// ChatLimits bound IM traffic. Zero fields take the defaults.
type ChatLimits struct {
	MaxFileBytes int64         // one file, each way; default 10 MiB
	PerMinute    int           // messages per conversation and direction per minute; default 30
	Burst        int           // messages a conversation may send at once; default 10
	MaxBacklog   int           // undelivered messages per conversation and direction; default 100
	MaxQueued    int           // undelivered messages per agent and direction; default 1000
	TTL          time.Duration // expiry of a message that names none; default 24h
	Retention    time.Duration // how long delivered ids are remembered for de-duplication; default 7 days
	Retry        time.Duration // wait before retrying a failed delivery; default 2s
	// MaxBounces bounds how often one inbound message may bounce before
	// it fails for good (the connector is told); default 50.
	MaxBounces int
}

// After a bounce, inbound messages are held until the inbox is back (its
// presence or its next message) or, at the latest, for a probe delay that
// doubles from holdMin to holdMax with each bounce in a row.
const (
	holdMin = time.Minute
	holdMax = 30 * time.Minute
)

func (l *ChatLimits) defaults() {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = transfer.DefaultMaxBytes
	}
	if l.PerMinute <= 0 {
		l.PerMinute = 30
	}
	if l.Burst <= 0 {
		l.Burst = 10
	}
	if l.MaxBacklog <= 0 {
		l.MaxBacklog = 100
	}
	if l.MaxQueued <= 0 {
		l.MaxQueued = 1000
	}
	if l.TTL <= 0 {
		l.TTL = 24 * time.Hour
	}
	if l.Retention <= 0 {
		l.Retention = 7 * 24 * time.Hour
	}
	if l.Retry <= 0 {
		l.Retry = 2 * time.Second
	}
	if l.MaxBounces <= 0 {
		l.MaxBounces = 50
	}
}

var (
	_ backendkit.Conversant   = (*Backend)(nil)
	_ backendkit.ChatAttacher = (*Backend)(nil)
	_ backendkit.ChatConsent  = (*Backend)(nil)
	_ backendkit.ChatWatcher  = (*Backend)(nil)
)

// ChatRecipients implements backendkit.ChatConsent: the configured inbox
// is the one JID the endpoint messages without its writing first.
func (b *Backend) ChatRecipients(endpoint string) []string {
	if b.chat == nil || !strings.EqualFold(endpoint, b.o.Endpoint) {
		return nil
	}
	return []string{b.chat.inbox}
}

// chatSide is the Backend's IM v2 state.
type chatSide struct {
	b     *Backend
	lim   ChatLimits
	inbox string
	db    chatdb.Driver
	chat  atomic.Pointer[chatHolder]
	in    chan chatPush // pushes from the read loop, taken by accept
	wake  chan struct{}

	mu       sync.Mutex
	buckets  map[string]*bucket
	lastConv map[string]string // channel → last conversation that wrote

	// Inbound delivery state (under mu): messages the inbox bounced, not
	// yet re-queued, and the hold on inbound delivery while the inbox is
	// away.
	bounced  map[string]bool
	requeued map[string]bool // bounced and queued again: MaxBounces applies
	holdTil  time.Time
	holdN    int

	linkWait atomic.Bool // the XMPP stream is down: poll for it

	dropped atomic.Int64 // pushes dropped because the accept queue was full
	refused atomic.Int64
	lastLog atomic.Int64 // Unix ms of the last refusal line after the first few
}

type chatHolder struct{ c backendkit.Chat }

type chatPush struct {
	s *transport.Session
	p *wire.Packet
}

func newChatSide(b *Backend) *chatSide {
	if b.o.Inbox == "" || b.o.Chats == nil {
		return nil
	}
	lim := b.o.ChatLimits
	lim.defaults()
	return &chatSide{b: b, lim: lim, inbox: strings.ToLower(b.o.Inbox), db: b.o.Chats,
		in: make(chan chatPush, 256), wake: make(chan struct{}, 1),
		buckets: map[string]*bucket{}, lastConv: map[string]string{},
		bounced: map[string]bool{}, requeued: map[string]bool{}}
}

// ChatBounced implements backendkit.ChatWatcher: an inbound IM message
// came back from the inbox (offline without offline storage, blocked).
// It is queued again before this returns, so a crash right after the
// bounce cannot leave it counted delivered, and inbound delivery holds
// until the inbox is back.
func (b *Backend) ChatBounced(bo backendkit.Bounce) {
	cs := b.chat
	if cs == nil || !strings.EqualFold(bo.Endpoint, b.o.Endpoint) || bo.Peer != cs.inbox || !strings.HasPrefix(bo.ID, "im_") {
		return
	}
	id := strings.TrimPrefix(bo.ID, "im_")
	now := b.c.clock.Now()
	cs.mu.Lock()
	// The hold first, so that no delivery pass sends the row between its
	// Reopen below and the hold. The id also goes to the next pass: a
	// bounce can overtake the Delivered mark of its own send, and then the
	// Reopen below finds the row still pending (a crash there leaves it
	// pending too, so nothing is lost).
	if len(cs.bounced) < 4096 {
		cs.bounced[id] = true
	}
	d := holdMin << min(cs.holdN, 5)
	if d > holdMax {
		d = holdMax
	}
	cs.holdN++
	cs.holdTil = now.Add(d)
	cs.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	cs.requeue(ctx, id)
	cancel()
	b.log.Info("the inbox bounced an IM message; it stays queued until the inbox is back", "condition", bo.Condition, "probe_in", d)
	cs.kick()
}

// ChatPeerBack implements backendkit.ChatWatcher: the inbox is back, so
// held inbound messages go out now.
func (b *Backend) ChatPeerBack(endpoint, peer string) {
	cs := b.chat
	if cs == nil || !strings.EqualFold(endpoint, b.o.Endpoint) || peer != cs.inbox {
		return
	}
	cs.mu.Lock()
	held := !cs.holdTil.IsZero()
	cs.holdTil, cs.holdN = time.Time{}, 0
	cs.mu.Unlock()
	if held {
		b.log.Info("the inbox is back; sending the IM messages held for it")
		cs.kick()
	}
}

// AttachChat implements backendkit.ChatAttacher.
func (b *Backend) AttachChat(c backendkit.Chat) {
	if b.chat != nil && c != nil {
		b.chat.chat.Store(&chatHolder{c})
		b.chat.kick()
	}
}

// CanConverse implements backendkit.Conversant: chat works while an inbox
// is configured and the agent has a signed-in channel whose last
// descriptor enables IM v2. A data plane that is down (a connector
// restart) does not stop it: turns are queued durably and sent when the
// channel is back.
func (b *Backend) CanConverse(endpoint string) bool {
	if b.chat == nil || !strings.EqualFold(endpoint, b.o.Endpoint) {
		return false
	}
	c := b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	desc := c.desc
	if desc == nil {
		desc = c.projDesc
	}
	bound := c.chanID != "" || (c.bind.Authenticated && c.bind.ChannelID != "")
	return c.fatal == nil && bound && desc.Authenticated() && desc.HasProfile(wire.ProfileIMv2)
}

// Errors Converse returns, worded for the XMPP sender.
var (
	errNotInbox  = errors.New("this agent relays only its inbox's messages to the IM network")
	errNoChannel = errors.New("this resource is not an open IM channel of the agent")
)

// Converse implements backendkit.Conversant: a turn from the inbox to the
// endpoint (resource: a connector channel) is queued durably for the
// connector. It returns once the turn is stored.
func (b *Backend) Converse(ctx context.Context, t backendkit.Turn) error {
	cs := b.chat
	if cs == nil {
		return backendkit.ErrChatUnavailable
	}
	if bareJID(t.From) != cs.inbox {
		return errNotInbox
	}
	_, chID, _, _ := b.c.live()
	if t.Resource != "" {
		if t.Resource != chID && !cs.knownChannel(ctx, t.Resource) {
			return errNoChannel
		}
		chID = t.Resource
	}
	if chID == "" {
		return backendkit.ErrChatUnavailable
	}
	if len(t.Body) > wire.MaxChatText || len(t.Files) > wire.MaxChatFiles {
		return backendkit.ErrChatTooLarge
	}
	if strings.TrimSpace(t.Body) == "" && len(t.Files) == 0 {
		return errors.New("an empty message is not relayed")
	}
	conv := t.Thread
	if conv == "" || !wire.ValidWireID(conv) || len(conv) > wire.MaxConversation {
		cs.mu.Lock()
		conv = cs.lastConv[chID]
		cs.mu.Unlock()
	}
	key := chID + "\x00" + conv
	if !cs.allow("out\x00" + key) {
		cs.logRefusal("outbound chat message refused: conversation rate limit", "channel", chID)
		return backendkit.ErrChatRateLimited
	}
	if err := cs.roomFor(ctx, chatdb.Outbound, conv); err != nil {
		return err
	}
	id := wireID("x_", bareJID(t.From)+"\x00"+t.ID) // a resend from another of the inbox's resources is the same turn
	if t.ID == "" {
		id = ids.New("x_")
	}
	rec := outRecord{From: t.From, TurnID: t.ID, Text: t.Body, Files: t.Files, ReplyTo: t.ReplyTo, Receipt: t.ReceiptRequested}
	payload, _ := marshalNoEscape(rec)
	if len(payload) > chatdb.MaxPayload {
		return backendkit.ErrChatTooLarge
	}
	now := b.c.clock.Now()
	ins, _, err := cs.db.Enqueue(ctx, chatdb.Item{Endpoint: b.o.Endpoint, Direction: chatdb.Outbound, MessageID: id,
		ChannelID: chID, Conversation: conv, Payload: payload, CreatedAt: now, ExpiresAt: now.Add(cs.lim.TTL)})
	if err != nil {
		b.log.Error("cannot store an outbound chat message", "error", err)
		return backendkit.ErrChatUnavailable
	}
	if !ins {
		b.log.Debug("duplicate outbound chat message ignored", "message_id", id)
	}
	cs.kick()
	return nil
}

// outRecord is the stored form of an outbound turn.
type outRecord struct {
	From    string            `json:"from"`
	TurnID  string            `json:"turn_id"`
	Text    string            `json:"text"`
	Files   []backendkit.File `json:"files,omitempty"`
	ReplyTo string            `json:"reply_to,omitempty"`
	Receipt bool              `json:"receipt,omitempty"`
}

// wireID derives a protocol-safe, stable message id from any string.
func wireID(prefix, s string) string {
	h := sha256.Sum256([]byte(s))
	return prefix + hex.EncodeToString(h[:16])
}

func bareJID(j string) string {
	if i := strings.IndexByte(j, '/'); i >= 0 {
		j = j[:i]
	}
	return strings.ToLower(j)
}

// knownChannel accepts the bound channel while the data plane is down
// (the reply is queued) and a channel the connector replaced (lease loss),
// whose resource the inbox still writes to; both go out on the channel
// that is open when they are sent.
func (cs *chatSide) knownChannel(ctx context.Context, ch string) bool {
	c := cs.b.c
	c.mu.Lock()
	bound := c.bind.ChannelID
	c.mu.Unlock()
	if ch == bound {
		return true
	}
	cs.mu.Lock()
	_, ok := cs.lastConv[ch]
	cs.mu.Unlock()
	return ok
}

func (cs *chatSide) kick() {
	select {
	case cs.wake <- struct{}{}:
	default:
	}
}

// roomFor refuses a message when its conversation's or the agent's
// backlog is full.
func (cs *chatSide) roomFor(ctx context.Context, dir chatdb.Direction, conv string) error {
	n, err := cs.db.Backlog(ctx, cs.b.o.Endpoint, dir, conv)
	if err != nil {
		return backendkit.ErrChatUnavailable
	}
	if n >= cs.lim.MaxBacklog {
		cs.logRefusal("chat message refused: conversation backlog full", "direction", string(dir), "backlog", n)
		return backendkit.ErrChatRateLimited
	}
	all, err := cs.db.Backlog(ctx, cs.b.o.Endpoint, dir, "")
	if err != nil {
		return backendkit.ErrChatUnavailable
	}
	if all >= cs.lim.MaxQueued {
		cs.logRefusal("chat message refused: agent backlog full", "direction", string(dir), "backlog", all)
		return backendkit.ErrChatRateLimited
	}
	return nil
}

// logRefusal logs the first three refusals, then at most one line a
// minute with the running count, so a flood is visible without flooding
// the log.
func (cs *chatSide) logRefusal(msg string, args ...any) {
	n := cs.refused.Add(1)
	now := cs.b.c.clock.Now().UnixMilli()
	if n > 3 {
		last := cs.lastLog.Load()
		if now-last < 60_000 || !cs.lastLog.CompareAndSwap(last, now) {
			return
		}
	} else {
		cs.lastLog.Store(now)
	}
	cs.b.log.Warn(msg, append(args, "refusals", n)...)
}

// bucket is a token bucket: Burst tokens, PerMinute refill.
type bucket struct {
	tokens float64
	at     time.Time
}

func (cs *chatSide) allow(key string) bool {
	now := cs.b.c.clock.Now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	bk := cs.buckets[key]
	if bk == nil {
		if len(cs.buckets) >= 4096 { // bounded: forget idle conversations wholesale
			cs.buckets = map[string]*bucket{}
		}
		bk = &bucket{tokens: float64(cs.lim.Burst), at: now}
		cs.buckets[key] = bk
	}
	bk.tokens += now.Sub(bk.at).Minutes() * float64(cs.lim.PerMinute)
	if max := float64(cs.lim.Burst); bk.tokens > max {
		bk.tokens = max
	}
	bk.at = now
	if bk.tokens < 1 {
		return false
	}
	bk.tokens--
	return true
}

// onChat takes an IM v2 push on the read loop: it only queues it.
func (c *Client) chatPush(cs *chatSide) func(*transport.Session, *wire.Packet) {
	return func(s *transport.Session, p *wire.Packet) {
		select {
		case cs.in <- chatPush{s, p}:
		default:
			if n := cs.dropped.Add(1); n <= 3 || n%100 == 0 {
				c.log.Warn("IM push dropped: the gateway is busy; the connector redelivers unacknowledged messages", "dropped", n)
			}
			if p.Type == wire.TypeChatMessage {
				s.Reply(chatAck(p, "", &wire.PacketError{Code: wire.CodeChatBusy, Message: "the gateway is busy; retry later", Retryable: true}))
			}
		}
	}
}

func chatAck(p *wire.Packet, messageID string, perr *wire.PacketError) *wire.Packet {
	a := &wire.Packet{Type: wire.TypeChatMessageAck, RequestID: p.RequestID, ReplyTo: p.PacketID,
		ConnectorChannelID: p.ConnectorChannelID, Error: perr}
	if perr == nil {
		a.Payload, _ = json.Marshal(wire.ChatAck{MessageID: messageID, Status: "accepted"})
	}
	return a
}

// run is the chat worker: it accepts pushes, delivers both queues and
// purges old ids, until ctx ends.
func (cs *chatSide) run(ctx context.Context) {
	go cs.acceptLoop(ctx)
	cs.purge(ctx)
	purge := time.NewTicker(time.Hour)
	defer purge.Stop()
	retry := time.NewTimer(0)
	defer retry.Stop()
	// Failed deliveries are retried with the gateway's one backoff, so a
	// refusing peer or a long outage costs a few attempts a minute.
	bo := backendkit.Supervisor{Min: cs.lim.Retry, Max: time.Minute}.Backoff()
	for {
		cs.b.c.mu.Lock()
		changed := cs.b.c.changed
		cs.b.c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-cs.wake:
		case <-changed:
		case <-retry.C:
		case <-purge.C:
			cs.purge(ctx)
		}
		in := cs.deliverInbound(ctx)
		out := cs.deliverOutbound(ctx)
		switch {
		case in || out:
			retry.Reset(bo.Next())
		case cs.linkWait.Load():
			// Waiting for the XMPP stream (the gateway is starting or
			// reconnecting): look again soon, without backing off.
			retry.Reset(500 * time.Millisecond)
		default:
			bo.Reset()
		}
	}
}

func (cs *chatSide) purge(ctx context.Context) {
	if n, err := cs.db.Purge(ctx, cs.b.c.clock.Now().Add(-cs.lim.Retention)); err != nil {
		cs.b.log.Warn("purging old chat message ids failed", "error", err)
	} else if n > 0 {
		cs.b.log.Info("purged old chat message ids", "count", n)
	}
}

func (cs *chatSide) acceptLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case cp := <-cs.in:
			switch cp.p.Type {
			case wire.TypeChatMessage:
				cs.acceptMessage(ctx, cp.s, cp.p)
			case wire.TypeChatActivity:
				cs.activity(ctx, cp.p)
			}
		}
	}
}

// acceptMessage validates an inbound chat.message, stores it and acks it
// once durable. A redelivery of a stored id is acked again and not stored
// twice.
func (cs *chatSide) acceptMessage(ctx context.Context, s *transport.Session, p *wire.Packet) {
	b := cs.b
	// A refusal names the message when its id is readable, so the
	// connector can match it even after it redelivered under another
	// request id.
	var peek struct {
		MessageID string `json:"message_id"`
	}
	json.Unmarshal(p.Payload, &peek)
	if !wire.ValidWireID(peek.MessageID) || len(peek.MessageID) > wire.MaxMessageID {
		peek.MessageID = ""
	}
	refuse := func(code, msg string) {
		cs.logRefusal("inbound chat message refused", "code", code)
		a := chatAck(p, "", &wire.PacketError{Code: code, Message: msg, Retryable: wire.RetryLater(code)})
		if peek.MessageID != "" {
			a.Payload, _ = json.Marshal(wire.ChatAck{MessageID: peek.MessageID, Status: "rejected"})
		}
		s.Reply(a)
	}
	if !cs.ownChannel(p.ConnectorChannelID) {
		refuse("connector_channel_not_owned", "the message names a channel this xAgent has not open")
		return
	}
	chID := p.ConnectorChannelID
	m, err := wire.DecodeChatMessage(p.Payload)
	if errors.Is(err, wire.ErrChatTooLarge) {
		refuse(wire.CodeChatRejected, fmt.Sprintf("message too large (text %d bytes, %d files at most)", wire.MaxChatText, wire.MaxChatFiles))
		return
	}
	if err != nil {
		refuse(wire.CodeChatRejected, err.Error())
		return
	}
	now := b.c.clock.Now()
	exp := now.Add(cs.lim.TTL)
	if m.ExpiresAt > 0 {
		exp = time.UnixMilli(m.ExpiresAt)
		if !exp.After(now) {
			refuse(wire.CodeChatExpired, "the message has expired")
			return
		}
	}
	cs.mu.Lock()
	cs.lastConv[chID] = m.ConversationID
	cs.mu.Unlock()
	// A redelivery of a stored id is acked again without counting
	// against the limits (the connector lost our ack).
	if _, found, err := cs.db.Lookup(ctx, b.o.Endpoint, chatdb.Inbound, m.MessageID); err == nil && found {
		s.Push(chatAck(p, m.MessageID, nil))
		return
	}
	if !cs.allow("in\x00" + chID + "\x00" + m.ConversationID) {
		refuse(wire.CodeChatRateLimited, "too many messages in this conversation; retry later")
		return
	}
	if err := cs.roomFor(ctx, chatdb.Inbound, m.ConversationID); err != nil {
		refuse(wire.CodeChatBusy, "too many undelivered messages; retry later")
		return
	}
	// Unescaped, so 64 KiB of "<" stays 64 KiB (HTML escaping would make
	// it six times that, past the row limit).
	payload, _ := marshalNoEscape(m)
	if len(payload) > chatdb.MaxPayload {
		refuse(wire.CodeChatRejected, "message too large")
		return
	}
	ins, st, err := cs.db.Enqueue(ctx, chatdb.Item{Endpoint: b.o.Endpoint, Direction: chatdb.Inbound, MessageID: m.MessageID,
		ChannelID: chID, Conversation: m.ConversationID, Payload: payload, CreatedAt: now, ExpiresAt: exp})
	if err != nil {
		b.log.Error("cannot store an inbound chat message; not acknowledging it", "error", err)
		refuse(wire.CodeChatUnavailable, "the gateway cannot store the message now")
		return
	}
	if !ins {
		b.log.Debug("inbound chat message redelivered; acknowledging it again", "message_id", m.MessageID, "state", string(st))
	}
	// Durable first, then the ack: a crash in between makes the connector
	// redeliver, and the id makes that a no-op.
	if err := s.Push(chatAck(p, m.MessageID, nil)); err != nil {
		b.log.Info("the data plane closed before an inbound chat message was acknowledged; the connector will redeliver it")
	}
	cs.kick()
}

// ownChannel reports whether ch is the open channel, or the bound one
// while it is being reopened (the connector redelivers right after its
// channel.open ack, which may overtake the gateway's bookkeeping).
func (cs *chatSide) ownChannel(ch string) bool {
	c := cs.b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return ch != "" && (ch == c.chanID || (c.chanID == "" && ch == c.bind.ChannelID))
}

// activity relays chat.activity as an XEP-0085 chat state to the inbox.
func (cs *chatSide) activity(ctx context.Context, p *wire.Packet) {
	h := cs.chat.Load()
	chID := p.ConnectorChannelID
	if h == nil || !cs.ownChannel(chID) {
		return
	}
	var a wire.ChatActivity
	if json.Unmarshal(p.Payload, &a) != nil {
		return
	}
	st, ok := wire.ChatState(a.State)
	if !ok || !cs.allow("act\x00"+chID+"\x00"+a.ConversationID) {
		return
	}
	actx, cancel := context.WithTimeout(ctx, cs.b.o.RequestTimeout)
	defer cancel()
	if err := h.c.Activity(actx, backendkit.Activity{Endpoint: cs.b.o.Endpoint, Resource: chID, To: cs.inbox,
		State: backendkit.ChatState(st)}); err != nil {
		cs.b.log.Debug("relaying chat activity failed", "error", err)
	}
}

// deliverInbound sends pending inbound messages to the inbox, oldest
// first. It reports true when something is left to retry.
//
// Nothing goes out before the XMPP stream is up: a file needs an XEP-0363
// slot from the server, and a send would only be queued. A message the
// inbox bounces after it was handed on is queued again (in its place) and
// inbound delivery holds until the inbox is back.
func (cs *chatSide) deliverInbound(ctx context.Context) bool {
	h := cs.chat.Load()
	if h == nil {
		return false
	}
	if l, ok := h.c.(backendkit.ChatLink); ok && !l.Connected() {
		cs.linkWait.Store(true)
		return false
	}
	cs.linkWait.Store(false)
	b := cs.b
	cs.requeueBounced(ctx)
	items, err := cs.db.Pending(ctx, b.o.Endpoint, chatdb.Inbound, 50)
	if err != nil {
		b.log.Warn("reading the inbound chat queue failed", "error", err)
		return true
	}
	more := false
	for _, it := range items {
		if ctx.Err() != nil {
			return false
		}
		now := b.c.clock.Now()
		if !now.Before(it.ExpiresAt) {
			if !cs.giveUp(ctx, it, chatdb.Expired, "the inbox did not take the message before it expired", true) {
				more = true
			}
			continue
		}
		cs.mu.Lock()
		held := now.Before(cs.holdTil)
		bounced := cs.requeued[it.MessageID]
		cs.mu.Unlock()
		if bounced && it.Attempts >= cs.lim.MaxBounces {
			if !cs.giveUp(ctx, it, chatdb.Failed, fmt.Sprintf("the inbox bounced the message; %d attempts", it.Attempts), true) {
				more = true
			}
			continue
		}
		if held {
			more = true // probed again when the hold ends, at once when the inbox is back
			continue
		}
		var m wire.ChatMessage
		if json.Unmarshal(it.Payload, &m) != nil {
			cs.giveUp(ctx, it, chatdb.Failed, "the stored message is unreadable", false)
			continue
		}
		msg := backendkit.Message{Endpoint: b.o.Endpoint, Resource: it.ChannelID, To: cs.inbox,
			ID: "im_" + it.MessageID, Thread: m.ConversationID, Body: m.Text, Store: true,
			Nick: m.Sender.DisplayName}
		// A reply to an earlier IM message points at the XMPP id it was
		// delivered under; a reply to one of the inbox's messages (our
		// outbound ids) has no XMPP id we kept, so it is dropped.
		if m.ReplyTo != "" && !strings.HasPrefix(m.ReplyTo, "x_") {
			msg.ReplyTo = "im_" + m.ReplyTo
		}
		var notes []string
		for _, f := range m.Files {
			bf, err := cs.inboundFile(ctx, it.ChannelID, f)
			if err != nil {
				if transient(err) && it.Attempts < 3 {
					cs.db.Attempt(ctx, b.o.Endpoint, chatdb.Inbound, it.MessageID)
					b.log.Info("fetching or offering an inbound file failed; will retry", "message_id", it.MessageID, "error", err)
					return true
				}
				cs.logRefusal("an inbound file was not transferred", "message_id", it.MessageID, "error", err)
				notes = append(notes, fmt.Sprintf("[file %q was not transferred: %s]", f.Filename, fileReason(err)))
				continue
			}
			msg.Files = append(msg.Files, bf)
		}
		if len(notes) > 0 {
			msg.Body = strings.TrimSpace(msg.Body + "\n" + strings.Join(notes, "\n"))
		}
		err := cs.send(ctx, h.c, &msg)
		switch {
		case err == nil:
			cs.finish(ctx, it, chatdb.Delivered)
			cs.mu.Lock()
			delete(cs.requeued, it.MessageID)
			cs.mu.Unlock()
		case errors.Is(err, errPermanent):
			b.log.Warn("an inbound chat message cannot be delivered to the inbox", "message_id", it.MessageID, "error", err)
			cs.giveUp(ctx, it, chatdb.Failed, "the XMPP side refuses the message", false)
		default:
			cs.db.Attempt(ctx, b.o.Endpoint, chatdb.Inbound, it.MessageID)
			if it.Attempts < 3 || it.Attempts%50 == 0 {
				b.log.Info("delivering an inbound chat message to the inbox failed; will retry", "message_id", it.MessageID, "attempts", it.Attempts+1, "error", err)
			}
			return true
		}
	}
	return more
}

// requeueBounced re-queues the bounced messages once more, for a bounce
// that overtook its send's Delivered mark or a store error in ChatBounced;
// a row already pending again is left alone.
func (cs *chatSide) requeueBounced(ctx context.Context) {
	cs.mu.Lock()
	ids := make([]string, 0, len(cs.bounced))
	for id := range cs.bounced {
		ids = append(ids, id)
	}
	clear(cs.bounced)
	cs.mu.Unlock()
	for _, id := range ids {
		cs.requeue(ctx, id)
	}
}

// requeue puts a message the inbox bounced back in the queue, in its
// place, and counts the attempt. A store error leaves it for
// requeueBounced to retry.
func (cs *chatSide) requeue(ctx context.Context, id string) {
	b := cs.b
	err := cs.db.Reopen(ctx, b.o.Endpoint, chatdb.Inbound, id)
	switch {
	case err == nil:
		cs.db.Attempt(ctx, b.o.Endpoint, chatdb.Inbound, id)
		cs.mu.Lock()
		if len(cs.requeued) < 4096 {
			cs.requeued[id] = true
		}
		cs.mu.Unlock()
		b.log.Info("an IM message the inbox bounced is queued again", "message_id", id)
	case errors.Is(err, chatdb.ErrNotPending):
		// Still pending (a retry already), expired or failed: nothing to do.
	default:
		b.log.Warn("re-queueing a bounced IM message failed; will retry", "message_id", id, "error", err)
		cs.mu.Lock()
		if len(cs.bounced) < 4096 {
			cs.bounced[id] = true
		}
		cs.mu.Unlock()
	}
}

// giveUp ends an inbound message that was acknowledged to the connector
// as accepted but will not reach the inbox, and tells the connector with
// a final (not retryable) chat.message.ack error naming the message, so
// the IM side does not take it as delivered. With wait set (a message
// that expired or reached its bounce bound: re-evaluating it is
// harmless), the row stays pending while the data plane is down, until
// the connector could be told or one more TTL has passed since the
// expiry; giveUp reports whether it finished the row. Otherwise the row
// is finished at once and a notice the data plane cannot carry is lost
// (logged).
func (cs *chatSide) giveUp(ctx context.Context, it chatdb.Item, st chatdb.State, reason string, wait bool) bool {
	b := cs.b
	s, chID, _, _ := b.c.live()
	if chID == "" {
		chID = it.ChannelID
	}
	a := &wire.Packet{Type: wire.TypeChatMessageAck, ConnectorChannelID: chID,
		Error: &wire.PacketError{Code: wire.CodeChatUndeliverable, Message: reason}}
	a.Payload, _ = json.Marshal(wire.ChatAck{MessageID: it.MessageID, Status: "failed"})
	told := s != nil && s.Alive() && s.Push(a) == nil
	if !told && wait && b.c.clock.Now().Before(it.ExpiresAt.Add(cs.lim.TTL)) {
		return false // told when the data plane is back
	}
	cs.finish(ctx, it, st)
	cs.mu.Lock()
	delete(cs.requeued, it.MessageID)
	cs.mu.Unlock()
	b.log.Warn("an inbound chat message was not delivered to the inbox", "message_id", it.MessageID, "state", string(st), "reason", reason, "connector_told", told)
	return true
}

var errPermanent = errors.New("permanent")

// send hands msg to the XMPP side. A body over the messaging limit is cut
// (marked) until it fits; a refusal that no retry can change is wrapped
// in errPermanent; the rest (rate limit, unavailable, queue full, a
// peer that blocked us until it writes) is retried.
func (cs *chatSide) send(ctx context.Context, c backendkit.Chat, msg *backendkit.Message) error {
	for {
		sctx, cancel := context.WithTimeout(ctx, cs.b.o.RequestTimeout)
		err := c.Send(sctx, *msg)
		cancel()
		if !errors.Is(err, backendkit.ErrChatTooLarge) {
			if err != nil && !errors.Is(err, backendkit.ErrChatRateLimited) && !errors.Is(err, backendkit.ErrChatRefused) &&
				!errors.Is(err, backendkit.ErrChatUnavailable) && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) &&
				strings.HasPrefix(err.Error(), "messaging:") {
				return fmt.Errorf("%w: %v", errPermanent, err)
			}
			return err
		}
		if len(msg.Files) > 1 && len(msg.Body) < 1024 {
			msg.Files = msg.Files[:len(msg.Files)-1]
			msg.Body += "\n[a file was left out: too many files]"
			continue
		}
		if len(msg.Body) < 256 {
			return fmt.Errorf("%w: %v", errPermanent, err)
		}
		msg.Body = wire.Truncate(msg.Body, len(msg.Body)/2) + "\n[message truncated]"
	}
}

func (cs *chatSide) finish(ctx context.Context, it chatdb.Item, st chatdb.State) {
	if err := cs.db.Finish(ctx, it.Endpoint, it.Direction, it.MessageID, st); err != nil && !errors.Is(err, chatdb.ErrNotPending) {
		cs.b.log.Warn("recording a chat message's final state failed", "error", err)
	}
}

// inboundFile fetches a connector file (only from the connector's own
// origin, no credentials) and offers it through XEP-0363.
func (cs *chatSide) inboundFile(ctx context.Context, chID string, f wire.ChatFile) (backendkit.File, error) {
	b := cs.b
	if b.o.Uploader == nil {
		return backendkit.File{}, errNoUploader
	}
	ref, err := url.Parse(f.DownloadURL)
	if err != nil {
		return backendkit.File{}, errors.New("malformed download_url")
	}
	abs := b.c.base.ResolveReference(ref) // a relative URL resolves against the base URL (§13)
	fe := transfer.Fetcher{Allow: []string{transfer.Origin(b.c.base)}, MaxBytes: cs.lim.MaxFileBytes,
		Timeout: 4 * b.o.RequestTimeout, Transport: b.c.http.Transport}
	got, err := fe.Fetch(ctx, abs.String())
	if err != nil {
		return backendkit.File{}, err
	}
	name := f.Filename
	if name == "" || name == "file" {
		name = wire.SafeFilename(got.Name)
	}
	mt := got.MediaType
	if f.MimeType != "" {
		mt = f.MimeType
	}
	u, err := b.o.Uploader.Upload(ctx, b.o.Endpoint+"/"+chID, name, mt, got.Data)
	if err != nil {
		return backendkit.File{}, err
	}
	return backendkit.File{URL: u, Name: name, MediaType: mt, Size: int64(len(got.Data)), SHA256: got.SHA256}, nil
}

var errNoUploader = errors.New("no XEP-0363 upload service is configured")

// transient reports whether a file error may pass on retry.
func transient(err error) bool {
	switch {
	case errors.Is(err, transfer.ErrHostNotAllowed), errors.Is(err, transfer.ErrTooLarge),
		errors.Is(err, transfer.ErrRedirect), errors.Is(err, errNoUploader),
		errors.Is(err, transfer.ErrNoUploadService):
		return false
	case errors.Is(err, transfer.ErrStatus):
		return strings.Contains(err.Error(), " 5")
	}
	var he *transport.HTTPError
	if errors.As(err, &he) {
		return he.Code >= 500
	}
	return true
}

// fileReason is a short reason for the person, without URLs.
func fileReason(err error) string {
	switch {
	case errors.Is(err, transfer.ErrHostNotAllowed):
		return "its address is not on an allowed host"
	case errors.Is(err, transfer.ErrTooLarge):
		return "it is too large"
	case errors.Is(err, transfer.ErrRedirect):
		return "it redirected elsewhere"
	case errors.Is(err, errNoUploader), errors.Is(err, transfer.ErrNoUploadService):
		return "no file upload service is available"
	}
	return "it could not be fetched"
}

// deliverOutbound sends pending outbound messages to the connector. It
// reports true when something is left to retry.
func (cs *chatSide) deliverOutbound(ctx context.Context) bool {
	b := cs.b
	s, chID, _, desc := b.c.live()
	if s == nil || !s.Alive() || chID == "" || !desc.Authenticated() {
		return false
	}
	items, err := cs.db.Pending(ctx, b.o.Endpoint, chatdb.Outbound, 50)
	if err != nil {
		b.log.Warn("reading the outbound chat queue failed", "error", err)
		return true
	}
	for _, it := range items {
		if ctx.Err() != nil {
			return false
		}
		if !b.c.clock.Now().Before(it.ExpiresAt) {
			cs.finish(ctx, it, chatdb.Expired)
			b.log.Info("outbound chat message expired before the connector took it", "message_id", it.MessageID)
			continue
		}
		var rec outRecord
		if json.Unmarshal(it.Payload, &rec) != nil {
			cs.finish(ctx, it, chatdb.Failed)
			continue
		}
		m := wire.ChatMessage{MessageID: it.MessageID, ConversationID: it.Conversation, Text: rec.Text}
		if wire.ValidWireID(rec.ReplyTo) && strings.HasPrefix(rec.ReplyTo, "im_") {
			m.ReplyTo = strings.TrimPrefix(rec.ReplyTo, "im_") // the IM message the inbox answers
		}
		var notes []string
		for _, f := range rec.Files {
			cf, err := cs.outboundFile(ctx, chID, f)
			if err != nil {
				if transient(err) && it.Attempts < 3 {
					cs.db.Attempt(ctx, b.o.Endpoint, chatdb.Outbound, it.MessageID)
					b.log.Info("sending a shared file to the connector failed; will retry", "message_id", it.MessageID, "error", err)
					return true
				}
				cs.logRefusal("a shared file was not sent to the connector", "message_id", it.MessageID, "error", err)
				notes = append(notes, fmt.Sprintf("[file %q was not sent: %s]", wire.SafeFilename(f.Name), fileReason(err)))
				continue
			}
			m.Files = append(m.Files, cf)
		}
		if len(notes) > 0 {
			m.Text = strings.TrimSpace(m.Text + "\n" + strings.Join(notes, "\n"))
		}
		rctx, cancel := context.WithTimeout(ctx, b.o.RequestTimeout)
		_, err := s.Request(rctx, wire.TypeChatMessage, true, chID, m)
		cancel()
		var re *transport.RemoteError
		switch {
		case errors.As(err, &re):
			// The connector refused it for good (its code says why); a
			// resend would be refused again.
			b.log.Warn("the connector refused an outbound chat message", "message_id", it.MessageID, "code", wire.SafeCode(re.Code))
			cs.finish(ctx, it, chatdb.Failed)
			continue
		case err != nil:
			cs.db.Attempt(ctx, b.o.Endpoint, chatdb.Outbound, it.MessageID)
			b.log.Info("sending an outbound chat message failed; will resend with the same message_id", "message_id", it.MessageID, "error", err)
			return true
		}
		cs.finish(ctx, it, chatdb.Delivered)
		if h := cs.chat.Load(); h != nil && rec.Receipt && rec.TurnID != "" {
			actx, cancel := context.WithTimeout(ctx, b.o.RequestTimeout)
			if err := h.c.Ack(actx, backendkit.Ack{Endpoint: b.o.Endpoint, Resource: it.ChannelID, To: rec.From, ID: rec.TurnID}); err != nil {
				b.log.Debug("sending a delivery receipt failed", "error", err)
			}
			cancel()
		}
	}
	return false
}

// outboundFile downloads a file an XMPP user shared (only from the upload
// service's or configured origins) and uploads it to the connector.
func (cs *chatSide) outboundFile(ctx context.Context, chID string, f backendkit.File) (wire.ChatFile, error) {
	b := cs.b
	allow := append([]string(nil), b.o.DownloadOrigins...)
	if b.o.Uploader != nil {
		allow = append(allow, b.o.Uploader.Origins()...)
	}
	fe := transfer.Fetcher{Allow: allow, MaxBytes: cs.lim.MaxFileBytes, Timeout: 4 * b.o.RequestTimeout}
	got, err := fe.Fetch(ctx, f.URL)
	if err != nil {
		return wire.ChatFile{}, err
	}
	if f.SHA256 != "" && !strings.EqualFold(f.SHA256, got.SHA256) {
		return wire.ChatFile{}, errors.New("the file's hash does not match what the sender announced")
	}
	name := wire.SafeFilename(f.Name)
	if name == "file" && got.Name != "" {
		name = wire.SafeFilename(got.Name)
	}
	mt := got.MediaType
	if f.MediaType != "" && !strings.ContainsAny(f.MediaType, "\r\n\"") {
		mt = f.MediaType
	}
	up, err := b.c.control().UploadFile(ctx, chID, name, mt, got.Data)
	if err != nil {
		return wire.ChatFile{}, err
	}
	return wire.ChatFile{FileRef: up.FileRef, Filename: name, MimeType: mt, ByteSize: int64(len(got.Data)), SHA256: got.SHA256}, nil
}
