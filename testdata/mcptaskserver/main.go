// Command mcptaskserver is a small MCP server that speaks the 2026-07-28
// Tasks extension (io.modelcontextprotocol/tasks, SEP-2663) as the spec
// describes it, for the gateway's tests: no SDK here speaks it yet. It is
// the go-sdk's stateless streamable HTTP server (2026-07-28) with the
// extension added beside it: server-directed CreateTaskResult
// (resultType "task") for clients that declare the extension on the
// request, tasks/get (DetailedTask with inputRequests, result or error),
// tasks/update (inputResponses), tasks/cancel (acknowledged). Tasks live
// in this process, so they outlive a client (a gateway) that is killed.
//
//	mcptaskserver -addr 127.0.0.1:0
//
// prints "listening on http://ADDR/mcp" on stderr. Tool "research" (a
// task) reports a stage, asks which year to cover (an elicitation through
// inputRequests), optionally holds until POST /release, and completes
// with a report. GET /stats: {"runs", "cancels", "updates", "unknown"}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const extTasks = "io.modelcontextprotocol/tasks"

type task struct {
	mu      sync.Mutex
	id      string
	status  string
	message string
	created time.Time
	updated time.Time
	inputs  map[string]any // outstanding inputRequests
	answers chan map[string]json.RawMessage
	result  map[string]any
	cancel  chan struct{}
	once    sync.Once
}

type server struct {
	mu      sync.Mutex
	tasks   map[string]*task
	seq     atomic.Int64
	runs    atomic.Int64
	cancels atomic.Int64
	updates atomic.Int64
	unknown atomic.Int64
	release chan struct{}
	relOnce sync.Once
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	s := &server{tasks: map[string]*task{}, release: make(chan struct{})}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptaskserver", Version: "1.0.0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Extensions: map[string]any{extTasks: map[string]any{}}},
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "research", Description: "Researches a topic as a task; asks which year to cover."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Topic string `json:"topic"`
			Hold  bool   `json:"hold,omitempty"`
		}) (*mcp.CallToolResult, any, error) {
			// Only clients without the extension get here: the middleware
			// turns the others' calls into tasks.
			return nil, nil, &jsonrpc.Error{Code: -32021, Message: "Missing required client capability",
				Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + extTasks + `":{}}}}`)}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes, synchronously."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Message string `json:"message"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "count", Description: "Counts to three with progress, synchronously."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 3; i++ {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: "step " + strconv.Itoa(i)})
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted"}}}, nil, nil
		})
	srv.AddReceivingMiddleware(s.middleware)
	must := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	must(mcp.AddReceivingCustomMethod(srv, "tasks/get", s.get))
	must(mcp.AddReceivingCustomMethod(srv, "tasks/update", s.update))
	must(mcp.AddReceivingCustomMethod(srv, "tasks/cancel", s.cancelTask))

	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]int64{"runs": s.runs.Load(), "cancels": s.cancels.Load(), "updates": s.updates.Load(), "unknown": s.unknown.Load()})
	})
	mux.HandleFunc("/release", func(w http.ResponseWriter, r *http.Request) {
		s.relOnce.Do(func() { close(s.release) })
	})
	ln, err := net.Listen("tcp", *addr)
	must(err)
	fmt.Fprintf(os.Stderr, "listening on http://%s/mcp\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}

// declares reports whether the request declared the extension in its
// per-request capabilities.
func declares(meta mcp.Meta) bool {
	raw, ok := meta[mcp.MetaKeyClientCapabilities]
	if !ok {
		return false
	}
	b, _ := json.Marshal(raw)
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(b, &c) != nil {
		return false
	}
	_, ok = c.Extensions[extTasks]
	return ok
}

func (s *server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		r, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || r.Params == nil || r.Params.Name != "research" || !declares(r.Params.Meta) {
			return next(ctx, method, req)
		}
		var in struct {
			Topic string `json:"topic"`
			Hold  bool   `json:"hold"`
		}
		if len(r.Params.Arguments) > 0 && json.Unmarshal(r.Params.Arguments, &in) != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid arguments"}
		}
		t := &task{id: "rt-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(s.seq.Add(1), 10),
			status: "working", message: "accepted", created: time.Now(), updated: time.Now(),
			answers: make(chan map[string]json.RawMessage, 4), cancel: make(chan struct{})}
		s.mu.Lock()
		s.tasks[t.id] = t
		s.mu.Unlock()
		s.runs.Add(1)
		go s.run(t, in.Topic, in.Hold)
		// Durably created before the answer: tasks/get resolves it now.
		f := t.fields()
		f["resultType"] = "task"
		return &result{fields: f}, nil
	}
}

