package mcpfront

import (
	"context"
	"log/slog"
	"net"
	"net/http"
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
	return &Users{c: c, opts: opts, uo: uo}
}

// Handler serves the metadata and the users' MCP requests, each in its
// principal's own Front (made on the first request, its first discovery
// run before that request is served); ctx bounds the users' Fronts (their
// discovery polls).
func (u *Users) Handler(ctx context.Context) http.Handler {
	h := oauthrs.PerPrincipal(ctx, u.uo.MaxUsers, func(ctx context.Context, p jid.JID) (http.Handler, error) {
		opts := u.opts
		opts.Logger = opts.Logger.With("principal", p.String())
		f := New(catalog.As(u.c, p), opts)
		h := f.mcpHTTP(u.uo.SessionTimeout)
		f.initial(ctx)
		go f.poll(ctx)
		return h, nil
	})
	if u.uo.Gate.HasOpScopes() {
		// The operation is known once the JSON-RPC body is read.
		h = scoped(u.uo.Gate, h)
	}
	return u.uo.Gate.Wrap(h)
}

// RunHTTP serves the users on ln until ctx is done.
func (u *Users) RunHTTP(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return serveHTTP(ctx, ln, u.Handler(ctx))
}
