package mcpbridge

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
)

// The session pool with a real go-sdk server in this process: at most
// MaxSessions sessions are opened, each runs one call, and a call that
// finds them all busy waits, bounded by its deadline and its cancellation;
// once a session is free again it runs.
func TestPoolBoundedAndWaits(t *testing.T) {
	t.Parallel()
	var (
		connects atomic.Int32
		entered  = make(chan struct{}, 8)
		release  = make(chan struct{})
	)
	transport := func(ctx context.Context) (mcp.Transport, error) {
		connects.Add(1)
		return poolServer(ctx, oldProtocol, entered, release)
	}
	s := start(t, Options{JID: testJID, Transport: transport, MaxSessions: 2}, nil)
	call := func(r *fakeRun, deadline time.Time) {
		go s.b.Execute(context.Background(), tasks.Call{TaskID: "t", Tool: "hold", Arguments: json.RawMessage(`{}`), Endpoint: testJID, Deadline: deadline}, r)
	}
	busy := []*fakeRun{newFakeRun(), newFakeRun()}
	for _, r := range busy {
		call(r, time.Time{})
	}
	for range busy {
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the two calls did not both reach the server")
		}
	}

	late := newFakeRun()
	call(late, time.Now().Add(time.Second))
	late.Wait(t, 30*time.Second)
	if _, f, _, _ := late.Snapshot(); f == nil || f.Code != agentproto.CodeDeadlineExpired || !strings.Contains(f.Message, "waited for a free MCP server session") {
		t.Errorf("a call past its deadline while every session is busy: %s", late.Outcome())
	}
	cancelled := newFakeRun()
	call(cancelled, time.Time{})
	time.Sleep(200 * time.Millisecond)
	close(cancelled.CancelReq)
	cancelled.Wait(t, 30*time.Second)
	if _, _, reason, _ := cancelled.Snapshot(); !strings.Contains(reason, "waited for a free MCP server session") {
		t.Errorf("a call cancelled while waiting for a session: %s", cancelled.Outcome())
	}

	waiting := newFakeRun()
	call(waiting, time.Time{})
	select {
	case <-entered:
		t.Fatal("a third call reached the server while both sessions were busy")
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	for _, r := range append(busy, waiting) {
		r.Wait(t, 30*time.Second)
		if res, _, _, _ := r.Snapshot(); res == nil || !strings.Contains(string(res.Content), "held") {
			t.Errorf("call: %s", r.Outcome())
		}
	}
	if n := connects.Load(); n != 2 {
		t.Errorf("%d sessions connected, want 2 (max_sessions)", n)
	}
}

// oldProtocol is the newest MCP revision before 2026-07-28: elicitation/create
// arrives without anything naming its call.
var oldProtocol = []string{"2025-11-25"}

// poolServer is a go-sdk server on an in-memory transport, speaking the
// given protocol versions (nil: the SDK's, 2026-07-28 first). Tool "hold"
// signals entered and returns once release is closed; tool "ask" elicits
// (old protocol only) and returns the name it was given.
func poolServer(ctx context.Context, versions []string, entered chan<- struct{}, release <-chan struct{}) (mcp.Transport, error) {
	server := mcp.NewServer(&mcp.Implementation{Name: "pool", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	server.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "held"}}}, nil
		})
	server.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return nil, err
			}
			name, _ := res.Content["name"].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + " " + name}}}, nil
		})
	serverSide, clientSide := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, serverSide, nil); err != nil {
		return nil, err
	}
	return clientSide, nil
}

// A further session is opened by a call but outlives it: a later call's
// question on it must reach the later call, never the one that opened it
// (the SDK hands the connect context's values to every request the server
// sends on the session).
func TestPoolReusedSessionAttributesToItsCall(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 8), make(chan struct{})
	defer close(release)
	s := start(t, Options{JID: testJID, MaxSessions: 2, Transport: func(ctx context.Context) (mcp.Transport, error) {
		return poolServer(ctx, oldProtocol, entered, release)
	}}, nil)
	hold := newFakeRun()
	go s.b.Execute(context.Background(), tasks.Call{TaskID: "h", Tool: "hold", Arguments: json.RawMessage(`{}`), Endpoint: testJID}, hold)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("hold did not reach the server")
	}
	for _, name := range []string{"opener", "second", "third"} {
		r := newFakeRun()
		r.Answer = func(tasks.InputRequest) (json.RawMessage, error) {
			return json.RawMessage(`{"name":"` + name + `"}`), nil
		}
		s.exec(t, "ask", `{}`, r)
		res, _, _, _ := r.Snapshot()
		if res == nil || !strings.Contains(string(res.Content), "accept "+name) || len(r.Inputs) != 1 {
			t.Errorf("%s: %d input requests, %s", name, len(r.Inputs), r.Outcome())
		}
	}
}

// A server speaking 2026-07-28 asks for input inside the call: its calls
// share the supervised session, however many run at once.
func TestPoolMultiRoundTripShares(t *testing.T) {
	t.Parallel()
	var connects atomic.Int32
	entered, release := make(chan struct{}, 8), make(chan struct{})
	s := start(t, Options{JID: testJID, MaxSessions: 1, Transport: func(ctx context.Context) (mcp.Transport, error) {
		connects.Add(1)
		return poolServer(ctx, nil, entered, release)
	}}, nil)
	var wg sync.WaitGroup
	runs := []*fakeRun{newFakeRun(), newFakeRun(), newFakeRun()}
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.b.Execute(context.Background(), tasks.Call{TaskID: "m", Tool: "hold", Arguments: json.RawMessage(`{}`), Endpoint: testJID}, r)
		}()
	}
	for range runs {
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the calls did not all reach the one session")
		}
	}
	close(release)
	wg.Wait()
	if n := connects.Load(); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
}
