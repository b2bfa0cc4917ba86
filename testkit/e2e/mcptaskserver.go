package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TaskServer is testdata/mcptaskserver running as a process of its own: an
// MCP server of the 2026-07-28 Tasks extension written from SEP-2663.
type TaskServer struct {
	URL  string // the MCP endpoint
	base string
	Cmd  *exec.Cmd
}

var (
	taskSrvOnce sync.Once
	taskSrvPath string
	taskSrvErr  error
)

// MCPTaskServer builds (once) and starts the reference Tasks-extension
// server; it stops with the test.
func MCPTaskServer(t testing.TB) *TaskServer {
	t.Helper()
	taskSrvOnce.Do(func() { taskSrvPath, taskSrvErr = buildCached("./testdata/mcptaskserver", "mcptaskserver") })
	if taskSrvErr != nil {
		t.Fatal(taskSrvErr)
	}
	cmd := exec.Command(taskSrvPath, "-addr", "127.0.0.1:0")
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
				select {
				case urls <- u:
				default:
				}
			}
		}
	}()
	select {
	case u := <-urls:
		return &TaskServer{URL: u, base: strings.TrimSuffix(u, "/mcp"), Cmd: cmd}
	case <-time.After(60 * time.Second):
		t.Fatal("mcptaskserver printed no address")
		return nil
	}
}

// Stats are the server's counters: tool runs (tasks started), cancels,
// updates, requests naming unknown tasks.
func (s *TaskServer) Stats(t testing.TB) map[string]int64 {
	t.Helper()
	resp, err := http.Get(s.base + "/stats")
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

// Release lets held research tasks finish.
func (s *TaskServer) Release(t testing.TB) {
	t.Helper()
	resp, err := http.Post(s.base+"/release", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
