package mcpbridge

import (
	"context"
	"encoding/json"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/tasks"
)

// nullRun accepts every report; it measures the bridge, not an engine.
type nullRun struct{ done chan struct{} }

func (nullRun) Progress(tasks.Progress) error { return nil }
func (nullRun) RequestInput(context.Context, tasks.InputRequest) (json.RawMessage, error) {
	return nil, tasks.ErrSettled
}
func (r nullRun) Complete(tasks.ToolResult) error  { return nil }
func (r nullRun) Fail(tasks.Failure) error         { return nil }
func (r nullRun) Cancelled(string) error           { return nil }
func (r nullRun) CancelRequested() <-chan struct{} { return r.done }

// BenchmarkEchoBackend and BenchmarkEchoDirect call server-everything's echo
// through the bridge and through a plain go-sdk client; compare their ns/op.
func BenchmarkEchoBackend(b *testing.B) {
	log, _ := testLogger(b)
	be, err := New(Options{JID: testJID, Command: everythingCmd(b), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go be.Start(ctx)
	for be.current() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	call := tasks.Call{TaskID: "bench", Tool: "echo", Arguments: json.RawMessage(`{"message":"hello"}`)}
	run := nullRun{done: make(chan struct{})}
	b.ResetTimer()
	cpu0 := selfCPU()
	for b.Loop() {
		be.Execute(ctx, call, run)
	}
	// This process's CPU (the bridge, its SDK client and GC; node is a
	// process of its own) per call.
	b.ReportMetric(float64(selfCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/call")
}

// selfCPU is the user+system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkEchoDirect(b *testing.B) {
	cmd := everythingCmd(b)
	c := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(cmd[0], cmd[1:]...)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	b.ResetTimer()
	for b.Loop() {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}}); err != nil {
			b.Fatal(err)
		}
	}
}
