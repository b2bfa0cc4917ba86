package federation

import (
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

// maxBuckets bounds the limiter's memory; the oldest buckets
// are dropped first (a dropped bucket starts full again).
const maxBuckets = 100000

// Limiter rate-limits requesters per bare JID and, for remote principals,
// per domain as well. Local principals are limited per JID only.
type Limiter struct {
	rates      map[Op]Rate
	multiplier float64
	isLocal    func(principal string) bool
	now        func() time.Time

	mu      sync.Mutex
	buckets map[bucketKey]*bucket
	lru     []bucketKey
}

type bucketKey struct {
	op  Op
	key string // "jid:" + bare or "domain:" + domain
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewLimiter builds a limiter. Missing rates take DefaultRates; a rate with
// PerSecond < 0 disables limiting for that operation.
func NewLimiter(rates map[Op]Rate, domainMultiplier float64, isLocal func(string) bool) *Limiter {
	l := &Limiter{rates: map[Op]Rate{}, multiplier: domainMultiplier, isLocal: isLocal, now: time.Now, buckets: map[bucketKey]*bucket{}}
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

// refill returns k's bucket with the tokens earned since its last use.
func (l *Limiter) refill(k bucketKey, r Rate, now time.Time) *bucket {
	b := l.buckets[k]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.evict()
		}
		b = &bucket{tokens: float64(r.Burst), last: now}
		l.buckets[k] = b
		l.lru = append(l.lru, k)
	}
	b.tokens += now.Sub(b.last).Seconds() * r.PerSecond
	if b.tokens > float64(r.Burst) {
		b.tokens = float64(r.Burst)
	}
	b.last = now
	return b
}

// evict drops the oldest tenth of the buckets. Callers hold l.mu.
func (l *Limiter) evict() {
	n := len(l.lru) / 10
	if n == 0 {
		n = 1
	}
	for _, k := range l.lru[:n] {
		delete(l.buckets, k)
	}
	l.lru = append([]bucketKey(nil), l.lru[n:]...)
}
