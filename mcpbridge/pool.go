package mcpbridge

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Sessions for calls. An MCP server before 2026-07-28 sends elicitation/create
// without anything tying it to the tools/call that caused it, so the bridge
// can attribute it with certainty only when the session has exactly one
// call in flight and no call it gave up on (cancelled, past its deadline)
// that the server may still be running. Every call therefore runs alone on
// a session: the supervised session (the one that publishes the manifest
// and is health-checked) when it is free, or one of up to MaxSessions-1
// further sessions, connected lazily (a stdio server is spawned once more;
// an HTTP server gets one more MCP session). A call that gives up on its
// request retires the session: a further one is closed at once, the
// supervised one serves the manifest and health checks but no calls until
// the server answers the abandoned request. When every session is busy a
// call waits for one, bounded by its deadline and its cancellation.
//
// A server that speaks MCP 2026-07-28 asks for input inside the tools/call
// (multi round-trip) and may not send elicitation/create while serving a
// request: the SDK fulfils its questions within the call, with the call's
// context, so attribution is certain on one shared session and no pool is
// needed. Its calls share the supervised session.

// DefaultMaxSessions is the number of sessions for calls when
// Options.MaxSessions is 0.
const DefaultMaxSessions = 4

// extraIdle is how long a further session may stay idle before it is
// closed.
const extraIdle = 2 * time.Minute

// errNoSession: the supervised session is down.
var errNoSession = errors.New("the MCP server is not available")

// multiRoundTrip reports whether the session speaks MCP 2026-07-28 or
// later, where input requests travel inside the call.
func (s *session) multiRoundTrip() bool {
	return s.state.protocolVersion >= "2026-07-28"
}

// usable reports whether a session may take a call now: it is alive and
// no request the bridge gave up on is still unanswered there.
func (s *session) usable() bool {
	return !s.ended() && s.tap.unanswered() == 0
}

// acquire returns a session with no call in flight, reserved for one call
// until release (shared is false), or the shared session of a
// multi-round-trip server (shared is true: nothing to release). It waits
// while every session is busy, until ctx ends.
func (b *Backend) acquire(ctx context.Context) (s *session, shared bool, err error) {
	for {
		b.mu.Lock()
		prim := b.cur
		if prim == nil || prim.ended() {
			b.mu.Unlock()
			return nil, false, errNoSession
		}
		if prim.multiRoundTrip() {
			b.mu.Unlock()
			return prim, true, nil
		}
		if !prim.busy && prim.usable() {
			prim.busy = true
			b.mu.Unlock()
			return prim, false, nil
		}
		n := b.connecting
		if prim.usable() {
			n++
		}
		for _, x := range b.extras {
			if x.ended() {
				continue
			}
			if !x.busy && x.usable() {
				x.busy = true
				if x.idle != nil {
					x.idle.Stop()
					x.idle = nil
				}
				b.mu.Unlock()
				return x, false, nil
			}
			n++
		}
		if n < b.maxSessions {
			b.connecting++
			gen := b.gen
			b.mu.Unlock()
			s, err := b.connectExtra(ctx, gen)
			return s, false, err
		}
		changed := b.poolChanged
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-changed:
		case <-prim.done:
		case <-time.After(time.Second):
			// The supervised session becomes usable again when the
			// server answers an abandoned request late; nothing
			// signals that.
		}
	}
}

// connectExtra connects one further session for a call; the caller holds
// a reservation (b.connecting).
func (b *Backend) connectExtra(ctx context.Context, gen uint64) (*session, error) {
	// The session outlives the call that opens it, and the SDK hands the
	// values of the connect context to every request the server sends on
	// it: connect with a context of its own, which carries no call, and
	// give up only if the waiting call goes away meanwhile.
	cctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	s, err := b.connect(cctx)
	stop()
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.connecting--
	b.signalPool()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.log.Warn("connecting a further MCP session failed", slog.String("error", err.Error()))
		return nil, errNoSession
	}
	if gen != b.gen || b.cur == nil {
		// The supervised session ended meanwhile.
		go s.close()
		return nil, errNoSession
	}
	s.extra, s.busy, s.gen = true, true, gen
	b.extras = append(b.extras, s)
	b.log.Debug("connected a further MCP session", slog.Int("extras", len(b.extras)))
	return s, nil
}

// release returns a session after its call. A further session is closed if
// its call was abandoned (the server may still be running it), if it ended,
// or if the supervised session it belongs with is gone.
func (b *Backend) release(s *session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s.busy = false
	b.signalPool()
	if !s.extra {
		return
	}
	if s.usable() && s.gen == b.gen && b.cur != nil {
		s.idle = time.AfterFunc(extraIdle, func() { b.closeIdle(s) })
		return
	}
	b.dropExtra(s)
}

func (b *Backend) closeIdle(s *session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !s.busy {
		b.dropExtra(s)
	}
}

// dropExtra removes a further session and closes it; b.mu is held.
func (b *Backend) dropExtra(s *session) {
	if i := indexOf(b.extras, s); i >= 0 {
		b.extras = append(b.extras[:i], b.extras[i+1:]...)
		go s.close()
	}
}

// closeExtras closes every further session, ending their calls (as the
// supervised session's end ends its own): the server went away or the
// gateway stops.
func (b *Backend) closeExtras() {
	b.mu.Lock()
	xs := b.extras
	b.extras = nil
	b.signalPool()
	b.mu.Unlock()
	for _, x := range xs {
		x.close()
	}
}

// signalPool wakes the calls waiting for a session; b.mu is held.
func (b *Backend) signalPool() {
	close(b.poolChanged)
	b.poolChanged = make(chan struct{})
}

func indexOf(xs []*session, s *session) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}
