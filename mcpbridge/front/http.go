package front

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, &mcp.StreamableHTTPOptions{
		Logger:         f.log,
		SessionTimeout: o.SessionTimeout,
	})
	want := sha256.Sum256([]byte(o.Bearer))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearerMatches(r.Header.Get("Authorization"), want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentgw-mcp"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearerMatches compares digests in constant time, so neither the token's
// content nor its length leaks through timing.
func bearerMatches(header string, want [32]byte) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		token = ""
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := subtle.ConstantTimeCompare(got[:], want[:]) == 1
	return ok && match
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
	srv := &http.Server{
		Handler:           f.HTTPHandler(o),
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
