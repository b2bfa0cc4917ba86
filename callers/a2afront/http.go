package a2afront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/internal/httpauth"
)

// ErrNoBearer is returned when no bearer token is configured.
var ErrNoBearer = errors.New("a2a front: a bearer token is required")

// Handler serves the front:
//
//	GET  /agents                                    the cards of every visible agent
//	GET  /jwks.json                                 the public key the cards are signed with
//	GET  /agents/{jid}/.well-known/agent-card.json  one agent's card
//	POST /agents/{jid}                              its A2A JSON-RPC interface (0.3 and 1.0)
//	     /agents/{jid}/rest/...                     its A2A HTTP+JSON interface (1.0 and 0.3)
//
// The version is the request's A2A-Version header (or query parameter):
// empty or 0.3 is A2A 0.3, 1.0 is A2A 1.0, anything else is answered
// VersionNotSupportedError (A2A 1.0 §3.6). Every request must carry the
// bearer token: the front acts as one XMPP account. Bodies are bounded by
// Options.MaxRequestBytes.
func (f *Front) Handler(bearer string) (http.Handler, error) {
	if bearer == "" {
		return nil, ErrNoBearer
	}
	return httpauth.Bearer(bearer, "agentgw-a2a", f.routes()), nil
}

// routes is the front's HTTP handler, without authentication.
func (f *Front) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /agents", func(w http.ResponseWriter, r *http.Request) {
		cards, err := f.Agents(r.Context())
		if err != nil {
			http.Error(w, "agent discovery failed", http.StatusBadGateway)
			return
		}
		writeJSON(w, map[string]any{"agents": cards})
	})
	mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, r *http.Request) {
		if f.opts.CardSigner == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(f.opts.CardSigner.JWKS())
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
		// One URL, two shapes: the 1.0 card to a 1.0 client, the 0.3 card
		// with the 1.0 fields beside it to everyone else.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("Vary", "A2A-Version")
		if requestVersion(r) == version10 && len(a.card10) > 0 {
			_, _ = w.Write(a.card10)
			return
		}
		_, _ = w.Write(a.cardJSON)
	})
	mux.HandleFunc("POST /agents/{jid}", func(w http.ResponseWriter, r *http.Request) {
		bare, ok := agentJID(r)
		if !ok {
			http.NotFound(w, r)
			return
		}
		switch requestVersion(r) {
		case version03:
		case version10:
			f.serveJSONRPC10(w, r, bare)
			return
		default:
			rpcError(w, nil, codeVersionNotSupported, "version not supported: this agent speaks A2A 0.3 and 1.0 (A2A-Version header)")
			return
		}
		body, method, ok := f.screen(w, r)
		if !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		// Every JSON-RPC response is application/json (A2A 0.3 §3.2.1);
		// the SDK sets no type and Go would sniff text/plain. A stream's
		// SSE writer replaces it with text/event-stream.
		w.Header().Set("Content-Type", "application/json")
		if method == "message/stream" || method == "tasks/resubscribe" {
			ds := &deferredStream{ResponseWriter: w}
			a2asrv.NewJSONRPCHandler(handler{f: f, bare: bare}).ServeHTTP(ds, r)
			ds.decide()
			return
		}
		a2asrv.NewJSONRPCHandler(handler{f: f, bare: bare}).ServeHTTP(w, r)
	})
	mux.HandleFunc("/agents/{jid}/rest/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		bare, ok := agentJID(r)
		if !ok {
			http.NotFound(w, r)
			return
		}
		f.serveREST(w, r, bare)
	})
	return mux
}

