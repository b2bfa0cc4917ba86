package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ndjsonConn is the stdio connection: newline-delimited JSON-RPC frames,
// framed and bounded as the SDK's mcp.IOTransport frames them (a streaming
// decoder, mcp.DefaultMaxLineLength per frame, nothing but a line end after
// a value). It exists for the decoding: the SDK's connection runs every
// incoming frame through two or three fresh decoders that each allocate a
// 32 KiB buffer (readBatch, DecodeMessage, the method), which in the
// gateway's profile was most of the bytes allocated per echo call, and so
// most of its GC work. Here one decoder per connection reuses its buffer
// and a frame is decoded once, with the SDK's rules: exact member names,
// jsonrpc "2.0", an integer or string id, "method" present means a request
// (or a notification without id), otherwise a response that needs an id.
//
// onIn and onOut, when set, see each whole frame (the tap): onIn before the
// SDK gets the message, onOut before the frame is written, so that the
// tap needs no second scan of the byte stream.
//
// A batch (a JSON array of messages, gone from MCP since 2025-06-18) is
// delivered one message at a time; replies to requests in it are sent one
// by one rather than as an array.
type ndjsonConn struct {
	rwc      io.ReadWriteCloser
	onOut    func([]byte)
	incoming chan frameOrErr
	queue    []jsonrpc.Message // rest of the last batch; reads are serial

	// wire carries the bridge's own JSON-RPC requests (MCP Tasks,
	// taskwire.go) beside the SDK's: frames it consumes never reach the SDK.
	wire *rawWire

	writeMu   sync.Mutex
	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

type frameOrErr struct {
	frame json.RawMessage
	err   error
}

var errFrameTooLarge = errors.New("inbound JSON-RPC frame exceeded the maximum line length")

func newNDJSONConn(r io.ReadCloser, w io.WriteCloser, limit int, onIn, onOut func([]byte)) *ndjsonConn {
	c := &ndjsonConn{rwc: rwc{r, w}, onOut: onOut, incoming: make(chan frameOrErr), closed: make(chan struct{})}
	c.wire = newRawWire(c.writeFrame)
	// Reads run in a goroutine so that Read can return as soon as Close is
	// called, as the SDK's connection does.
	go func() {
		br := bufio.NewReader(r)
		var scan valueScan
		lr := &frameLimit{r: &scanFeed{r: br, scan: &scan}, limit: limit}
		dec := json.NewDecoder(lr)
		for {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, errFrameTooLarge) {
				// One frame too large to carry: skip it, fail only the
				// call it answers (oversize.go), read on.
				var id json.RawMessage
				var isReq bool
				id, isReq, err = skipOversize(br, &scan)
				if err == nil {
					dec, lr.count = json.NewDecoder(lr), 0
					if id == nil {
						continue
					}
					if isReq {
						_ = c.writeFrame([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32600,"message":"request exceeds the gateway's frame limit"}}`))
						continue
					}
					raw = json.RawMessage(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":` + strconv.Itoa(codeFrameTooLarge) + `,"message":"` + msgFrameTooLarge + `"}}`)
				} else if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
			}
			if err == nil {
				var tr [1]byte
				if n, rerr := dec.Buffered().Read(tr[:]); n > 0 {
					if tr[0] != '\n' && tr[0] != '\r' {
						err = errors.New("invalid trailing data at the end of a frame")
					}
				} else if rerr != nil && rerr != io.EOF {
					err = rerr
				}
			}
			if err == nil && onIn != nil && len(raw) <= maxTapFrame {
				onIn(raw)
			}
			if err == nil && c.wire.consume(raw) {
				lr.count = 0
				continue
			}
			select {
			case c.incoming <- frameOrErr{raw, err}:
			case <-c.closed:
				return
			}
			if err != nil {
				return
			}
			lr.count = 0
		}
	}()
	return c
}

func (c *ndjsonConn) SessionID() string { return "" }

