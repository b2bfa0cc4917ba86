package front

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/a2asrv"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/internal/httpauth"
)

// ErrNoBearer is returned when no bearer token is configured.
var ErrNoBearer = errors.New("a2a front: a bearer token is required")

// Handler serves the front:
//
//	GET  /agents                                    the cards of every visible agent
//	GET  /agents/{jid}/.well-known/agent-card.json  one agent's card
//	POST /agents/{jid}                              its A2A JSON-RPC interface
//
// Every request must carry the bearer token: the front acts as one XMPP
// account. Bodies are bounded by Options.MaxRequestBytes.
func (f *Front) Handler(bearer string) (http.Handler, error) {
	if bearer == "" {
		return nil, ErrNoBearer
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /agents", func(w http.ResponseWriter, r *http.Request) {
		cards, err := f.Agents(r.Context())
		if err != nil {
			http.Error(w, "agent discovery failed", http.StatusBadGateway)
			return
		}
		writeJSON(w, map[string]any{"agents": cards})
	})
	mux.HandleFunc("GET /agents/{jid}/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		bare, ok := agentJID(r)
		if !ok {
			http.NotFound(w, r)
			return
		}
		a, err := f.lookup(r.Context(), bare)
		if err != nil {
			// Hidden and nonexistent agents look the same.
			http.NotFound(w, r)
			return
		}
		writeJSON(w, a.card)
	})
	mux.HandleFunc("POST /agents/{jid}", func(w http.ResponseWriter, r *http.Request) {
		bare, ok := agentJID(r)
		if !ok {
			http.NotFound(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, f.opts.MaxRequestBytes)
		a2asrv.NewJSONRPCHandler(handler{f: f, bare: bare}).ServeHTTP(w, r)
	})
	return httpauth.Bearer(bearer, "agentgw-a2a", mux), nil
}

// agentJID is the bare JID in the path, or false when it is not one.
func agentJID(r *http.Request) (string, bool) {
	j, err := jid.Parse(r.PathValue("jid"))
	if err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
		return "", false
	}
	return j.String(), true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Serve runs the front on ln until ctx is done.
func (f *Front) Serve(ctx context.Context, ln net.Listener, bearer string) error {
	h, err := f.Handler(bearer)
	if err != nil {
		return err
	}
	go func() {
		if err := f.Refresh(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("initial agent discovery incomplete", "error", err)
		}
	}()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
