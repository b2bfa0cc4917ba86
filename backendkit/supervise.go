package backendkit

import (
	"context"
	"time"

	"github.com/agentgw/agentgw/internal/backoff"
)

// Supervisor restarts a backend's session until its context ends, waiting
// between attempts by the project's one backoff (internal/backoff: capped
// exponential growth with full jitter). Zero fields take the defaults.
type Supervisor struct {
	Min, Max time.Duration // default 1s and 60s
	// StableAfter is how long a session must have been up for the next
	// restart to start again from Min. Zero: any session that came up.
	StableAfter time.Duration
	// Sleep waits d, or less when ctx ends (then it reports false). Nil
	// uses a real timer; tests and bridges with an injected clock set it.
	Sleep func(ctx context.Context, d time.Duration) bool
}

// Backoff returns the Supervisor's backoff, for a bridge whose loop
// cannot be written as Run's (the defaults applied).
func (s Supervisor) Backoff() *backoff.Backoff {
	s.defaults()
	return backoff.New(s.Min, s.Max)
}

func (s *Supervisor) defaults() {
	if s.Min <= 0 {
		s.Min = time.Second
	}
	if s.Max < s.Min {
		s.Max = max(60*time.Second, s.Min)
	}
	if s.Sleep == nil {
		s.Sleep = Sleep
	}
}

// Run calls session until ctx ends. session runs one session to its end
// and returns how long it was up (0 when it never came up) and, when it
// did not come up, why. Before each wait, onRetry (nil: none) hears the
// error (nil after a session that was up and ended) and the wait. Run
// returns once ctx is done.
func (s Supervisor) Run(ctx context.Context, session func(ctx context.Context) (up time.Duration, err error), onRetry func(err error, wait time.Duration)) {
	s.defaults()
	bo := backoff.New(s.Min, s.Max)
	for {
		up, err := session(ctx)
		if ctx.Err() != nil {
			return
		}
		if up > 0 && up >= s.StableAfter {
			bo.Reset()
		}
		wait := bo.Next()
		if onRetry != nil {
			onRetry(err, wait)
		}
		if !s.Sleep(ctx, wait) {
			return
		}
	}
}

// Sleep waits d on a real timer; it reports false when ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
