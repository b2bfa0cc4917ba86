package a2afront

import (
	"context"
	"net"
	"net/http"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/catalog"
	"github.com/agentgw/agentgw/internal/oauthrs"
)

// UsersOptions configure a front that serves many users as themselves.
type UsersOptions struct {
	// Gate verifies each request's access token and names its principal.
	// Required.
	Gate *oauthrs.Gate
	// MaxUsers bounds the principals served at once (default 1000); one
	// more is answered 503.
	MaxUsers int
}

// Users is `agentgw a2a` as an OAuth 2.1 resource server for many users:
// every request needs an access token the gate accepts and is served by a
// Front of its principal's own, whose every XMPP request names that
// principal (catalog.As, urn:agentgw:principal:0). So each user gets the
// cards of the agents their own JID may see and holds their own tasks
// (tasks/get, tasks/cancel and ListTasks of another user's task find
// nothing: the gateway checks ownership against the principal). The
// front's XMPP account must be listed in the gateway's [policy]
// trusted_fronts.
type Users struct {
	c    Client
	opts Options
	uo   UsersOptions
}

// NewUsers makes the many-user front over c, the trusted account's client;
// opts are each user's Front options (its cards declare the gate's issuer).
func NewUsers(c Client, opts Options, uo UsersOptions) (*Users, error) {
	if uo.Gate == nil {
		panic("a2afront: NewUsers without a gate")
	}
	if uo.MaxUsers <= 0 {
		uo.MaxUsers = 1000
	}
	if opts.OAuth == nil {
		opts.OAuth = &OAuthScheme{Issuer: uo.Gate.Issuer, Scopes: uo.Gate.AllScopes()}
	}
	// The options are checked once, here.
	if _, err := New(c, opts); err != nil {
		return nil, err
	}
	return &Users{c: c, opts: opts, uo: uo}, nil
}

// Handler serves the metadata and the users' A2A requests, each by its
// principal's own Front (made on the first request); ctx bounds the users'
// Fronts.
func (u *Users) Handler(ctx context.Context) http.Handler {
	h := oauthrs.PerPrincipal(ctx, u.uo.MaxUsers, func(ctx context.Context, p jid.JID) (http.Handler, error) {
		opts := u.opts
		if opts.Logger != nil {
			opts.Logger = opts.Logger.With("principal", p.String())
		}
		f, err := New(catalog.As(u.c, p), opts)
		if err != nil {
			return nil, err
		}
		h := f.routes()
		if err := f.start(ctx); err != nil {
			if opts.Logger != nil {
				opts.Logger.Warn("a user's A2A front could not start", "error", err)
			}
			return nil, err
		}
		return h, nil
	})
	if u.uo.Gate.HasOpScopes() {
		max := u.opts.MaxRequestBytes
		if max <= 0 {
			max = 1 << 20
		}
		h = scoped(u.uo.Gate, max, h)
	}
	return u.uo.Gate.Wrap(h)
}

// Serve runs the users' front on ln until ctx is done.
func (u *Users) Serve(ctx context.Context, ln net.Listener) error {
	return serveHTTP(ctx, ln, u.Handler(ctx))
}
