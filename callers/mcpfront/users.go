package mcpfront

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/catalog"
	"github.com/agentgw/agentgw/internal/oauthrs"
)

// UsersOptions configure a front that serves many users as themselves.
type UsersOptions struct {
	// Gate verifies each request's access token and names its principal.
	// Required.
	Gate *oauthrs.Gate
	// SessionTimeout closes an MCP session idle this long (default
	// DefaultSessionTimeout).
	SessionTimeout time.Duration
	// MaxUsers bounds the principals served at once (default 1000); one
	// more is answered 503.
	MaxUsers int
}

// Users is the HTTP front as an OAuth 2.1 resource server for many users:
// every request needs an access token the gate accepts, and runs in a
// Front of its principal's own, whose every XMPP request names that
// principal (catalog.As, urn:agentgw:principal:0). So each user sees the
// tools their own JID may see and holds their own tasks; MCP sessions and
// task ids of one user are unknown to another's Front, and the gateway
// checks task ownership against the principal anyway. The front's XMPP
// account must be listed in the gateway's [policy] trusted_fronts.
type Users struct {
	c    Client
	opts Options
	uo   UsersOptions

	mu     sync.Mutex
	ctx    context.Context
	fronts map[string]*userFront
}

type userFront struct {
	once sync.Once
	f    *Front
	h    http.Handler
}

// NewUsers makes the many-user front over c, the trusted account's client;
// opts are each user's Front options.
func NewUsers(c Client, opts Options, uo UsersOptions) *Users {
	if uo.Gate == nil {
		panic("mcpfront: NewUsers without a gate")
	}
	if uo.MaxUsers <= 0 {
		uo.MaxUsers = 1000
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Users{c: c, opts: opts, uo: uo, fronts: map[string]*userFront{}}
}

// Handler serves the metadata and the users' MCP requests; ctx bounds the
// users' Fronts (their discovery polls).
func (u *Users) Handler(ctx context.Context) http.Handler {
	u.mu.Lock()
	u.ctx = ctx
	u.mu.Unlock()
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := oauthrs.PrincipalOf(r.Context())
		uf := u.front(p)
		if uf == nil {
			http.Error(w, "too many users at once", http.StatusServiceUnavailable)
			return
		}
		uf.h.ServeHTTP(w, r)
	})
	if u.uo.Gate.HasOpScopes() {
		// The operation is known once the JSON-RPC body is read.
		h = scoped(u.uo.Gate, h)
	}
	return u.uo.Gate.Wrap(h)
}

// front returns (making and starting it once) p's Front: its first
// discovery runs before its first request is served.
func (u *Users) front(p jid.JID) *userFront {
	key := p.Bare().String()
	u.mu.Lock()
	uf := u.fronts[key]
	if uf == nil {
		if len(u.fronts) >= u.uo.MaxUsers {
			u.mu.Unlock()
			return nil
		}
		uf = &userFront{}
		u.fronts[key] = uf
	}
	ctx := u.ctx
	u.mu.Unlock()
	uf.once.Do(func() {
		opts := u.opts
		opts.Logger = opts.Logger.With("principal", key)
		uf.f = New(catalog.As(u.c, p), opts)
		uf.h = uf.f.mcpHTTP(u.uo.SessionTimeout)
		uf.f.initial(ctx)
		go uf.f.poll(ctx)
	})
	return uf
}

// RunHTTP serves the users on ln until ctx is done.
func (u *Users) RunHTTP(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return serveHTTP(ctx, ln, u.Handler(ctx))
}
