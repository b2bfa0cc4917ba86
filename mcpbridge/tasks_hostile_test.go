package mcpbridge

// A hostile MCP Tasks server (raw JSON-RPC over streamable HTTP, in the
// test process, as rawserver_test.go is over stdio): while the bridge waits
// for a task's result it floods status notifications, names tasks the
// bridge never created in notifications and in an elicitation, and then
// answers. Each is a bounded drop or a clear refusal, logged once.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type hostileTasks struct {
	mu         sync.Mutex
	ghostReply json.RawMessage // our answer to the ghost elicitation
	calls      int
	cancels    int
}

func (h *hostileTasks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
		return
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(body, &m)
	w.Header().Set("Mcp-Session-Id", "hostile-session")
	reply := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}
	switch m.Method {
	case "":
		// A response of ours (to the ghost elicitation).
		h.mu.Lock()
		if m.Error != nil {
			h.ghostReply = m.Error
		} else {
			h.ghostReply = m.Result
		}
		h.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	case "notifications/initialized", "notifications/cancelled":
		w.WriteHeader(http.StatusAccepted)
	case "initialize":
		reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"hostile-tasks","version":"1.0.0"}}`)
	case "ping":
		reply(`{}`)
	case "tools/list":
		reply(`{"tools":[{"name":"job","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},{"name":"stuck","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}`)
	case "tools/call":
		h.mu.Lock()
		h.calls++
		h.mu.Unlock()
		if strings.Contains(string(body), `"stuck"`) {
			// A task that never ends, with a 300 ms ttl.
			reply(`{"task":{"taskId":"stuck-1","status":"working","createdAt":"2026-12-02T00:00:00Z","lastUpdatedAt":"2026-12-02T00:00:00Z","ttl":300,"pollInterval":200}}`)
			return
		}
		reply(`{"task":{"taskId":"job-1","status":"working","createdAt":"2026-12-02T00:00:00Z","lastUpdatedAt":"2026-12-02T00:00:00Z","ttl":600000,"pollInterval":5000}}`)
	case "tasks/get":
		if strings.Contains(string(body), "stuck-1") {
			reply(`{"taskId":"stuck-1","status":"working","createdAt":"2026-12-02T00:00:00Z","lastUpdatedAt":"2026-12-02T00:00:00Z","ttl":300}`)
			return
		}
		reply(`{"taskId":"job-1","status":"working","statusMessage":"busy","createdAt":"2026-12-02T00:00:00Z","lastUpdatedAt":"2026-12-02T00:00:00Z","ttl":600000}`)
	case "tasks/cancel":
		h.mu.Lock()
		h.cancels++
		h.mu.Unlock()
		reply(`{"taskId":"job-1","status":"cancelled","createdAt":"2026-12-02T00:00:00Z","lastUpdatedAt":"2026-12-02T00:00:00Z","ttl":600000}`)
	case "tasks/result":
		if strings.Contains(string(body), "stuck-1") {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		event := func(s string) { fmt.Fprintf(w, "event: message\ndata: %s\n\n", s) }
		for i := 0; i < 500; i++ {
			event(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"job-1","status":"working","statusMessage":"step %d","createdAt":"x","lastUpdatedAt":"x","ttl":600000}}`, i))
		}
		for i := 0; i < 50; i++ {
			event(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"ghost-%d","status":"working","createdAt":"x","lastUpdatedAt":"x","ttl":1}}`, i))
		}
		event(`{"jsonrpc":"2.0","id":"srv-1","method":"elicitation/create","params":{"message":"Whose task is this?","requestedSchema":{"type":"object","properties":{"x":{"type":"string"}}},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"ghost-task"}}}}`)
		fl.Flush()
		// Wait for the bridge's answer before the result.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			h.mu.Lock()
			got := h.ghostReply != nil
			h.mu.Unlock()
			if got {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		event(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"job done"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"job-1"}}}}`, m.ID))
		fl.Flush()
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m.ID)
	}
}

func TestTaskHostileServer(t *testing.T) {
	t.Parallel()
	h := &hostileTasks{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := start(t, Options{JID: testJID, URL: srv.URL + "/mcp"}, nil)
	r := newFakeRun()
	s.exec(t, "job", `{}`, r)
	res, fail, _, updates := r.Snapshot()
	if res == nil {
		t.Fatalf("want completed, got %+v", fail)
	}
	if txt := textOf(t, res); txt != "job done" {
		t.Fatalf("result %q", txt)
	}
	if strings.Contains(string(res.Meta), "related-task") {
		t.Errorf("the remote task's id leaked into the result's _meta: %s", res.Meta)
	}
	// The flood: 500 distinct status messages in one burst; at most the
	// burst (20) plus what the rate refills while they are read reach the
	// task.
	if n := len(updates); n > 40 || n == 0 {
		t.Errorf("%d progress updates from a flood of 500 status notifications, want 1..40", n)
	}
	logs := s.logs.String()
	if c := strings.Count(logs, "floods task status notifications"); c != 1 {
		t.Errorf("flood logged %d times, want once", c)
	}
	if c := strings.Count(logs, "named a task the gateway did not create"); c != 1 {
		t.Errorf("unknown task ids logged %d times, want once", c)
	}
	if n := s.b.unknownCount(); n != 51 {
		t.Errorf("%d messages naming unknown tasks dropped, want 51 (50 notifications, 1 elicitation)", n)
	}
	h.mu.Lock()
	ghost := string(h.ghostReply)
	calls := h.calls
	h.mu.Unlock()
	if !strings.Contains(ghost, "-32602") {
		t.Errorf("the elicitation for a task the bridge never created was answered %s, want error -32602", ghost)
	}
	if len(r.Inputs) != 0 {
		t.Errorf("the foreign question reached the task: %+v", r.Inputs)
	}
	if calls != 1 {
		t.Errorf("tools/call sent %d times", calls)
	}
	t.Logf("flood of 500: %d progress events; 51 foreign-task messages dropped; foreign elicitation answered %s", len(updates), ghost)
}

// TestTaskPastTTL: a remote task that outlives its ttl is reported and
// cancelled, not waited on forever.
func TestTaskPastTTL(t *testing.T) {
	t.Parallel()
	h := &hostileTasks{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := start(t, Options{JID: testJID, URL: srv.URL + "/mcp"}, nil)
	began := time.Now()
	r := s.exec(t, "stuck", `{}`, nil)
	_, fail, _, _ := r.Snapshot()
	if fail == nil || !strings.Contains(fail.Message, "time-to-live") {
		t.Fatalf("want a failure naming the time-to-live, got %s %+v", r.Outcome(), fail)
	}
	h.mu.Lock()
	cancels := h.cancels
	h.mu.Unlock()
	if cancels != 1 {
		t.Errorf("tasks/cancel sent %d times, want once", cancels)
	}
	t.Logf("a task with a 300 ms ttl that never ends: failed %q after %v", fail.Message, time.Since(began).Round(time.Millisecond))
}
