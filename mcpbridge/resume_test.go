package mcpbridge

// Resume's unhappy paths, against an MCP server in the test process (the
// happy path, a real server-everything re-attached after kill -9, is
// e2e/mcp TestMCPTaskSurvivesKill9HTTP): a server that forgot the task,
// one that lost the session (404), a record of a server no longer
// configured, and an unreadable record each settle the task interrupted,
// saying why, and cancel the remote task where it can still be named.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/tasks"
)

// forgetful answers initialize and tools/list like hostileTasks, but
// tasks/get per its mode: "forgot" (a JSON-RPC error), "gone" (404, the
// session is gone). It counts tasks/cancel.
type forgetful struct {
	mode    string
	mu      sync.Mutex
	gets    int
	cancels []string
}

func (f *forgetful) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "no", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	w.Header().Set("Mcp-Session-Id", "s-1")
	w.Header().Set("Content-Type", "application/json")
	reply := func(result string) { fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result) }
	switch m.Method {
	case "notifications/initialized", "notifications/cancelled":
		w.WriteHeader(http.StatusAccepted)
	case "initialize":
		reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"forgetful","version":"1.0.0"}}`)
	case "ping":
		reply(`{}`)
	case "tools/list":
		reply(`{"tools":[{"name":"job","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}]}`)
	case "tasks/get":
		f.mu.Lock()
		f.gets++
		f.mu.Unlock()
		if f.mode == "gone" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unknown task"}}`, m.ID)
	case "tasks/cancel":
		f.mu.Lock()
		f.cancels = append(f.cancels, m.Params.TaskID)
		f.mu.Unlock()
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unknown task"}}`, m.ID)
	default:
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m.ID)
	}
}

func TestResumeUnhappyPaths(t *testing.T) {
	t.Parallel()
	record := func(url, taskID string) []byte {
		b, _ := json.Marshal(remoteState{V: 1, Transport: "http", URL: urlKey(url), Session: "s-old", Protocol: "2025-11-25",
			TaskID: taskID, Token: "tok-1", Created: time.Now().UnixMilli(), TTL: 600000, Cancel: true})
		return b
	}
	for _, tc := range []struct {
		name, mode string
		state      func(url string) []byte
		want       string // in the failure message
		cancelled  bool   // tasks/cancel sent for the remote task
	}{
		{"server forgot the task", "forgot", func(u string) []byte { return record(u, "job-7") }, "no longer knows its task", true},
		{"session gone (404)", "gone", func(u string) []byte { return record(u, "job-8") }, "no longer knows its task", true},
		{"server no longer configured", "forgot", func(string) []byte { return record("http://127.0.0.1:1/elsewhere", "job-9") }, "no longer configured", false},
		{"unreadable record", "forgot", func(string) []byte { return []byte(`{"v":1,"transport":"http","taskId":""}`) }, "unreadable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &forgetful{mode: tc.mode}
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			url := srv.URL + "/mcp"
			s := start(t, Options{JID: testJID, URL: url}, nil)
			r := newFakeRun()
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.b.Resume(context.Background(), tasks.Call{TaskID: "task-r", Tool: "job", Endpoint: testJID}, tc.state(url), r)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Resume did not return")
			}
			r.Wait(t, 10*time.Second)
			_, fail, _, _ := r.Snapshot()
			if fail == nil || fail.Code != "agentgw:interrupted" || !strings.Contains(fail.Message, tc.want) {
				t.Fatalf("want interrupted saying %q, got %s %+v", tc.want, r.Outcome(), fail)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if got := len(f.cancels) > 0; got != tc.cancelled {
				t.Errorf("tasks/cancel sent: %v (%q), want %v", got, f.cancels, tc.cancelled)
			}
			if tc.mode == "forgot" && tc.cancelled && f.gets != 1 {
				t.Errorf("tasks/get asked %d times of a server that answered an error, want once (no retry of a definite answer)", f.gets)
			}
		})
	}
}
