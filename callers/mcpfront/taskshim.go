package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk decodes tools/call params into a struct without the
// 2025-11-25 member "task", so the transports move it into
// _meta[metaTaskParams] before the SDK reads the message.

// liftTaskParam rewrites tools/call params that carry "task"; others are
// returned as they are.
func liftTaskParam(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"task"`)) {
		return raw
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	task, ok := m["task"]
	if !ok {
		return raw
	}
	var meta map[string]json.RawMessage
	if len(m["_meta"]) > 0 && json.Unmarshal(m["_meta"], &meta) != nil {
		return raw // a malformed _meta is the SDK's to refuse
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[metaTaskParams] = task
	delete(m, "task")
	m["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// taskTransport wraps a transport (stdio) so tools/call's task member
// reaches the front, and status notifications can be written to the host
// outside a request.
type taskTransport struct {
	mcp.Transport
	f *Front
}

func (t taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	tc := &taskConn{Connection: c}
	t.f.setNotifier(tc)
	return tc, nil
}

type taskConn struct{ mcp.Connection }

func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if req, ok := m.(*jsonrpc.Request); ok && err == nil && req.Method == "tools/call" {
		req.Params = liftTaskParam(req.Params)
	}
	return m, err
}

// notifier is the connection status notifications go to, if any.
func (f *Front) notifier() mcp.Connection {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notify
}

func (f *Front) setNotifier(c mcp.Connection) {
	f.mu.Lock()
	f.notify = c
	f.mu.Unlock()
}

// maxShimBody bounds the POST body the shim reads (the SDK's own limit).
const maxShimBody = 4 << 20

// liftTaskHTTP does the same for streamable HTTP POST bodies.
func liftTaskHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxShimBody+1))
		_ = r.Body.Close()
		if err != nil {
			http.Error(w, "reading the request body failed", http.StatusBadRequest)
			return
		}
		if len(body) <= maxShimBody {
			body = liftHTTPBody(body)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

func liftHTTPBody(body []byte) []byte {
	if !bytes.Contains(body, []byte(`"task"`)) {
		return body
	}
	var one struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &one) != nil || one.Method != "tools/call" {
		return body
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	m["params"] = liftTaskParam(one.Params)
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}