func (c *ndjsonConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		m := c.queue[0]
		c.queue = c.queue[1:]
		return m, nil
	}
	var raw json.RawMessage
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case v := <-c.incoming:
		if v.err != nil {
			return nil, v.err
		}
		raw = v.frame
	case <-c.closed:
		return nil, io.EOF
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(raw, &batch); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc batch: %w", err)
		}
		if len(batch) == 0 {
			return nil, errors.New("empty batch")
		}
		msgs := make([]jsonrpc.Message, 0, len(batch))
		for _, r := range batch {
			m, err := decodeMessage(r)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		}
		c.queue = msgs[1:]
		return msgs[0], nil
	}
	return decodeMessage(raw)
}

func (c *ndjsonConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		return fmt.Errorf("marshaling message: %v", err)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.onOut != nil && len(data) <= maxTapFrame {
		c.onOut(data)
	}
	_, err = c.rwc.Write(append(data, '\n'))
	return err
}

// writeFrame writes one frame of the bridge's own.
func (c *ndjsonConn) writeFrame(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.onOut != nil && len(data) <= maxTapFrame {
		c.onOut(data)
	}
	_, err := c.rwc.Write(append(data, '\n'))
	return err
}

func (c *ndjsonConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.rwc.Close()
		close(c.closed)
		c.wire.close()
	})
	return c.closeErr
}

var _ mcp.Connection = (*ndjsonConn)(nil)

// wireMessage holds a frame's members by their exact names (encoding/json
// would also match "ID" or "Method").
type wireMessage map[string]json.RawMessage

// decodeMessage is jsonrpc.DecodeMessage with one decoding pass.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	var w wireMessage
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	var version string
	if v, ok := w["jsonrpc"]; ok {
		if err := json.Unmarshal(v, &version); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
	}
	if version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", version, "2.0")
	}
	var rawID any
	if v, ok := w["id"]; ok {
		if err := json.Unmarshal(v, &rawID); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
	}
	id, err := jsonrpc.MakeID(rawID)
	if err != nil {
		return nil, err
	}
	if v, ok := w["method"]; ok {
		var method string
		if err := json.Unmarshal(v, &method); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: w["params"]}, nil
	}
	if !id.IsValid() {
		return nil, errInvalidRequest
	}
	resp := &jsonrpc.Response{ID: id, Result: w["result"]}
	if v, ok := w["error"]; ok && !isNull(v) {
		we, err := decodeWireError(v)
		if err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		resp.Error = we
	}
	return resp, nil
}

// errInvalidRequest is the SDK's ErrInvalidRequest (that value is internal
// to it).
var errInvalidRequest = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}

// decodeWireError reads an error object by its exact member names, as the
// SDK does.
func decodeWireError(v json.RawMessage) (*jsonrpc.Error, error) {
	var w wireMessage
	if err := json.Unmarshal(v, &w); err != nil {
		return nil, err
	}
	we := &jsonrpc.Error{}
	if c, ok := w["code"]; ok {
		if err := json.Unmarshal(c, &we.Code); err != nil {
			return nil, err
		}
	}
	if m, ok := w["message"]; ok {
		if err := json.Unmarshal(m, &we.Message); err != nil {
			return nil, err
		}
	}
	if d, ok := w["data"]; ok && !isNull(d) {
		we.Data = d
	}
	return we, nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// frameLimit bounds the bytes the decoder may read for one frame.
type frameLimit struct {
	r            io.Reader
	limit, count int
}

func (f *frameLimit) Read(p []byte) (int, error) {
	if f.count >= f.limit {
		return 0, errFrameTooLarge
	}
	if len(p) > f.limit-f.count {
		p = p[:f.limit-f.count]
	}
	n, err := f.r.Read(p)
	f.count += n
	return n, err
}

// rwc joins a reader and a writer; Close closes both.
type rwc struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (x rwc) Read(p []byte) (int, error)  { return x.r.Read(p) }
func (x rwc) Write(p []byte) (int, error) { return x.w.Write(p) }
func (x rwc) Close() error {
	rerr := x.r.Close()
	werr := x.w.Close()
	return errors.Join(rerr, werr)
}
