package mcpbridge

// MCP Tasks against the real server-everything: simulate-research-query
// (execution.taskSupport "required") runs as a task over stdio and over
// streamable HTTP (a separate process), its stages become progress, its
// question arrives with related-task metadata and is attributed by it,
// also with several ambiguous calls at once.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentgw/agentgw/tasks"
)

// everythingHTTPProcess starts server-everything in streamable HTTP mode
// as a process of its own and returns its URL.
func everythingHTTPProcess(t *testing.T) string {
	t.Helper()
	cmd := everythingCmd(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := exec.Command(cmd[0], cmd[1], "streamableHttp")
	c.Dir = filepath.Dir(cmd[1])
	c.Env = append(c.Environ(), "PORT="+strconv.Itoa(port))
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		var once sync.Once
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				once.Do(func() { close(up) })
			}
		}
	}()
	select {
	case <-up:
	case <-time.After(60 * time.Second):
		t.Fatal("server-everything streamableHttp did not listen within 60 s")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

func research(t *testing.T, s *started, id, args string, r *fakeRun) *fakeRun {
	t.Helper()
	s.b.Execute(context.Background(), tasks.Call{TaskID: id, Tool: "simulate-research-query", Arguments: json.RawMessage(args), Endpoint: testJID}, r)
	r.Wait(t, 60*time.Second)
	return r
}

func checkResearch(t *testing.T, r *fakeRun, want string) {
	t.Helper()
	res, fail, reason, updates := r.Snapshot()
	if res == nil {
		t.Fatalf("want completed, got failure %+v cancel %q", fail, reason)
	}
	text := textOf(t, res)
	if !strings.Contains(text, "Research Report: "+want) {
		t.Fatalf("result does not report %q: %.200s", want, text)
	}
	var msgs []string
	for _, u := range updates {
		msgs = append(msgs, u.Message)
	}
	if !strings.Contains(strings.Join(msgs, "|"), "Gathering sources") {
		t.Errorf("no stage reached the task as progress: %q", msgs)
	}
}

func TestTaskResearchStdio(t *testing.T) {
	t.Parallel()
	s := start(t, stdioAgent(everythingCmd(t)), nil)
	checkResearch(t, research(t, s, "t-stdio", `{"topic":"tides"}`, newFakeRun()), "tides")
	// The status notifications of tasks that ended are late, not foreign.
	if strings.Contains(s.logs.String(), "did not create") {
		t.Errorf("an ordinary task was taken for a foreign one:\n%s", s.logs.String())
	}
	// Over stdio the questions reach the SDK's elicitation handler, which
	// attributes them by related-task.
	concurrentQuestions(t, s)
}

func concurrentQuestions(t *testing.T, s *started) {
	t.Helper()
	choices := []string{"technical", "historical", "current"}
	var wg sync.WaitGroup
	runs := make([]*fakeRun, len(choices))
	for i, c := range choices {
		r := newFakeRun()
		r.Answer = func(req tasks.InputRequest) (json.RawMessage, error) {
			return json.RawMessage(`{"interpretation":"` + c + `"}`), nil
		}
		runs[i] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			research(t, s, "t-amb-"+c, `{"topic":"topic-`+c+`","ambiguous":true}`, r)
		}()
	}
	wg.Wait()
	for i, c := range choices {
		r := runs[i]
		if len(r.Inputs) != 1 || !strings.Contains(r.Inputs[0].Question, "topic-"+c) {
			t.Errorf("call %s: questions %+v", c, r.Inputs)
		}
		checkResearch(t, r, "topic-"+c+" ("+c+")")
	}
}

func TestTaskResearchHTTPConcurrentQuestions(t *testing.T) {
	t.Parallel()
	url := everythingHTTPProcess(t)
	s := start(t, Options{JID: testJID, URL: url}, nil)
	checkResearch(t, research(t, s, "t-http", `{"topic":"tides"}`, newFakeRun()), "tides")

	// Three ambiguous calls at once, each answered with its own choice:
	// every question reaches its own call (related-task), every answer
	// its own task.
	concurrentQuestions(t, s)
}