// run is the tool's work.
func (s *server) run(t *task, topic string, hold bool) {
	t.set("working", "Stage 1/2: gathering sources on "+topic)
	t.mu.Lock()
	t.status, t.message, t.updated = "input_required", "Which year should the research cover?", time.Now()
	t.inputs = map[string]any{"year-1": map[string]any{"method": "elicitation/create", "params": map[string]any{
		"mode": "form", "message": "Which year should the research on " + topic + " cover?",
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"year": map[string]any{"type": "integer"}}, "required": []string{"year"}},
	}}}
	t.mu.Unlock()
	var year string
	for year == "" {
		select {
		case a := <-t.answers:
			var r struct {
				Action  string         `json:"action"`
				Content map[string]any `json:"content"`
			}
			raw, ok := a["year-1"]
			if !ok || json.Unmarshal(raw, &r) != nil {
				continue
			}
			if r.Action != "accept" {
				t.finish("cancelled", "the user declined", nil)
				return
			}
			year = fmt.Sprint(r.Content["year"])
		case <-t.cancel:
			t.finish("cancelled", "cancelled by the client", nil)
			return
		}
	}
	t.mu.Lock()
	t.inputs = nil
	t.mu.Unlock()
	t.set("working", "Stage 2/2: writing the report for "+year)
	if hold {
		select {
		case <-s.release:
		case <-t.cancel:
			t.finish("cancelled", "cancelled by the client", nil)
			return
		}
	}
	t.finish("completed", "done", map[string]any{
		"content": []any{map[string]any{"type": "text", "text": "Research report: " + topic + " in " + year}},
	})
}

func (t *task) set(status, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status, t.message, t.updated = status, msg, time.Now()
}

func (t *task) finish(status, msg string, res map[string]any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == "completed" || t.status == "cancelled" || t.status == "failed" {
		return
	}
	t.status, t.message, t.updated, t.result, t.inputs = status, msg, time.Now(), res, nil
}

// fields is the task's DetailedTask.
func (t *task) fields() map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := map[string]any{
		"taskId": t.id, "status": t.status, "statusMessage": t.message,
		"createdAt": t.created.UTC().Format(time.RFC3339Nano), "lastUpdatedAt": t.updated.UTC().Format(time.RFC3339Nano),
		"ttlMs": 600000, "pollIntervalMs": 200,
	}
	switch t.status {
	case "input_required":
		f["inputRequests"] = t.inputs
	case "completed":
		f["result"] = t.result
	}
	return f
}

type params struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

type result struct {
	mcp.ResultBase
	fields map[string]any
}

func (r *result) MarshalJSON() ([]byte, error) { return json.Marshal(r.fields) }

func (s *server) lookup(p *params) (*task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.taskId is required"}
	}
	t, ok := s.tasks[p.TaskID]
	if !ok {
		s.unknown.Add(1)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown task"}
	}
	return t, nil
}

func (s *server) get(ctx context.Context, ss *mcp.ServerSession, p *params) (*result, error) {
	t, err := s.lookup(p)
	if err != nil {
		return nil, err
	}
	f := t.fields()
	f["resultType"] = "complete"
	return &result{fields: f}, nil
}

func (s *server) update(ctx context.Context, ss *mcp.ServerSession, p *params) (*result, error) {
	t, err := s.lookup(p)
	if err != nil {
		return nil, err
	}
	s.updates.Add(1)
	select {
	case t.answers <- p.InputResponses:
	default:
	}
	return &result{fields: map[string]any{"resultType": "complete"}}, nil
}

func (s *server) cancelTask(ctx context.Context, ss *mcp.ServerSession, p *params) (*result, error) {
	t, err := s.lookup(p)
	if err != nil {
		return nil, err
	}
	s.cancels.Add(1)
	t.once.Do(func() { close(t.cancel) })
	return &result{fields: map[string]any{"resultType": "complete"}}, nil
}
