package a2abridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	v1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// errUnreadable marks an answer of the agent that is not A2A 0.3 the bridge
// can read (an unknown part kind or event kind, data that is not a JSON-RPC
// response): the task fails agentgw:a2a-protocol, it never completes with
// what could be read.
var errUnreadable = errors.New("a2abridge: the agent's answer is not readable A2A 0.3")

// rpcTransport is the SDK's JSON-RPC transport with its own reading of
// streams and tasks/get: the SDK reads SSE with a 64 KiB line scanner
// (a larger event breaks the stream) and does not tell an unreadable answer
// from a broken connection. Here one SSE event may be up to max bytes (the
// documented cap, MaxResponseBytes) and every error says which it is.
//
// With v10 it speaks A2A 1.0 JSON-RPC on the wire (SendStreamingMessage,
// GetTask, SubscribeToTask, CancelTask, A2A-Version: 1.0, TASK_STATE_*
// and one Part type) and hands the bridge the same 0.3 shapes, converted
// with the v2 SDK's a2acompat/a2av0: one bridging code for both versions.
type rpcTransport struct {
	a2aclient.Transport // 0.3's cancel: the SDK's
	url                 string
	http                *http.Client
	max                 int64
	seq                 atomic.Int64
	v10                 bool
}

func newRPCTransport(url string, hc *http.Client, max int64, v10 bool) *rpcTransport {
	return &rpcTransport{Transport: a2aclient.NewJSONRPCTransport(url, hc), url: url, http: hc, max: max, v10: v10}
}

// methods10 are the A2A 1.0 names of the 0.3 methods the bridge calls.
var methods10 = map[string]string{
	"tasks/get": "GetTask", "message/stream": "SendStreamingMessage",
	"tasks/resubscribe": "SubscribeToTask", "tasks/cancel": "CancelTask",
}

// wire is a 0.3 request's params as the transport's version sends them.
func (t *rpcTransport) wire(method string, params any) (string, any, error) {
	if !t.v10 {
		return method, params, nil
	}
	switch p := params.(type) {
	case *a2a.MessageSendParams:
		r, err := a2av0.ToV1SendMessageRequest(p)
		return methods10[method], r, err
	case *a2a.TaskQueryParams:
		return methods10[method], a2av0.ToV1GetTaskRequest(p), nil
	case *a2a.TaskIDParams:
		if method == "tasks/resubscribe" {
			return methods10[method], a2av0.ToV1SubscribeToTaskRequest(p), nil
		}
		return methods10[method], a2av0.ToV1CancelTaskRequest(p), nil
	}
	return "", nil, fmt.Errorf("a2abridge: no A2A 1.0 form for %T", params)
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code int `json:"code"`
	} `json:"error"`
}

// rpcError is a JSON-RPC error of the agent; its message is not kept (a
// remote payload), only the code.
type rpcError struct{ code int }

func (e rpcError) Error() string {
	return "the A2A agent answered JSON-RPC error " + strconv.Itoa(e.code)
}

// Is maps the codes the bridge acts on to the SDK's errors (the same
// codes in 0.3 and 1.0).
func (e rpcError) Is(target error) bool {
	switch e.code {
	case -32001:
		return target == a2a.ErrTaskNotFound
	case -32002:
		return target == a2a.ErrTaskNotCancelable
	}
	return false
}

func (t *rpcTransport) post(ctx context.Context, method string, params any, stream bool) (*http.Response, error) {
	method, params, err := t.wire(method, params)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": strconv.FormatInt(t.seq.Add(1), 10), "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", t.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if t.v10 {
		req.Header.Set("A2A-Version", "1.0")
	}
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("unexpected HTTP status %d", resp.StatusCode)
	}
	return resp, nil
}

// decodeResponse reads one JSON-RPC response: its result, or the agent's
// error, or errUnreadable.
func decodeResponse(data []byte) (json.RawMessage, error) {
	var r rpcResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: a response is not JSON-RPC", errUnreadable)
	}
	if r.Error != nil {
		return nil, rpcError{r.Error.Code}
	}
	if len(r.Result) == 0 {
		return nil, fmt.Errorf("%w: a response has neither result nor error", errUnreadable)
	}
	return r.Result, nil
}

// GetTask reads the task (without history) through the bounded body.
func (t *rpcTransport) GetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	zero := 0
	p := *q
	p.HistoryLength = &zero
	resp, err := t.post(ctx, "tasks/get", &p, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err // errTooLarge over the cap
	}
	res, err := decodeResponse(data)
	if err != nil {
		return nil, err
	}
	return t.task(res)
}

