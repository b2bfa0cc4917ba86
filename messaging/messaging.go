// Package messaging implements the spec's Human Messaging profile on the
// XMPP side: a person's chat message to an endpoint JID becomes a
// backendkit.Turn for the endpoint's backend when it converses (and a
// short error reply when it does not), and backends speak back through the
// backendkit.Chat this package implements (XEP-0359 ids, XEP-0334 store
// hints, XEP-0461 replies, XEP-0004 question forms, XEP-0184 receipts only
// when asked, XEP-0085 chat states).
//
// A conversation is channel-owned: nothing here touches task state, and
// messages carrying task payloads or bouncing task events are left to the
// task wire. Every inbound field is untrusted data with a bound; see
// docs/messaging.md for the limits, the error replies and blocking.
package messaging

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/component"
)

// Limits bound what one conversation and the whole service may cost. Zero
// fields take the defaults below.
type Limits struct {
	// MaxBodyBytes bounds a chat body, inbound and outbound.
	MaxBodyBytes int
	// MaxFiles bounds the files shared with one message.
	MaxFiles int
	// PerSecond and Burst are the token bucket of what one peer (bare
	// JID) sends one endpoint; what the endpoint sends that peer has its
	// own bucket, ten times as large (outFactor).
	PerSecond float64
	Burst     int
	// MaxQueued bounds the turns accepted but not yet handed to backends.
	MaxQueued int
	// DedupWindow is how many recent inbound message ids are remembered
	// per service for de-duplication.
	DedupWindow int
	// MaxConversations bounds the conversations remembered (consent, chat
	// state support, rate buckets); the least recently used is forgotten.
	MaxConversations int
}

// Defaults of Limits, documented in docs/messaging.md.
const (
	DefaultMaxBodyBytes     = 16 << 10
	DefaultMaxFiles         = 8
	DefaultPerSecond        = 2
	DefaultBurst            = 10
	DefaultMaxQueued        = 256
	DefaultDedupWindow      = 4096
	DefaultMaxConversations = 10000
)

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.PerSecond <= 0 {
		l.PerSecond = DefaultPerSecond
	}
	if l.Burst <= 0 {
		l.Burst = DefaultBurst
	}
	if l.MaxQueued <= 0 {
		l.MaxQueued = DefaultMaxQueued
	}
	if l.DedupWindow <= 0 {
		l.DedupWindow = DefaultDedupWindow
	}
	if l.MaxConversations <= 0 {
		l.MaxConversations = DefaultMaxConversations
	}
	return l
}

// Options wire a Service.
type Options struct {
	// Domain is the component domain; endpoints are localpart@Domain.
	Domain jid.JID
	// Sender puts stanzas on the wire.
	Sender component.Sender
	// Resolver tells whether the addressed endpoint exists and whether
	// the sender may see it (hidden looks exactly like nonexistent).
	Resolver component.EndpointResolver
	// Backend returns the backend serving an endpoint; it converses if it
	// implements backendkit.Conversant.
	Backend func(endpoint string) (any, bool)
	// Consent reports whether bare JID to consented to messages the
	// endpoint originates without having written first (a configured
	// inbox or owner: a closed-deployment policy). nil: only peers who
	// wrote, and what a backend's backendkit.ChatConsent lists.
	Consent func(endpoint, to string) bool
	// Redact scrubs a backend's refusal text before it is shown; nil
	// leaves it (the contract says it is safe to show).
	Redact func(string) string
	Limits Limits
	Log    *slog.Logger
	// TurnTimeout bounds one Converse call; zero is 10 s.
	TurnTimeout time.Duration
}

// Service is the messaging wire. Register it on a router, run it, and
// attach ChatFor(endpoints) to each backend that originates messages.
type Service struct {
	o      Options
	lim    Limits
	log    *slog.Logger
	domain string

	shards []chan queued
	queued atomic.Int64

	mu       sync.Mutex
	convs    *lru[convKey, *conversation]
	seen     *lru[dedupKey, struct{}]
	receipts *lru[dedupKey, struct{}] // turns whose sender asked for a receipt
	sent     *lru[string, convKey]    // ids of messages we sent, to read their bounces

	bursts *burstLog

	// Stats, for tests, metrics and benchmarks.
	turns, duplicates, dropped, refused, outbound atomic.Uint64
}