// screen reads the bounded body and rejects what the SDK would answer
// with an error quoting the input (its parse errors name unknown part
// kinds and fields verbatim): the front never reflects a payload.
func (f *Front) screen(w http.ResponseWriter, r *http.Request) ([]byte, string, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, f.opts.MaxRequestBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		rpcError(w, nil, -32600, fmt.Sprintf("invalid request: larger than %d bytes", f.opts.MaxRequestBytes))
		return nil, "", false
	case err != nil:
		rpcError(w, nil, -32700, "parse error: the body could not be read")
		return nil, "", false
	}
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil {
		rpcError(w, nil, -32700, "parse error: the body is not a JSON-RPC request object")
		return nil, "", false
	}
	var id any
	if json.Unmarshal(req.ID, &id) != nil {
		id = nil
	}
	if s, ok := id.(string); ok && len(s) > 128 {
		rpcError(w, nil, -32600, "invalid request: id longer than 128 bytes")
		return nil, "", false
	}
	if req.JSONRPC != "2.0" {
		rpcError(w, id, -32600, "invalid request: jsonrpc must be \"2.0\"")
		return nil, "", false
	}
	if req.Method == "message/send" || req.Method == "message/stream" {
		var p a2a.MessageSendParams
		if json.Unmarshal(req.Params, &p) != nil {
			rpcError(w, id, -32602, "invalid params: not an A2A 0.3 MessageSendParams (unknown part kind or wrong field type)")
			return nil, "", false
		}
	}
	return body, req.Method, true
}

// deferredStream holds a stream's headers and first event back until the
// first event is complete: when it is a JSON-RPC error (the request failed
// before anything was streamed — an unknown task, invalid params) the
// response is that error as application/json, as the official JS SDK's
// server answers and its client reads as a typed error; otherwise the
// stream goes out as text/event-stream from its first event on.
type deferredStream struct {
	http.ResponseWriter
	status  int
	buf     bytes.Buffer
	decided bool
	drop    bool // the stream became a JSON error: nothing more is written
}

func (d *deferredStream) WriteHeader(code int) {
	if d.decided {
		d.ResponseWriter.WriteHeader(code)
		return
	}
	d.status = code
}

func (d *deferredStream) Write(p []byte) (int, error) {
	switch {
	case d.drop:
		return len(p), nil
	case d.decided:
		return d.ResponseWriter.Write(p)
	}
	return d.buf.Write(p)
}

func (d *deferredStream) Flush() {
	d.decide()
	if fl, ok := d.ResponseWriter.(http.Flusher); ok && !d.drop {
		fl.Flush()
	}
}

// decide sends what is held: the first event's JSON-RPC error as
// application/json, or the headers and the event as they are.
func (d *deferredStream) decide() {
	if d.decided {
		return
	}
	d.decided = true
	if d.status == 0 {
		d.status = http.StatusOK
	}
	held := d.buf.Bytes()
	for _, line := range bytes.Split(held, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		var resp struct {
			Error  json.RawMessage `json:"error"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(data, &resp) == nil && len(resp.Error) > 0 && len(resp.Result) == 0 {
			h := d.Header()
			h.Set("Content-Type", "application/json")
			h.Del("Connection")
			h.Del("X-Accel-Buffering")
			d.ResponseWriter.WriteHeader(d.status)
			_, _ = d.ResponseWriter.Write(append(data, '\n'))
			d.drop = true
			return
		}
		break
	}
	d.ResponseWriter.WriteHeader(d.status)
	_, _ = d.ResponseWriter.Write(held)
}

// rpcError writes a JSON-RPC error with a fixed, safe message.
func rpcError(w http.ResponseWriter, id any, code int, msg string) {
	writeJSON(w, map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
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
	if err := f.start(ctx); err != nil {
		return err
	}
	return serveHTTP(ctx, ln, h)
}

// start runs the front's background work (the durable task index, push
// delivery, the first discovery) until ctx is done.
func (f *Front) start(ctx context.Context) error {
	f.ctx = ctx
	if f.tasks.db != nil {
		if err := f.tasks.load(ctx); err != nil {
			return fmt.Errorf("a2a front: reading the task index: %w", err)
		}
		go f.tasks.flushLoop(ctx)
	}
	if f.push != nil {
		go f.push.run(ctx)
	}
	go func() {
		if err := f.Refresh(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("initial agent discovery incomplete", "error", err)
		}
	}()
	return nil
}

// serveHTTP serves h on ln until ctx is done.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
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
