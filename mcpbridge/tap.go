package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk decodes results into its own types, which drop members it does
// not model (Tool.execution, unknown content members) and cannot tell an
// absent isError from false. The tap sees the JSON-RPC frames on the wire and
// keeps the raw result of each request the bridge marked with a progress
// token, so manifests and results are built from the server's own bytes.

// maxTapFrame bounds one frame the tap buffers; larger frames are passed
// through untouched and the bridge falls back to the SDK's decoded value.
const maxTapFrame = 16 << 20

// rawReply is the raw outcome of one marked request: the JSON-RPC result
// member (nil if the request has not been answered or failed).
type rawReply struct {
	mu     sync.Mutex
	result json.RawMessage
	// progress counts notifications/progress frames carrying the token, in
	// wire order with the result: the SDK hands notifications to handlers
	// asynchronously, so the last ones can arrive after CallTool returns.
	progress atomic.Int64
}

func (r *rawReply) get() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.result
}

// tap correlates JSON-RPC frames by request id with the progress tokens the
// bridge puts on the requests it wants the raw result of.
type tap struct {
	mu      sync.Mutex
	byToken map[string]*rawReply
	methods map[string]*rawReply // method name → reply slot (initialize)
	ids     map[string]*rawReply // request id (JSON text) → reply slot
	// abandoned holds the ids of tools/call requests the bridge stopped
	// waiting for (cancelled, deadline, settled) before the server
	// answered: the server may still be working on them, and may still ask
	// questions for them. An answer that arrives later removes the id.
	abandoned map[string]struct{}

	// observe, when set (tests), sees every whole frame: out is true for
	// frames the gateway sends.
	observe func(out bool, frame []byte)
}

func newTap() *tap {
	return &tap{byToken: map[string]*rawReply{}, methods: map[string]*rawReply{}, ids: map[string]*rawReply{}, abandoned: map[string]struct{}{}}
}

// expectMethod records the result of the next requests of this method; it
// is used for initialize, whose request carries no progress token.
func (t *tap) expectMethod(method string) *rawReply {
	r := &rawReply{}
	t.mu.Lock()
	t.methods[method] = r
	t.mu.Unlock()
	return r
}

// forgetMethod stops recording method.
func (t *tap) forgetMethod(method string) {
	t.mu.Lock()
	delete(t.methods, method)
	t.mu.Unlock()
}

// expect registers token; frames of requests carrying it are recorded.
func (t *tap) expect(token string) *rawReply {
	r := &rawReply{}
	t.mu.Lock()
	t.byToken[token] = r
	t.mu.Unlock()
	return r
}

// forget drops token and every request id that pointed at its slot. Unless
// the caller knows the request was answered, ids whose answer the tap has
// not seen are kept as abandoned.
func (t *tap) forget(token string, answered bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.byToken[token]
	delete(t.byToken, token)
	for id, v := range t.ids {
		if v == r {
			delete(t.ids, id)
			if !answered {
				t.abandoned[id] = struct{}{}
			}
		}
	}
}

// unanswered counts abandoned requests the server has not answered yet.
func (t *tap) unanswered() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.abandoned)
}

type outFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

type inFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
}

var (
	progressTokenKey = []byte(`"progressToken"`)
	progressMethod   = []byte(`"notifications/progress"`)
)

// outgoing inspects one frame the gateway sends.
func (t *tap) outgoing(frame []byte) {
	if t.observe != nil {
		t.observe(true, frame)
	}
	t.mu.Lock()
	byMethod := len(t.methods) > 0
	t.mu.Unlock()
	if !byMethod && !bytes.Contains(frame, progressTokenKey) {
		return
	}
	var f outFrame
	if json.Unmarshal(frame, &f) != nil || len(f.ID) == 0 || f.Method == "" {
		return
	}
	var token string
	_ = json.Unmarshal(f.Params.Meta.ProgressToken, &token)
	t.mu.Lock()
	if r, ok := t.byToken[token]; ok && token != "" {
		t.ids[string(f.ID)] = r
	} else if r, ok := t.methods[f.Method]; ok {
		t.ids[string(f.ID)] = r
	}
	t.mu.Unlock()
}

