package mcpbridge

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/testkit"
)

// TestOversizeStdioFrame: a real stdio server (the TS SDK) answers one
// call with a result over the 16 MiB frame limit. That call fails
// agentgw:result-too-large; the endpoint does not go unavailable, the
// same server process answers the next call.
func TestOversizeStdioFrame(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	script := filepath.Join(root, "testdata", "mcpbridge", "huge.mjs")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(root, "node_modules", "@modelcontextprotocol", "sdk")); err != nil || serr != nil {
		testkit.Unavailable(t, "node or the MCP TS SDK missing (run npm install at the module root): %v %v", err, serr)
	}
	s := start(t, stdioAgent([]string{node, script}), nil)
	pid := s.b.current().proc.pid
	r := s.exec(t, "huge", `{}`, nil)
	if r.Failure == nil || r.Failure.Code != agentproto.CodeResultTooLarge || r.Failure.Retryable {
		t.Fatalf("oversize result: %s", r.Outcome())
	}
	t.Logf("oversize: %s: %s", r.Failure.Code, r.Failure.Message)
	select {
	case up := <-s.avail.ch:
		t.Fatalf("availability changed (up=%v) after an oversize frame", up)
	default:
	}
	if got := textOf(t, s.exec(t, "echo", `{"message":"after"}`, nil).Result); got != "Echo: after" {
		t.Errorf("echo after the oversize frame = %q", got)
	}
	if s.b.current().proc.pid != pid {
		t.Error("the server was restarted")
	}
	select {
	case up := <-s.avail.ch:
		t.Fatalf("availability changed (up=%v)", up)
	case <-time.After(100 * time.Millisecond):
	}
}
