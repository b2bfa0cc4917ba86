package mcpfront

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/internal/httpauth"
)

// HTTPOptions configure the streamable HTTP front.
type HTTPOptions struct {
	// Bearer is the token every request must carry as "Authorization:
	// Bearer <token>". Required: on loopback too, any local process (another
	// user's, a browser page doing DNS rebinding) could otherwise act as
	// the XMPP account.
	Bearer string
	// SessionTimeout closes an MCP session idle this long (no request in
	// flight). Default DefaultSessionTimeout.
	SessionTimeout time.Duration
}

// DefaultSessionTimeout is how long an idle HTTP MCP session lives.
const DefaultSessionTimeout = 30 * time.Minute

// ErrNoBearer is returned by RunHTTP when no bearer token is configured.
var ErrNoBearer = errors.New("front: the HTTP front needs a bearer token")

// HTTPHandler serves the front over MCP streamable HTTP. Every request must
// carry the bearer token; others get 401 before the MCP layer sees them.
// Every session acts as the one XMPP account, so the token is the only
// thing between a local process and that account's agents. An empty
// token is a programming error and panics.
func (f *Front) HTTPHandler(o HTTPOptions) http.Handler {
	if o.Bearer == "" {
		panic(ErrNoBearer)
	}
	return httpauth.Bearer(o.Bearer, "agentgw-mcp", f.mcpHTTP(o.SessionTimeout))
}

// mcpHTTP is the MCP streamable HTTP handler, without authentication.
func (f *Front) mcpHTTP(sessionTimeout time.Duration) http.Handler {
	o := HTTPOptions{SessionTimeout: sessionTimeout}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, &mcp.StreamableHTTPOptions{
		Logger:         f.log,
		SessionTimeout: o.SessionTimeout,
	})
	// MCP 2026-07-28 is stateless (SEP-2575): the SDK serves it only from
	// a stateless handler, and older revisions (sessions, server-to-client
	// elicitation) only from a stateful one; the protocol header picks.
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, &mcp.StreamableHTTPOptions{
		Logger:    f.log,
		Stateless: true,
	})
	both := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("MCP-Protocol-Version") >= protocolMRTR {
			stateless.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	return liftTaskHTTP(both)
}

// RunHTTP discovers tools, keeps them fresh, and serves streamable HTTP on
// ln until ctx is done.
func (f *Front) RunHTTP(ctx context.Context, ln net.Listener, o HTTPOptions) error {
	if o.Bearer == "" {
		return ErrNoBearer
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.initial(ctx)
	go f.poll(ctx)
	return serveHTTP(ctx, ln, f.HTTPHandler(o))
}

// serveHTTP serves h on ln until ctx is done.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return ctx.Err()
	}
}
