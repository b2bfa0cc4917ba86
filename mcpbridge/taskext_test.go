package mcpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/tasks"
)

// refTaskServer builds and starts testdata/mcptaskserver (the 2026-07-28
// Tasks extension, written from SEP-2663) and returns its MCP URL and
// base URL.
func refTaskServer(t *testing.T) (string, string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	bin := filepath.Join(t.TempDir(), "mcptaskserver")
	build := exec.Command("go", "build", "-o", bin, "./testdata/mcptaskserver")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build mcptaskserver: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				urls <- u
			}
		}
	}()
	select {
	case u := <-urls:
		return u, strings.TrimSuffix(u, "/mcp")
	case <-time.After(60 * time.Second):
		t.Fatal("mcptaskserver printed no address")
		return "", ""
	}
}

func refStats(t *testing.T, base string) map[string]int64 {
	t.Helper()
	resp, err := http.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]int64
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTaskExtensionForm: against a 2026-07-28 server that advertises
// io.modelcontextprotocol/tasks, the bridge declares the extension, gets
// a task, relays its stage, asks the XMPP caller the task's question
// (inputRequests) and answers it with tasks/update, and completes with
// the result from tasks/get; a tool the server runs synchronously on the
// same server still completes; an XMPP cancellation reaches the task.
func TestTaskExtensionForm(t *testing.T) {
	t.Parallel()
	url, base := refTaskServer(t)
	s := start(t, Options{JID: testJID, URL: url}, nil)
	if got := s.b.current().state.protocolVersion; got != "2026-07-28" {
		t.Fatalf("negotiated %q", got)
	}
	r := newFakeRun()
	r.Answer = func(req tasks.InputRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"year":1999}`), nil
	}
	s.b.Execute(context.Background(), tasks.Call{TaskID: "t-ext", Tool: "research", Arguments: json.RawMessage(`{"topic":"tides"}`), Endpoint: testJID}, r)
	r.Wait(t, 60*time.Second)
	res, fail, reason, updates := r.Snapshot()
	if res == nil {
		t.Fatalf("want completed, got %+v %q", fail, reason)
	}
	if got := textOf(t, res); got != "Research report: tides in 1999" {
		t.Fatalf("result %q", got)
	}
	if len(r.Inputs) != 1 || !strings.Contains(r.Inputs[0].Question, "Which year") {
		t.Fatalf("questions %+v", r.Inputs)
	}
	var msgs []string
	for _, u := range updates {
		msgs = append(msgs, u.Message)
	}
	t.Logf("progress: %q", msgs)
	if st := refStats(t, base); st["runs"] != 1 || st["updates"] != 1 || st["unknown"] != 0 {
		t.Fatalf("server stats %v", st)
	}
	if got := textOf(t, s.exec(t, "echo", `{"message":"plain"}`, nil).Result); got != "Echo: plain" {
		t.Errorf("synchronous tool on the same server = %q", got)
	}
	// A synchronous call's progress on the answer's stream is relayed.
	cr := s.exec(t, "count", `{}`, nil)
	if got := textOf(t, cr.Result); got != "counted" {
		t.Errorf("count = %q", got)
	}
	if _, _, _, ups := cr.Snapshot(); len(ups) != 3 || ups[2].Message != "step 3" {
		t.Errorf("progress of a synchronous call: %+v", ups)
	}
	// Cancel while the task waits for its answer.
	c := newFakeRun()
	go func() {
		select {
		case <-c.InputCh:
			close(c.CancelReq)
		case <-time.After(30 * time.Second):
		}
	}()
	s.b.Execute(context.Background(), tasks.Call{TaskID: "t-ext-c", Tool: "research", Arguments: json.RawMessage(`{"topic":"cancelled"}`), Endpoint: testJID}, c)
	c.Wait(t, 60*time.Second)
	if _, fail, reason, _ := c.Snapshot(); reason == "" || !strings.Contains(reason, "tasks/cancel") {
		t.Fatalf("cancel: failure %+v reason %q", fail, reason)
	}
	if st := refStats(t, base); st["cancels"] != 1 {
		t.Fatalf("server stats after cancel %v", st)
	}
}
