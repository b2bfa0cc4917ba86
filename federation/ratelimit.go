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

// DefaultRates are the per-JID budgets of remote principals: generous for
// people and scripts, and they stop enumeration and floods. A remote domain
// as a whole gets DomainMultiplier times the per-JID budget, so one noisy
// account cannot exhaust its domain's share and many accounts cannot
// multiply it without bound.
var DefaultRates = map[Op]Rate{
	OpDiscovery: {PerSecond: 20, Burst: 100},
	OpSchema:    {PerSecond: 20, Burst: 100},
	OpInvoke:    {PerSecond: 50, Burst: 200},
	OpInput:     {PerSecond: 50, Burst: 200},
}

// DefaultLocalRates are the per-JID budgets of local principals, sized for
// service accounts: `agentgw mcp` logs in as one JID for a whole MCP host,
// and a client recovering after a restart sends a task-state and a
// task-result for each of its tasks (2,500 tasks fit in the input burst).
var DefaultLocalRates = map[Op]Rate{
	OpDiscovery: {PerSecond: 200, Burst: 2000},
	OpSchema:    {PerSecond: 200, Burst: 2000},
	OpInvoke:    {PerSecond: 200, Burst: 2000},
	OpInput:     {PerSecond: 500, Burst: 5000},
}

// DefaultDomainMultiplier scales per-JID rates to per-domain rates.
const DefaultDomainMultiplier = 5

// maxBuckets bounds the limiter's memory. The least recently used bucket
// is dropped first (a dropped bucket starts full again): a domain rotating
// JIDs keeps creating buckets, and dropping by age would flush its own
// domain bucket and every active principal's along with them.
const maxBuckets = 100000

// Limiter rate-limits requesters per bare JID and, for remote principals,
// per domain as well. Local principals are limited per JID only, with
// budgets of their own.
type Limiter struct {
	rates      map[Op]Rate // remote principals
	localRates map[Op]Rate
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

// NewLimiter builds a limiter with per-JID rates for remote and for local
// principals. Missing rates, and zero PerSecond or Burst fields, take
// DefaultRates and DefaultLocalRates field by field (so a config that sets
// only a burst keeps the default rate); a rate with PerSecond < 0 disables
// limiting for that operation. A nil isLocal treats every principal as
// remote.
func NewLimiter(remote, local map[Op]Rate, domainMultiplier float64, isLocal func(string) bool) *Limiter {
	l := &Limiter{rates: withDefaults(remote, DefaultRates), localRates: withDefaults(local, DefaultLocalRates),
		multiplier: domainMultiplier, isLocal: isLocal, now: time.Now,
		buckets: map[bucketKey]*list.Element{}, lru: list.New()}
	if l.multiplier <= 0 {
		l.multiplier = DefaultDomainMultiplier
	}
	return l
}

func withDefaults(rates, defaults map[Op]Rate) map[Op]Rate {
	out := map[Op]Rate{}
	for op, r := range defaults {
		out[op] = r
	}
	for op, r := range rates {
		d := out[op]
		if r.PerSecond != 0 {
			d.PerSecond = r.PerSecond
		}
		if r.Burst > 0 {
			d.Burst = r.Burst
		}
		out[op] = d
	}
	return out
}

// Allow takes one token for principal's op and reports whether it had one.
func (l *Limiter) Allow(principal string, op Op) bool {
	local := l.isLocal != nil && l.isLocal(principal)
	rates := l.rates
	if local {
		rates = l.localRates
	}
	r, ok := rates[op]
	if !ok || r.PerSecond < 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	keys := []bucketKey{{op, "jid:" + principal}}
	budgets := []Rate{r}
	if !local {
		keys = append(keys, bucketKey{op, "domain:" + DomainOf(principal)})
		budgets = append(budgets, Rate{PerSecond: r.PerSecond * l.multiplier, Burst: int(float64(r.Burst) * l.multiplier)})
	}
	// A refused request takes no token from any bucket.
	bs := make([]*bucket, len(keys))
	for i, k := range keys {
		bs[i] = l.refill(k, budgets[i], now)
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
