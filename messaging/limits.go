package messaging

import (
	"container/list"
	"log/slog"
	"sync"
	"time"

	"github.com/agentgw/agentgw/backendkit"
)

// convKey is one conversation: an endpoint (bare) and a peer (bare).
type convKey struct{ endpoint, peer string }

// dedupKey is one inbound message: the conversation and the sender's id.
type dedupKey struct {
	convKey
	id string
}

// conversation is what the service remembers of one peer and endpoint.
// It lives in memory only: after a restart a peer is a stranger again
// until it writes (docs/messaging.md).
type conversation struct {
	wrote      bool // the peer wrote: replies are consented
	chatStates bool // the peer sent XEP-0085 states: standalone states may follow
	// bounced is set when our message to the peer came back as blocked
	// or unavailable; nothing more is sent until the peer writes again.
	bounced bool
	// blocked is set when a bounce said <blocked/>: only the peer's own
	// message lifts it, not its presence.
	blocked bool
	in, out bucket
	// dropping is set while inbound messages are being rate-dropped, so
	// the peer is told once per burst.
	dropping bool
	// lastState is the chat state last sent, so repeats are not resent.
	lastState backendkit.ChatState
}

// bucket is a token bucket (the rate of one direction of a conversation).
type bucket struct {
	tokens float64
	last   time.Time
	init   bool
}

func (b *bucket) allow(now time.Time, perSecond float64, burst int) bool {
	if !b.init {
		b.tokens, b.last, b.init = float64(burst), now, true
	}
	b.tokens += now.Sub(b.last).Seconds() * perSecond
	if b.tokens > float64(burst) {
		b.tokens = float64(burst)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// lru is a bounded map that forgets its least recently used entry. Not
// safe for concurrent use (the service holds its lock).
type lru[K comparable, V any] struct {
	max   int
	order *list.List // front: most recent; values are K
	items map[K]*list.Element
	vals  map[K]V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: map[K]*list.Element{}, vals: map[K]V{}}
}

func (l *lru[K, V]) get(k K) (V, bool) {
	e, ok := l.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	l.order.MoveToFront(e)
	return l.vals[k], true
}

func (l *lru[K, V]) put(k K, v V) {
	if e, ok := l.items[k]; ok {
		l.order.MoveToFront(e)
		l.vals[k] = v
		return
	}
	l.items[k] = l.order.PushFront(k)
	l.vals[k] = v
	for l.order.Len() > l.max {
		old := l.order.Back()
		ok := old.Value.(K)
		l.order.Remove(old)
		delete(l.items, ok)
		delete(l.vals, ok)
	}
}

func (l *lru[K, V]) remove(k K) bool {
	e, ok := l.items[k]
	if !ok {
		return false
	}
	l.order.Remove(e)
	delete(l.items, k)
	delete(l.vals, k)
	return true
}

func (l *lru[K, V]) len() int { return l.order.Len() }

// burstLog logs a drop reason once per window: the first occurrence at
// once, the rest counted and summed up in the next line, so a flood costs
// one log line per window and never one per stanza.
type burstLog struct {
	log    *slog.Logger
	window time.Duration
	mu     sync.Mutex
	state  map[string]*burstState
}

type burstState struct {
	since      time.Time
	suppressed int
}

func newBurstLog(log *slog.Logger, window time.Duration) *burstLog {
	return &burstLog{log: log, window: window, state: map[string]*burstState{}}
}

// drop records one drop; it reports whether this one was logged.
func (b *burstLog) drop(now time.Time, reason string, attrs ...any) bool {
	b.mu.Lock()
	st := b.state[reason]
	if st != nil && now.Sub(st.since) < b.window {
		st.suppressed++
		b.mu.Unlock()
		return false
	}
	prev := 0
	if st != nil {
		prev = st.suppressed
	}
	if len(b.state) > 64 { // reasons are a fixed set; stay bounded anyway
		b.state = map[string]*burstState{}
	}
	b.state[reason] = &burstState{since: now}
	b.mu.Unlock()
	args := append([]any{"reason", reason, "suppressed_since_last", prev}, attrs...)
	b.log.Warn("chat message dropped (logged once per burst)", args...)
	return true
}