// incoming inspects one frame the server sends.
func (t *tap) incoming(frame []byte) {
	if t.observe != nil {
		t.observe(false, frame)
	}
	if bytes.Contains(frame, progressMethod) {
		t.countProgress(frame)
		return
	}
	t.mu.Lock()
	pending := len(t.ids) > 0 || len(t.abandoned) > 0
	t.mu.Unlock()
	if !pending {
		return
	}
	var f inFrame
	if json.Unmarshal(frame, &f) != nil || len(f.ID) == 0 || f.Method != "" {
		return
	}
	t.mu.Lock()
	r, ok := t.ids[string(f.ID)]
	delete(t.ids, string(f.ID))
	delete(t.abandoned, string(f.ID))
	t.mu.Unlock()
	if ok {
		r.mu.Lock()
		r.result = f.Result // nil for an error response
		r.mu.Unlock()
	}
}

func (t *tap) countProgress(frame []byte) {
	var f struct {
		Method string `json:"method"`
		Params struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"params"`
	}
	var token string
	if json.Unmarshal(frame, &f) != nil || f.Method != "notifications/progress" || json.Unmarshal(f.Params.ProgressToken, &token) != nil {
		return
	}
	t.mu.Lock()
	r := t.byToken[token]
	t.mu.Unlock()
	if r != nil {
		r.progress.Add(1)
	}
}

// lineTap hands every complete, non-blank line to fn (server-sent events
// are line based, and the SDK acts on them only once a line has ended).
type lineTap struct {
	fn   func([]byte)
	buf  []byte
	skip bool // the current frame outgrew maxTapFrame
}

func (l *lineTap) feed(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.add(p)
			return
		}
		l.add(p[:i])
		if !l.skip {
			if f := bytes.TrimSpace(l.buf); len(f) > 0 {
				l.fn(f)
			}
		}
		l.buf, l.skip = l.buf[:0], false
		p = p[i+1:]
	}
}

func (l *lineTap) add(p []byte) {
	if l.skip {
		return
	}
	if len(l.buf)+len(p) > maxTapFrame {
		l.buf, l.skip = l.buf[:0], true
		return
	}
	l.buf = append(l.buf, p...)
}

// sseTap passes an HTTP response body through, handing each complete
// server-sent event's data (or, for application/json, the whole body at EOF)
// to fn before returning the bytes that complete it.
type sseTap struct {
	r    io.ReadCloser
	fn   func([]byte)
	sse  bool
	line lineTap
	data []byte
	body []byte
	over bool
}

func newBodyTap(r io.ReadCloser, sse bool, fn func([]byte)) *sseTap {
	s := &sseTap{r: r, fn: fn, sse: sse}
	s.line.fn = s.sseLine
	return s
}

func (s *sseTap) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if s.sse {
		s.line.feed(p[:n])
		if err == io.EOF {
			s.line.feed([]byte{'\n'}) // a last line without its newline
		}
	} else if !s.over {
		if len(s.body)+n > maxTapFrame {
			s.over, s.body = true, nil
		} else {
			s.body = append(s.body, p[:n]...)
		}
		if err == io.EOF && !s.over {
			if f := bytes.TrimSpace(s.body); len(f) > 0 {
				s.fn(f)
			}
			s.body = nil
		}
	}
	return n, err
}

func (s *sseTap) Close() error { return s.r.Close() }

// sseLine handles one SSE line. lineTap trims surrounding whitespace, so an
// empty line (event boundary) arrives as no call; we detect event ends by a
// line that is not a data line, and by the next "data:" after a gap, see
// below.
func (s *sseTap) sseLine(line []byte) {
	switch {
	case bytes.HasPrefix(line, []byte("data:")):
		d := bytes.TrimPrefix(line[5:], []byte(" "))
		if len(s.data) > 0 {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(d) <= maxTapFrame {
			s.data = append(s.data, d...)
		}
		// JSON-RPC over SSE puts one message on one data line; dispatch
		// as soon as it parses, rather than waiting for the blank line
		// the SDK may already have acted on.
		if json.Valid(s.data) {
			s.fn(s.data)
			s.data = s.data[:0]
		}
	default:
		s.data = s.data[:0]
	}
}

// tapTransport gives an injected transport's frames to the tap: the
// messages it carries are encoded again as the JSON-RPC frames the wire
// would hold (a result keeps the server's own bytes).
type tapTransport struct {
	t   mcp.Transport
	tap *tap
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, tap: t.tap}, nil
}

type tapConn struct {
	mcp.Connection
	tap *tap
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		if frame, eerr := jsonrpc.EncodeMessage(m); eerr == nil && len(frame) <= maxTapFrame {
			c.tap.incoming(frame)
		}
	}
	return m, err
}

func (c *tapConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if frame, err := jsonrpc.EncodeMessage(m); err == nil && len(frame) <= maxTapFrame {
		c.tap.outgoing(frame)
	}
	return c.Connection.Write(ctx, m)
}
