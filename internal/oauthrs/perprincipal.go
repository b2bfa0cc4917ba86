package oauthrs

import (
	"context"
	"net/http"
	"sync"

	"mellium.im/xmpp/jid"
)

// PerPrincipal serves each principal a Gate admitted (it must run behind
// Gate.Wrap, which names the principal) with a handler of its own, made on the principal's first request (once, even when requests
// race) and kept until ctx ends. At most max principals are served at
// once; one more is answered 503. A handler that could not be made is
// answered 500, without the error (it is the make function's to log).
// The fronts use it so one user's sessions, tasks and tool lists are
// never reachable with another user's token.
func PerPrincipal(ctx context.Context, max int, make func(ctx context.Context, p jid.JID) (http.Handler, error)) http.Handler {
	pp := &perPrincipal{ctx: ctx, max: max, make: make, m: map[string]*principalHandler{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := PrincipalOf(r.Context())
		ph := pp.get(p)
		switch {
		case ph == nil:
			http.Error(w, "too many users at once", http.StatusServiceUnavailable)
		case ph.err != nil:
			http.Error(w, "the front could not start", http.StatusInternalServerError)
		default:
			ph.h.ServeHTTP(w, r)
		}
	})
}

type perPrincipal struct {
	ctx  context.Context
	max  int
	make func(ctx context.Context, p jid.JID) (http.Handler, error)

	mu sync.Mutex
	m  map[string]*principalHandler
}

type principalHandler struct {
	once sync.Once
	h    http.Handler
	err  error
}

func (pp *perPrincipal) get(p jid.JID) *principalHandler {
	key := p.Bare().String()
	pp.mu.Lock()
	ph := pp.m[key]
	if ph == nil {
		if len(pp.m) >= pp.max {
			pp.mu.Unlock()
			return nil
		}
		ph = &principalHandler{}
		pp.m[key] = ph
	}
	pp.mu.Unlock()
	ph.once.Do(func() { ph.h, ph.err = pp.make(pp.ctx, p.Bare()) })
	return ph
}
