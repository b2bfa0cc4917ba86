package federation

import (
	"container/list"
	"sync"
	"time"
)

// Op is a rate-limited operation class.
type Op string

// Operation classes with separate budgets.
const (
	OpDiscovery Op = "discovery" // directory listing, search, endpoint and tool info, vCards
	OpSchema    Op = "schema"    // manifest and schema retrieval
	OpInvoke    Op = "invoke"
	OpInput     Op = "input" // provide-input, cancel, task-state and task-result
)

// Rate is a token bucket: PerSecond tokens a second up to Burst.
type Rate struct {
	PerSecond float64
	Burst     int
}

// DefaultRates are generous for people and scripts, and stop enumeration
// and floods. A remote domain as a whole gets DomainMultiplier times the
// per-JID budget, so one noisy account cannot exhaust its domain's share
// and many accounts cannot multiply it without bound.
var DefaultRates = map[Op]Rate{
	OpDiscovery: {PerSecond: 20, Burst: 100},
	OpSchema:    {PerSecond: 20, Burst: 100},
	OpInvoke:    {PerSecond: 50, Burst: 200},
	OpInput:     {PerSecond: 50, Burst: 200},
}

// DefaultDomainMultiplier scales per-JID rates to per-domain rates.
const DefaultDomainMultiplier = 5

// maxBuckets bounds the limiter's memory. The least recently used bucket
// is dropped first (a dropped bucket starts full again): a domain rotating
// JIDs keeps creating buckets, and dropping by age would flush its own
// domain bucket and every active principal's along with them.
const maxBuckets = 100000

// Limiter rate-limits requesters per bare JID and, for remote principals,
// per domain as well. Local principals are limited per JID only.
type Limiter struct {
	rates      map[Op]Rate
	multiplier float64
	isLocal    func(principal string) bool
	now        func() time.Time

	mu      sync.Mutex
	buckets map[bucketKey]*list.Element // of *bucket
	lru     *list.List                  // front: most recently used
}

type bucketKey struct {
	op  Op
	key string // "jid:" + bare or "domain:" + domain
}

type bucket struct {
	key    bucketKey
	tokens float64
	last   time.Time
}

// NewLimiter builds a limiter. Missing rates take DefaultRates; a rate with
// PerSecond < 0 disables limiting for that operation.
func NewLimiter(rates map[Op]Rate, domainMultiplier float64, isLocal func(string) bool) *Limiter {
	l := &Limiter{rates: map[Op]Rate{}, multiplier: domainMultiplier, isLocal: isLocal, now: time.Now,
		buckets: map[bucketKey]*list.Element{}, lru: list.New()}
	for op, r := range DefaultRates {
		l.rates[op] = r
	}
	for op, r := range rates {
		if r.PerSecond != 0 {
			l.rates[op] = r
		}
	}
	if l.multiplier <= 0 {
		l.multiplier = DefaultDomainMultiplier
	}
	return l
}

// Allow takes one token for principal's op and reports whether it had one.
func (l *Limiter) Allow(principal string, op Op) bool {
	r, ok := l.rates[op]
	if !ok || r.PerSecond < 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	keys := []bucketKey{{op, "jid:" + principal}}
	rates := []Rate{r}
	if l.isLocal == nil || !l.isLocal(principal) {
		keys = append(keys, bucketKey{op, "domain:" + DomainOf(principal)})
		rates = append(rates, Rate{PerSecond: r.PerSecond * l.multiplier, Burst: int(float64(r.Burst) * l.multiplier)})
	}
	// A refused request takes no token from any bucket.
	bs := make([]*bucket, len(keys))
	for i, k := range keys {
		bs[i] = l.refill(k, rates[i], now)
		if bs[i].tokens < 1 {
			return false
		}
	}
	for _, b := range bs {
		b.tokens--
	}
	return true
}

// refill returns k's bucket with the tokens earned since its last use, and
// marks it most recently used. Callers hold l.mu.
func (l *Limiter) refill(k bucketKey, r Rate, now time.Time) *bucket {
	var b *bucket
	if el, ok := l.buckets[k]; ok {
		l.lru.MoveToFront(el)
		b = el.Value.(*bucket)
	} else {
		for len(l.buckets) >= maxBuckets && l.lru.Len() > 0 {
			old := l.lru.Remove(l.lru.Back()).(*bucket)
			delete(l.buckets, old.key)
		}
		b = &bucket{key: k, tokens: float64(r.Burst), last: now}
		l.buckets[k] = l.lru.PushFront(b)
	}
	b.tokens += now.Sub(b.last).Seconds() * r.PerSecond
	if b.tokens > float64(r.Burst) {
		b.tokens = float64(r.Burst)
	}
	b.last = now
	return b
}
