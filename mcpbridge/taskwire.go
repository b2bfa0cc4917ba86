package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The go-sdk (v1.8.0) has no MCP Tasks: it cannot send tasks/get or a
// task-augmented tools/call and decode the CreateTaskResult. The bridge
// sends those requests itself, beside the SDK, on the same MCP session:
//
//   - stdio: rawWire writes frames with string ids of its own
//     ("agw-rpc-N") between the SDK's frames and takes their responses and
//     notifications/tasks/status out of the stream before the SDK reads it;
//     server requests (elicitation/create with related-task metadata) stay
//     with the SDK, which hands them to onElicit.
//   - streamable HTTP: httpWire POSTs each request with the session's
//     Mcp-Session-Id and reads its answer (JSON, or the SSE stream that may
//     carry the task's server requests and notifications first) itself. A
//     gateway that restarted re-attaches through the same session id: the
//     server's session, and so its task store, outlives the gateway.

// taskWire sends one JSON-RPC request and returns its result; a JSON-RPC
// error is returned as *jsonrpc.Error.
type taskWire interface {
	request(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// wireIDPrefix marks the ids of the bridge's own requests; the SDK's are
// integers.
const wireIDPrefix = "agw-rpc-"

var wireSeq atomic.Int64

type wireReply struct {
	result json.RawMessage
	err    *jsonrpc.Error
}

// rawWire is the stdio side: frames written through write, responses
// delivered by consume.
type rawWire struct {
	write func([]byte) error

	mu      sync.Mutex
	pending map[string]chan wireReply
	closed  chan struct{}
	once    sync.Once

	// notify, when set, receives notifications/tasks/status params.
	notify atomic.Pointer[func(json.RawMessage)]
}

func newRawWire(write func([]byte) error) *rawWire {
	return &rawWire{write: write, pending: map[string]chan wireReply{}, closed: make(chan struct{})}
}

func (w *rawWire) close() { w.once.Do(func() { close(w.closed) }) }

var (
	wireIDMarker  = []byte(`"` + wireIDPrefix)
	statusMarker  = []byte(`notifications/tasks/status`)
	errWireClosed = errors.New("the MCP connection closed")
)

// consume reports whether frame is the bridge's: a response to one of its
// requests, or a task status notification.
func (w *rawWire) consume(frame []byte) bool {
	if w == nil {
		return false
	}
	mine, status := bytes.Contains(frame, wireIDMarker), bytes.Contains(frame, statusMarker)
	if !mine && !status {
		return false
	}
	var f struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	if json.Unmarshal(frame, &f) != nil {
		return false
	}
	if f.Method == "notifications/tasks/status" && len(f.ID) == 0 {
		if fn := w.notify.Load(); fn != nil {
			(*fn)(f.Params)
		}
		return true
	}
	var id string
	if f.Method != "" || json.Unmarshal(f.ID, &id) != nil || !strings.HasPrefix(id, wireIDPrefix) {
		return false
	}
	w.mu.Lock()
	ch := w.pending[id]
	delete(w.pending, id)
	w.mu.Unlock()
	if ch != nil {
		ch <- wireReply{result: f.Result, err: f.Error}
	}
	return true // a late answer to a request given up on is dropped too
}

func (w *rawWire) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := wireIDPrefix + strconv.FormatInt(wireSeq.Add(1), 10)
	frame, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	ch := make(chan wireReply, 1)
	w.mu.Lock()
	w.pending[id] = ch
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.pending, id)
		w.mu.Unlock()
	}()
	select {
	case <-w.closed:
		return nil, errWireClosed
	default:
	}
	if err := w.write(frame); err != nil {
		return nil, fmt.Errorf("%w: %v", errWireClosed, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return r.result, nil
	case <-w.closed:
		return nil, errWireClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// httpWire is the streamable HTTP side.
type httpWire struct {
	b        *Backend
	client   *http.Client
	url      string
	session  string // Mcp-Session-Id
	protocol string
	// ext: the 2026-07-28 extension form (taskext.go): per-request _meta
	// and the SEP-2243 routing headers.
	ext bool
}

// errSessionGone: the server answered 404, the session it had is gone (and
// with it, for a server that keeps tasks per session, every task in it).
var errSessionGone = errors.New("the MCP server no longer knows the session")

// serverRequestSlots bounds the server requests (questions) answered at
// once over HTTP wires, process-wide.
var serverRequestSlots = make(chan struct{}, 64)

// maxWireBody bounds one JSON answer or SSE event the wire reads.
const maxWireBody = 16 << 20

func (w *httpWire) post(ctx context.Context, body []byte) (*http.Response, error) {
	return w.postAs(ctx, body, "", "")
}

func (w *httpWire) postAs(ctx context.Context, body []byte, method, name string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if w.session != "" {
		req.Header.Set("Mcp-Session-Id", w.session)
	}
	if w.protocol != "" {
		req.Header.Set("Mcp-Protocol-Version", w.protocol)
	}
	if method != "" {
		req.Header.Set("Mcp-Method", method)
	}
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	return w.client.Do(req)
}

func (w *httpWire) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := wireIDPrefix + strconv.FormatInt(wireSeq.Add(1), 10)
	hmethod, hname := "", ""
	if w.ext {
		hmethod = method
		if m, ok := params.(map[string]any); ok {
			if n, ok := m["taskId"].(string); ok {
				hname = n // SEP-2663: tasks/* route by task id
			} else if n, ok := m["name"].(string); ok && method == "tools/call" {
				hname = n
			}
		}
		params = withExtMeta(params, w.protocol)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	resp, err := w.postAs(ctx, body, hmethod, hname)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, errSessionGone
	case resp.StatusCode/100 != 2:
		return nil, fmt.Errorf("MCP server answered HTTP %d", resp.StatusCode)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct != "text/event-stream" {
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxWireBody+1))
		if err != nil {
			return nil, err
		}
		if len(data) > maxWireBody {
			return nil, errors.New("MCP answer too large")
		}
		if res, done, err := w.message(ctx, id, data); done {
			return res, err
		}
		return nil, errors.New("MCP server answered without a JSON-RPC response")
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxWireBody)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(line[5:], []byte(" "))...)
		case len(bytes.TrimSpace(line)) == 0:
			if len(data) > 0 {
				if res, done, err := w.message(ctx, id, data); done {
					return res, err
				}
			}
			data = data[:0]
		}
	}
	if len(data) > 0 {
		if res, done, err := w.message(ctx, id, data); done {
			return res, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, io.ErrUnexpectedEOF
}

// message handles one message of an answer: the response to id ends the
// request (done); a server request is answered with a POST of its own; a
// notification goes to the backend.
func (w *httpWire) message(ctx context.Context, id string, data []byte) (json.RawMessage, bool, error) {
	var f struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	if json.Unmarshal(data, &f) != nil {
		return nil, false, nil
	}
	switch {
	case f.Method != "" && len(f.ID) > 0:
		// Answered on the side: a question waits for a person, and the
		// stream must go on being read meanwhile (the task may end
		// without the answer: a server that timed the question out).
		answer := func(res any, rerr *jsonrpc.Error) {
			out := map[string]any{"jsonrpc": "2.0", "id": f.ID}
			if rerr != nil {
				out["error"] = rerr
			} else {
				out["result"] = res
			}
			body, _ := json.Marshal(out)
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if resp, err := w.post(pctx, body); err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
			}
		}
		select {
		case serverRequestSlots <- struct{}{}:
		default:
			// Bounded: a server that floods requests gets errors.
			answer(nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "agentgw: too many server requests in flight"})
			return nil, false, nil
		}
		go func() {
			defer func() { <-serverRequestSlots }()
			answer(w.b.serverRequest(ctx, f.Method, f.Params))
		}()
		return nil, false, nil
	case f.Method != "":
		w.b.wireNotification(f.Method, f.Params)
		return nil, false, nil
	}
	var got string
	if json.Unmarshal(f.ID, &got) != nil || got != id {
		return nil, false, nil
	}
	if f.Error != nil {
		return nil, true, f.Error
	}
	return f.Result, true, nil
}

// rawHTTPClient is the client of an httpWire: the configured headers, no
// redirects (headers carry credentials).
func (b *Backend) rawHTTPClient() (*http.Client, error) {
	h := http.Header{}
	if b.o.Headers != nil {
		var err error
		if h, err = b.o.Headers(); err != nil {
			return nil, err
		}
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{
		Transport:     b.withOAuth(&headerTransport{base: base, headers: h}),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

func (h *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header[k] = v
	}
	return h.base.RoundTrip(req)
}