// task decodes a Task of the transport's version into the 0.3 shape.
func (t *rpcTransport) task(res json.RawMessage) (*a2a.Task, error) {
	if t.v10 {
		var task v1.Task
		if err := json.Unmarshal(res, &task); err != nil {
			return nil, fmt.Errorf("%w: the task is not an A2A 1.0 Task (%s)", errUnreadable, kindOf(err))
		}
		return a2av0.FromV1Task(&task), nil
	}
	var task a2a.Task
	if err := json.Unmarshal(res, &task); err != nil {
		return nil, fmt.Errorf("%w: the task is not an A2A 0.3 Task (%s)", errUnreadable, kindOf(err))
	}
	return &task, nil
}

// CancelTask asks the agent to cancel its task: the SDK's for 0.3, read
// here for 1.0.
func (t *rpcTransport) CancelTask(ctx context.Context, id *a2a.TaskIDParams) (*a2a.Task, error) {
	if !t.v10 {
		return t.Transport.CancelTask(ctx, id)
	}
	resp, err := t.post(ctx, "tasks/cancel", id, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	res, err := decodeResponse(data)
	if err != nil {
		return nil, err
	}
	return t.task(res)
}

func (t *rpcTransport) SendStreamingMessage(ctx context.Context, m *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return t.stream(ctx, "message/stream", m)
}

func (t *rpcTransport) ResubscribeToTask(ctx context.Context, id *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return t.stream(ctx, "tasks/resubscribe", id)
}

// stream posts a streaming method and yields its events. An agent that
// answers with one JSON response (an error before the stream) is read as
// that response.
func (t *rpcTransport) stream(ctx context.Context, method string, params any) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		resp, err := t.post(ctx, method, params, true)
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
			data, err := io.ReadAll(io.LimitReader(resp.Body, t.max+1))
			if err == nil && int64(len(data)) > t.max {
				err = errTooLarge
			}
			if err == nil {
				var ev a2a.Event
				if ev, err = t.event(data); err == nil {
					yield(ev, nil)
					return
				}
			}
			yield(nil, err)
			return
		}
		for data, err := range sseEvents(resp.Body, t.max) {
			if err == nil {
				var ev a2a.Event
				if ev, err = t.event(data); err == nil {
					if !yield(ev, nil) {
						return
					}
					continue
				}
			}
			yield(nil, err)
			return
		}
	}
}

// event decodes one JSON-RPC response carrying an A2A event of the
// transport's version (1.0: a StreamResponse) into the 0.3 shape.
func (t *rpcTransport) event(data []byte) (a2a.Event, error) {
	res, err := decodeResponse(data)
	if err != nil {
		return nil, err
	}
	if t.v10 {
		var sr v1.StreamResponse
		if err := json.Unmarshal(res, &sr); err != nil || sr.Event == nil {
			return nil, fmt.Errorf("%w: an event is not an A2A 1.0 stream response (%s)", errUnreadable, kindOf(err))
		}
		ev, err := a2av0.FromV1Event(sr.Event)
		if err != nil {
			return nil, fmt.Errorf("%w: an event is not an A2A 1.0 event", errUnreadable)
		}
		return ev, nil
	}
	ev, err := a2a.UnmarshalEventJSON(res)
	if err != nil {
		return nil, fmt.Errorf("%w: an event is not an A2A 0.3 event (%s)", errUnreadable, kindOf(err))
	}
	return ev, nil
}

// kindOf names a decoding error without quoting the agent's payload.
func kindOf(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return "invalid JSON"
	case errors.As(err, &te):
		return "a field of the wrong type"
	}
	return "an unknown kind"
}

// sseEvents yields the data of each Server-Sent Event of r (the data lines
// of one event joined by newlines). An event larger than max bytes ends the
// stream with errTooLarge; it is never cut.
func sseEvents(r io.Reader, max int64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		var data []byte
		have := false
		for {
			line, err := readLine(br, max)
			if err != nil {
				if errors.Is(err, io.EOF) {
					return // an unterminated last event is discarded (SSE)
				}
				yield(nil, err)
				return
			}
			switch {
			case len(line) == 0:
				if have && !yield(data, nil) {
					return
				}
				data, have = data[:0:0], false
			case bytes.HasPrefix(line, []byte("data:")):
				v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
				if have {
					data = append(data, '\n')
				}
				data, have = append(data, v...), true
				if int64(len(data)) > max {
					yield(nil, errTooLarge)
					return
				}
			}
			// id:, event:, retry: and comments carry nothing the bridge reads.
		}
	}
}

// readLine reads one line without its end (\n, \r\n), at most max bytes
// of data with its "data: " field name.
func readLine(br *bufio.Reader, max int64) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if int64(len(line)) > max+int64(len("data: \r\n")) {
			return nil, errTooLarge
		}
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.EOF // a last line without its end: an unterminated event
		default:
			return nil, err
		}
	}
}
