package component

import (
	"math/rand/v2"
	"time"
)

// backoff yields reconnect delays: capped exponential with full jitter. The
// n-th delay is uniform in [min, min(max, min·2ⁿ)], so a fleet of gateways
// that lost the same server does not reconnect in lockstep, and no delay is
// ever shorter than min.
type backoff struct {
	min, max time.Duration
	attempt  int
	rnd      func(n int64) int64 // uniform in [0, n); injectable for tests
}

func newBackoff(min, max time.Duration) *backoff {
	return &backoff{min: min, max: max, rnd: rand.Int64N}
}

// ceiling is the upper bound of the next delay.
func (b *backoff) ceiling() time.Duration {
	c := b.min
	for i := 0; i < b.attempt && c < b.max; i++ {
		c *= 2
	}
	if c > b.max || c <= 0 {
		c = b.max
	}
	return c
}

func (b *backoff) next() time.Duration {
	c := b.ceiling()
	if c < b.max {
		b.attempt++
	}
	if c <= b.min {
		return b.min
	}
	return b.min + time.Duration(b.rnd(int64(c-b.min)+1))
}

// reset starts over after a stable connection.
func (b *backoff) reset() { b.attempt = 0 }
