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

// HTTPHandler serves the front over MCP streamable HTTP. When bearer is
// not empty, every request must carry "Authorization: Bearer <bearer>";
// others get 401 before the MCP layer sees them. Every session acts as
// the one XMPP account, so the token is the only thing between a local
// process and that account's agents.
func (f *Front) HTTPHandler(bearer string) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, &mcp.StreamableHTTPOptions{
		Logger: f.log,
	})
	if bearer == "" {
		return h
	}
	want := sha256.Sum256([]byte(bearer))
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
func (f *Front) RunHTTP(ctx context.Context, ln net.Listener, bearer string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.initial(ctx)
	go f.poll(ctx)
	srv := &http.Server{
		Handler:           f.HTTPHandler(bearer),
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
