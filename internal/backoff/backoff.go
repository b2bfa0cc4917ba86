// Package backoff is the project's one retry delay: capped exponential
// growth with full jitter. The component's reconnect loop and the caller
// side's retries on resource-constraint both use it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff yields delays: the n-th delay is uniform in
// [min, min(max, min·2ⁿ)], so a fleet of clients refused at the same moment
// does not retry in lockstep, and no delay is ever shorter than min. It is
// not safe for concurrent use; give each retry loop its own.
type Backoff struct {
	min, max time.Duration
	attempt  int
	rnd      func(n int64) int64 // uniform in [0, n); injectable for tests
}

// New returns a backoff from min up to max (max below min is raised to min).
func New(min, max time.Duration) *Backoff {
	if max < min {
		max = min
	}
	return &Backoff{min: min, max: max, rnd: rand.Int64N}
}

// ceiling is the upper bound of the next delay.
func (b *Backoff) ceiling() time.Duration {
	c := b.min
	for i := 0; i < b.attempt && c < b.max; i++ {
		c *= 2
	}
	if c > b.max || c <= 0 {
		c = b.max
	}
	return c
}

// Next returns the next delay.
func (b *Backoff) Next() time.Duration {
	c := b.ceiling()
	if c < b.max {
		b.attempt++
	}
	if c <= b.min {
		return b.min
	}
	return b.min + time.Duration(b.rnd(int64(c-b.min)+1))
}

// Reset starts over (after a stable connection, or a success).
func (b *Backoff) Reset() { b.attempt = 0 }