// ErrChatRefused and ErrNotOwnEndpoint are what Send and Activity return
// when the recipient did not consent or bounced an earlier message
// (backendkit.ErrChatRefused), or the backend speaks for an endpoint it
// does not serve.
var ErrNotOwnEndpoint = errors.New("messaging: this backend does not serve the sending endpoint")

const shardCount = 4

type queued struct {
	c    backendkit.Conversant
	turn backendkit.Turn
	key  dedupKey
	// The inbound message, to address a refusal.
	msgID    string
	from, to jid.JID
}

// New returns a service; it panics on missing wiring (a programming error).
func New(o Options) *Service {
	if o.Sender == nil || o.Resolver == nil || o.Backend == nil || o.Domain.Domainpart() == "" {
		panic("messaging: New needs a domain, a sender, a resolver and a backend lookup")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.TurnTimeout <= 0 {
		o.TurnTimeout = 10 * time.Second
	}
	lim := o.Limits.withDefaults()
	s := &Service{
		o: o, lim: lim, log: o.Log, domain: o.Domain.Domainpart(),
		convs:    newLRU[convKey, *conversation](lim.MaxConversations),
		seen:     newLRU[dedupKey, struct{}](lim.DedupWindow),
		receipts: newLRU[dedupKey, struct{}](lim.DedupWindow),
		sent:     newLRU[string, convKey](lim.DedupWindow),
		bursts:   newBurstLog(o.Log, 10*time.Second),
	}
	per := lim.MaxQueued / shardCount
	if per < 1 {
		per = 1
	}
	for i := 0; i < shardCount; i++ {
		s.shards = append(s.shards, make(chan queued, per))
	}
	return s
}

// Register installs the message handler on r. It only looks at messages
// to endpoints of its domain; task payloads and task event bounces stay
// with the task wire's handler.
func (s *Service) Register(r *component.Router) {
	r.HandleMessage(s.handle)
	r.HandlePresence(s.presence)
}

// Run hands queued turns to backends until ctx ends: one goroutine per
// shard, so one conversation's turns keep their order.
func (s *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, sh := range s.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case q := <-sh:
					s.queued.Add(-1)
					s.deliver(ctx, q)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// Features are the disco#info features of the messaging extensions an
// endpoint advertises: all of them while its backend can converse, none
// otherwise (the spec: advertise only what works).
func (s *Service) Features(endpoint string) []string {
	if _, ok := s.conversant(endpoint); !ok {
		return nil
	}
	return []string{ns.ChatStates, ns.Receipts, ns.Hints, ns.StanzaID, ns.Reply, ns.OOB, ns.Data}
}

// conversant is the endpoint's backend if it converses right now.
func (s *Service) conversant(endpoint string) (backendkit.Conversant, bool) {
	b, ok := s.o.Backend(endpoint)
	if !ok {
		return nil, false
	}
	c, ok := b.(backendkit.Conversant)
	if !ok || !c.CanConverse(endpoint) {
		return nil, false
	}
	return c, true
}

// Stats counts what the service did.
type Stats struct {
	Turns, Duplicates, Dropped, Refused, Outbound uint64
	Queued                                        int64
}

func (s *Service) Stats() Stats {
	return Stats{
		Turns: s.turns.Load(), Duplicates: s.duplicates.Load(), Dropped: s.dropped.Load(),
		Refused: s.refused.Load(), Outbound: s.outbound.Load(), Queued: s.queued.Load(),
	}
}

func shardOf(k convKey) int {
	h := fnv.New32a()
	h.Write([]byte(k.endpoint))
	h.Write([]byte{0})
	h.Write([]byte(k.peer))
	return int(h.Sum32() % shardCount)
}

// PeerWrote records that the sender of turn wrote to its endpoint, on a
// cluster member that did not receive the message itself (a turn another
// member relayed to the one holding the endpoint's connection): replies
// to the sender are consented here, and a receipt it asked for is owed
// from here.
func (s *Service) PeerWrote(turn backendkit.Turn) {
	from, err := jid.Parse(turn.From)
	if err != nil {
		return
	}
	k := convKey{endpoint: turn.Endpoint, peer: from.Bare().String()}
	s.mu.Lock()
	c := s.conv(k)
	c.wrote, c.bounced, c.blocked = true, false, false
	if turn.ReceiptRequested && turn.ID != "" {
		s.receipts.put(dedupKey{convKey: k, id: turn.ID}, struct{}{})
	}
	s.mu.Unlock()
}