// answered reports whether the bridge sent a request of method, and the
// server answered it with a result containing want.
func answered(frames []frame, method, want string) bool {
	ids := map[string]bool{}
	for _, f := range frames {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(f.data, &m) != nil {
			continue
		}
		if f.out && m.Method == method {
			ids[string(m.ID)] = true
		}
		if !f.out && m.Method == "" && ids[string(m.ID)] && strings.Contains(string(m.Result), want) {
			return true
		}
	}
	return false
}

// TestTaskCancelAndDeadlineStdio: an XMPP cancellation and a passed
// deadline reach server-everything's task as tasks/cancel, which the server
// acknowledges (status cancelled).
func TestTaskCancelAndDeadlineStdio(t *testing.T) {
	t.Parallel()
	s := start(t, stdioAgent(everythingCmd(t)), nil)
	r := newFakeRun()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.b.Execute(context.Background(), tasks.Call{TaskID: "t-cancel", Tool: "simulate-research-query", Arguments: json.RawMessage(`{"topic":"tides"}`), Endpoint: testJID}, r)
	}()
	select {
	case <-r.FirstProgress:
	case <-time.After(60 * time.Second):
		t.Fatal("no progress")
	}
	close(r.CancelReq)
	r.Wait(t, 30*time.Second)
	<-done
	if !strings.Contains(r.CancelReason, "tasks/cancel") || strings.Contains(r.CancelReason, "could not") {
		t.Fatalf("want cancelled with the server told, got %s %q", r.Outcome(), r.CancelReason)
	}
	if !answered(s.framesCopy(), "tasks/cancel", `"cancelled"`) {
		t.Error("no tasks/cancel answered with status cancelled on the wire")
	}

	r = newFakeRun()
	s.b.Execute(context.Background(), tasks.Call{TaskID: "t-deadline", Tool: "simulate-research-query", Arguments: json.RawMessage(`{"topic":"tides"}`), Endpoint: testJID, Deadline: time.Now().Add(1500 * time.Millisecond)}, r)
	r.Wait(t, 30*time.Second)
	_, fail, _, _ := r.Snapshot()
	if fail == nil || fail.Code != "deadline-expired" {
		t.Fatalf("want deadline-expired, got %s %+v", r.Outcome(), fail)
	}
	n := 0
	for _, f := range s.framesCopy() {
		if f.out && strings.Contains(string(f.data), `"tasks/cancel"`) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d tasks/cancel requests sent, want 2 (cancel, deadline)", n)
	}
}

// TestTaskStdioServerDies: a stdio server that dies mid-task fails its
// task unavailable (retryable) at once, not after polls time out.
func TestTaskStdioServerDies(t *testing.T) {
	t.Parallel()
	s := start(t, stdioAgent(everythingCmd(t)), nil)
	r := newFakeRun()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.b.Execute(context.Background(), tasks.Call{TaskID: "t-die", Tool: "simulate-research-query", Arguments: json.RawMessage(`{"topic":"tides"}`), Endpoint: testJID}, r)
	}()
	select {
	case <-r.FirstProgress:
	case <-time.After(60 * time.Second):
		t.Fatal("no progress")
	}
	killed := time.Now()
	if err := syscall.Kill(-s.b.current().proc.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.Wait(t, 30*time.Second)
	<-done
	_, fail, _, _ := r.Snapshot()
	if fail == nil || fail.Code != "unavailable" || !fail.Retryable {
		t.Fatalf("want unavailable (retryable), got %s %+v", r.Outcome(), fail)
	}
	if d := time.Since(killed); d > 5*time.Second {
		t.Errorf("the task failed %v after the server died", d)
	}
	t.Logf("stdio server killed mid-task: %s after %v", fail.Message, time.Since(killed).Round(time.Millisecond))
}
