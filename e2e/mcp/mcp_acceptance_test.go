package mcp

// Acceptance tests of the MCP backend, end to end through a real Prosody:
// an XMPP caller (agentclient) talks to the gateway, which bridges the real
// @modelcontextprotocol/server-everything over stdio, or a streamable-HTTP
// go-sdk server started here.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// accResult is the result member of a completed task's payload.
type accResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent"`
	IsError           *bool             `json:"isError"`
}

func accCompleted(t *testing.T, what string, out *agentclient.Outcome, err error) accResult {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if out.State != "completed" {
		t.Fatalf("%s: state %s, payload %s", what, out.State, out.Payload)
	}
	var w struct {
		Result *accResult `json:"result"`
	}
	if err := json.Unmarshal(out.Payload, &w); err != nil || w.Result == nil {
		t.Fatalf("%s: payload %s has no result object (%v)", what, out.Payload, err)
	}
	return *w.Result
}

// accText joins the text content items.
func accText(t *testing.T, r accResult) string {
	t.Helper()
	var parts []string
	for _, c := range r.Content {
		var it struct{ Type, Text string }
		if err := json.Unmarshal(c, &it); err != nil {
			t.Fatalf("content item %s: %v", c, err)
		}
		if it.Type == "text" {
			parts = append(parts, it.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func accParse(t *testing.T, data []byte) any {
	t.Helper()
	v, err := ijson.Parse(data, ijson.Limits{})
	if err != nil {
		t.Fatalf("not I-JSON: %v: %s", err, data)
	}
	return v
}

func accCanon(t *testing.T, data []byte) []byte {
	t.Helper()
	c, _, err := ijson.Canonicalize(data, ijson.Limits{MaxBytes: 8 << 20})
	if err != nil {
		t.Fatalf("canonicalize: %v: %s", err, data)
	}
	return c
}

// TestMCPAcceptanceStructuredOutput: get-structured-content completes with
// structuredContent, which the outputSchema published in the manifest (and
// served by schema-request) validates on the caller's side.
func TestMCPAcceptanceStructuredOutput(t *testing.T) {
	t.Parallel()
	e2e.AccEverything(t)
	_, c, _, ep := e2e.AccStart(t, "everything", func(d string) string { return e2e.EverythingTOML(t, "everything", d) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	m, err := c.GetManifest(ctx, ep, "")
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := m.Tool("get-structured-content")
	if !ok || len(tool.OutputSchema) == 0 {
		t.Fatalf("manifest tool get-structured-content missing or without outputSchema: %+v", tool)
	}
	served, err := c.GetSchema(ctx, ep, "get-structured-content", m.Version, "output", m.Hash)
	if err != nil {
		t.Fatalf("output schema-request: %v", err)
	}
	if !bytes.Equal(accCanon(t, served.JSON), accCanon(t, tool.OutputSchema)) {
		t.Errorf("served output schema %s differs from the manifest's %s", served.JSON, tool.OutputSchema)
	}
	out, err := schema.Compile(tool.OutputSchema)
	if err != nil {
		t.Fatalf("manifest outputSchema does not compile: %v\n%s", err, tool.OutputSchema)
	}
	t.Logf("outputSchema: %s", tool.OutputSchema)

	for _, tc := range []struct{ city, want string }{
		{"Chicago", `{"conditions":"Light rain / drizzle","humidity":82,"temperature":36}`},
		{"Los Angeles", `{"conditions":"Sunny / Clear","humidity":48,"temperature":73}`},
	} {
		args, _ := json.Marshal(map[string]string{"location": tc.city})
		o, err := c.Call(ctx, ep, "get-structured-content", args, agentclient.CallOptions{})
		r := accCompleted(t, "get-structured-content "+tc.city, o, err)
		if len(r.StructuredContent) == 0 {
			t.Fatalf("%s: no structuredContent in %s", tc.city, o.Payload)
		}
		if got := accCanon(t, r.StructuredContent); string(got) != tc.want {
			t.Errorf("%s: structuredContent %s, want %s", tc.city, got, tc.want)
		}
		if err := out.Validate(accParse(t, r.StructuredContent)); err != nil {
			t.Errorf("%s: structuredContent %s fails the manifest outputSchema: %v", tc.city, r.StructuredContent, err)
		}
		// The backward-compatible text block carries the same object.
		if got := accCanon(t, []byte(accText(t, r))); string(got) != tc.want {
			t.Errorf("%s: text block %s, want %s", tc.city, got, tc.want)
		}
		t.Logf("%s: completed rev %d, structuredContent %s validates", tc.city, o.Revision, r.StructuredContent)
	}
	// The validation can fail: a wrong type and a missing member are refused.
	for _, bad := range []string{`{"temperature":"hot","conditions":"x","humidity":1}`, `{"temperature":1,"humidity":1}`} {
		if err := out.Validate(accParse(t, []byte(bad))); err == nil {
			t.Errorf("outputSchema accepted %s", bad)
		}
	}
}

// TestMCPAcceptanceElicitation: trigger-elicitation-request raises
// input_required carrying the requested schema, provide-input answers it,
// and the server's result reflects the answer.
func TestMCPAcceptanceElicitation(t *testing.T) {
	t.Parallel()
	e2e.AccEverything(t)
	_, c, _, ep := e2e.AccStart(t, "everything", func(d string) string { return e2e.EverythingTOML(t, "everything", d) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	m, err := c.GetManifest(ctx, ep, "")
	if err != nil {
		t.Fatal(err)
	}
	if tool, ok := m.Tool("trigger-elicitation-request"); !ok || tool.Ext == nil || !tool.Ext.SupportsInput {
		t.Fatalf("trigger-elicitation-request missing or without supportsInput: %+v", tool)
	}
	answer := json.RawMessage(`{"name":"Ada Lovelace","check":true,"integer":7,"email":"ada@example.org"}`)
	var (
		mu       sync.Mutex
		states   []string
		requests []agentclient.InputRequest
	)
	o, err := c.Call(ctx, ep, "trigger-elicitation-request", json.RawMessage(`{}`), agentclient.CallOptions{
		OnStatus: func(s agentproto.State) { mu.Lock(); states = append(states, string(s)); mu.Unlock() },
		OnInput: func(_ context.Context, req agentclient.InputRequest) (json.RawMessage, error) {
			mu.Lock()
			requests = append(requests, req)
			mu.Unlock()
			// The caller validates its answer against the inputSchema
			// it was given.
			s, err := schema.Compile(req.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("inputSchema does not compile: %w", err)
			}
			if err := s.Validate(accParse(t, answer)); err != nil {
				return nil, fmt.Errorf("answer fails the inputSchema: %w", err)
			}
			if err := s.Validate(accParse(t, []byte(`{"check":true}`))); err == nil {
				return nil, errors.New("inputSchema accepts an answer without the required name")
			}
			return answer, nil
		},
	})
	r := accCompleted(t, "trigger-elicitation-request", o, err)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(states, "input_required") {
		t.Errorf("no input_required event; states seen %v", states)
	}
	if len(requests) != 1 {
		t.Fatalf("%d input requests, want 1", len(requests))
	}
	req := requests[0]
	if req.Question != "Please provide inputs for the following fields:" {
		t.Errorf("question %q", req.Question)
	}
	var sch struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(req.InputSchema, &sch); err != nil {
		t.Fatalf("inputSchema %s: %v", req.InputSchema, err)
	}
	// The server's requestedSchema (dist/tools/trigger-elicitation-request.js).
	wantProps := []string{"birthdate", "check", "email", "firstLine", "homepage", "integer", "legacyTitledEnum", "name", "number",
		"titledMultipleSelectEnum", "titledSingleSelectEnum", "untitledMultipleSelectEnum", "untitledSingleSelectEnum"}
	var gotProps []string
	for k := range sch.Properties {
		gotProps = append(gotProps, k)
	}
	slices.Sort(gotProps)
	if sch.Type != "object" || !slices.Equal(sch.Required, []string{"name"}) || !slices.Equal(gotProps, wantProps) {
		t.Errorf("inputSchema is not the requestedSchema: type %q required %v properties %v", sch.Type, sch.Required, gotProps)
	}
	if !bytes.Contains(sch.Properties["integer"], []byte(`"maximum":100`)) {
		t.Errorf("integer property lost its bounds: %s", sch.Properties["integer"])
	}
	text := accText(t, r)
	for _, want := range []string{"User provided the requested information", "Name: Ada Lovelace", "Agreed to terms: true",
		"Favorite Integer: 7", "Email: ada@example.org", `"action": "accept"`} {
		if !strings.Contains(text, want) {
			t.Errorf("result lacks %q:\n%s", want, text)
		}
	}
	t.Logf("states %v; input request %s at rev %d; result:\n%s", states, req.RequestID, req.Revision, text)
}

// accFrame is one JSON-RPC message recorded by the tee wrapper.
type accFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		RequestID json.RawMessage `json:"requestId"`
		Token     json.RawMessage `json:"progressToken"`
		Meta      struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func accFrames(t *testing.T, path string) []accFrame {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []accFrame
	for _, line := range bytes.Split(data, []byte("\n")) {
		var f accFrame
		if len(bytes.TrimSpace(line)) > 0 && json.Unmarshal(line, &f) == nil {
			out = append(out, f)
		}
	}
	return out
}

// TestMCPAcceptanceCancel: a running trigger-long-running-operation is
// cancelled over XMPP at the task's current revision and ends cancelled.
// The server's stdin and stdout pass through tee (the configured command is
// a shell pipeline), so the test sees what the server itself received and
// sent: notifications/cancelled for the call's JSON-RPC id, and no response
// to the call even after the tool's loop ran out. No progress reaches the
// caller after the cancelled event.
func TestMCPAcceptanceCancel(t *testing.T) {
	t.Parallel()
	node, entry := e2e.AccEverything(t)
	trafficDir := t.TempDir()
	in, out := filepath.Join(trafficDir, "to-server.jsonl"), filepath.Join(trafficDir, "from-server.jsonl")
	for _, p := range []string{node, entry, in, out} {
		if strings.ContainsAny(p, `'"\$`+"`") {
			t.Skipf("path %q cannot be quoted for the shell wrapper", p)
		}
	}
	script := fmt.Sprintf("tee -a '%s' | '%s' '%s' stdio | tee -a '%s'", in, node, entry, out)
	_, c, _, ep := e2e.AccStart(t, "everything", func(d string) string {
		return fmt.Sprintf("\n[[agents]]\njid = %q\n[agents.mcp]\ncommand = [\"/bin/sh\", \"-c\", %q]\n", "everything@"+d, script)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const tool, steps = "trigger-long-running-operation", 10
	p, err := c.Pin(ctx, ep, tool)
	if err != nil {
		t.Fatal(err)
	}
	args, err := p.ValidateArguments(json.RawMessage(fmt.Sprintf(`{"duration":%d,"steps":%d}`, steps, steps)))
	if err != nil {
		t.Fatal(err)
	}
	acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: tool, Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	events, stop := c.Subscribe(ep, acc.TaskID)
	defer stop()
	next := func(timeout time.Duration) (agentclient.Event, bool) {
		select {
		case ev := <-events:
			return ev, true
		case <-time.After(timeout):
			return agentclient.Event{}, false
		}
	}
	for {
		ev, ok := next(30 * time.Second)
		if !ok {
			t.Fatal("no progress event within 30 s")
		}
		if ev.Type == "progress" {
			t.Logf("progress before cancelling: rev %d %s", ev.Revision, ev.Payload)
			break
		}
		if ev.Terminal() {
			t.Fatalf("task settled before cancelling: %s %s", ev.Type, ev.Payload)
		}
	}

	// Cancel at the current revision; progress may move it meanwhile.
	reason := "acceptance test cancels"
	var cancelRev int64
	for attempt := 0; ; attempt++ {
		st, err := c.State(ctx, ep, acc.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		cancelRev, err = c.Cancel(ctx, ep, acc.TaskID, st.Revision, &reason)
		if err == nil {
			t.Logf("cancel accepted at expected-revision %d (state %s): revision %d", st.Revision, st.State, cancelRev)
			break
		}
		if e2e.ErrCondition(err) != "conflict" || attempt == 10 {
			t.Fatalf("cancel at revision %d: %v", st.Revision, err)
		}
	}
	var terminal agentclient.Event
	for terminal.Type == "" {
		ev, ok := next(30 * time.Second)
		if !ok {
			t.Fatal("no terminal event within 30 s of the cancel")
		}
		if ev.Terminal() {
			terminal = ev
		}
	}
	if terminal.Type != "cancelled" {
		t.Fatalf("task ended %s %s, want cancelled", terminal.Type, terminal.Payload)
	}
	t.Logf("terminal event: %s rev %d %s", terminal.Type, terminal.Revision, terminal.Payload)
	res, err := c.Result(ctx, ep, acc.TaskID)
	if err != nil || res.State != "cancelled" {
		t.Fatalf("task-result: %+v %v", res, err)
	}

	// What the server received: the call and its cancellation.
	var callID, token json.RawMessage
	testkit.WaitFor(t, 10*time.Second, "notifications/cancelled on the server's stdin", func() bool {
		callID, token = nil, nil
		for _, f := range accFrames(t, in) {
			if f.Method == "tools/call" && f.Params.Name == tool {
				callID, token = f.ID, f.Params.Meta.Token
			}
			if f.Method == "notifications/cancelled" && callID != nil && bytes.Equal(f.Params.RequestID, callID) {
				return true
			}
		}
		return false
	})
	t.Logf("server stdin: tools/call id %s progressToken %s, then notifications/cancelled for requestId %s", callID, token, callID)
	progressFor := func() (n int, answered bool) {
		for _, f := range accFrames(t, out) {
			if f.Method == "notifications/progress" && bytes.Equal(f.Params.Token, token) {
				n++
			}
			if f.Method == "" && bytes.Equal(f.ID, callID) {
				answered = true
			}
		}
		return n, answered
	}
	atCancel, _ := progressFor()
	cancelSeen := time.Now()
	// Follow the server until its operation would have ended (steps
	// progress notifications, one a second, if it goes on regardless),
	// plus a margin for the response it would then send.
	var late []agentclient.Event
	for {
		n, _ := progressFor()
		if n >= steps || time.Since(cancelSeen) > time.Duration(steps+3)*time.Second {
			break
		}
		select {
		case ev := <-events:
			late = append(late, ev)
		case <-time.After(100 * time.Millisecond):
		}
	}
	margin := time.After(2 * time.Second)
drain:
	for {
		select {
		case ev := <-events:
			late = append(late, ev)
		case <-margin:
			break drain
		}
	}
	after, answered := progressFor()
	for _, ev := range late {
		if ev.Revision > terminal.Revision || ev.Type == "progress" {
			t.Errorf("event after the cancelled one reached the caller: %s rev %d %s", ev.Type, ev.Revision, ev.Payload)
		}
	}
	// The server acted on notifications/cancelled: it never answered the
	// call, although its handler ran to the end.
	if answered {
		t.Error("the server answered the cancelled tools/call: it did not act on notifications/cancelled")
	}
	switch {
	case after >= steps:
		// server-everything's long-running tool sends progress through
		// server.server.notification, which its SDK does not suppress
		// once the request is aborted (extra.sendNotification would).
		t.Logf("SERVER KEPT SENDING PROGRESS: %d progress notifications for the request on its stdout when notifications/cancelled reached its stdin, all %d by the end of its loop; no response followed (suppressed after the cancellation); none of it reached the caller (%d late events)", atCancel, after, len(late))
	case after > atCancel:
		t.Logf("server sent %d more progress notifications after the cancellation and stopped at %d of %d; no response", after-atCancel, after, steps)
	default:
		t.Logf("server stopped: %d progress notifications for the request at the cancellation, still %d after %d s; no response", atCancel, after, steps+3)
	}

	// The session survives the cancellation.
	o, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"after cancel"}`), agentclient.CallOptions{})
	if r := accCompleted(t, "echo after cancel", o, err); !strings.Contains(accText(t, r), "after cancel") {
		t.Errorf("echo after cancel: %s", o.Payload)
	}
}

// accRawCall runs one tools/call against its own server-everything process
// over raw newline-delimited JSON-RPC and returns the result member exactly
// as the server wrote it.
func accRawCall(t *testing.T, node, entry, tool string, args string) json.RawMessage {
	t.Helper()
	cmd := exec.Command(node, entry, "stdio")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := make(chan []byte, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	deadline := time.After(60 * time.Second)
	await := func(id string) json.RawMessage {
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("server-everything closed stdout before answering id %s", id)
				}
				var f accFrame
				if json.Unmarshal(line, &f) == nil && string(f.ID) == id && f.Method == "" {
					if f.Result == nil {
						t.Fatalf("id %s failed: %s", id, line)
					}
					return f.Result
				}
			case <-deadline:
				t.Fatalf("server-everything did not answer id %s", id)
			}
		}
	}
	send := func(s string) {
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	await("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args))
	return await("2")
}

// TestMCPAcceptanceBinaryContent: get-tiny-image's content through XMPP is
// identical to what the server returns to a direct MCP client: the base64
// data and mimeType strings exactly, and every content item as JSON (the
// gateway emits RFC 8785 canonical JSON, so items are compared in canonical
// form against the server's raw bytes).
func TestMCPAcceptanceBinaryContent(t *testing.T) {
	t.Parallel()
	node, entry := e2e.AccEverything(t)
	_, c, _, ep := e2e.AccStart(t, "everything", func(d string) string { return e2e.EverythingTOML(t, "everything", d) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	o, err := c.Call(ctx, ep, "get-tiny-image", json.RawMessage(`{}`), agentclient.CallOptions{})
	r := accCompleted(t, "get-tiny-image", o, err)
	var xmppImage struct{ Type, Data, MimeType string }
	var xmppItem json.RawMessage
	for _, it := range r.Content {
		var v struct{ Type, Data, MimeType string }
		json.Unmarshal(it, &v)
		if v.Type == "image" {
			xmppImage, xmppItem = v, it
		}
	}
	if xmppItem == nil {
		t.Fatalf("no image item in %s", o.Payload)
	}

	// A direct go-sdk client on its own server process.
	dc := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	cs, err := dc.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(node, entry, "stdio")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	dres, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get-tiny-image", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var direct *mcp.ImageContent
	for _, ct := range dres.Content {
		if ic, ok := ct.(*mcp.ImageContent); ok {
			direct = ic
		}
	}
	if direct == nil || len(direct.Data) == 0 {
		t.Fatal("the direct call returned no image")
	}
	if xmppImage.MimeType != direct.MIMEType || xmppImage.Data != base64.StdEncoding.EncodeToString(direct.Data) {
		t.Errorf("go-sdk direct: image differs: mimeType %q vs %q, data %d vs %d base64 chars", xmppImage.MimeType, direct.MIMEType, len(xmppImage.Data), len(base64.StdEncoding.EncodeToString(direct.Data)))
	}
	if len(r.Content) != len(dres.Content) {
		t.Errorf("%d content items through XMPP, %d direct", len(r.Content), len(dres.Content))
	}
	decoded, err := base64.StdEncoding.DecodeString(xmppImage.Data)
	if err != nil || !bytes.Equal(decoded, direct.Data) || !bytes.HasPrefix(decoded, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("decoded image differs or is no PNG (%v)", err)
	}

	// The server's own bytes, without any SDK decoding.
	raw := accRawCall(t, node, entry, "get-tiny-image", `{}`)
	var rawRes struct {
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &rawRes); err != nil {
		t.Fatal(err)
	}
	if len(rawRes.Content) != len(r.Content) {
		t.Fatalf("%d content items through XMPP, %d raw", len(r.Content), len(rawRes.Content))
	}
	for i := range rawRes.Content {
		want := accCanon(t, rawRes.Content[i])
		if !bytes.Equal(r.Content[i], want) {
			t.Errorf("content item %d through XMPP:\n%s\nserver (canonical):\n%s", i, r.Content[i], want)
		}
		if !bytes.Equal(r.Content[i], rawRes.Content[i]) {
			t.Logf("content item %d: XMPP bytes differ from the server's raw bytes only by canonical form (server: %.60s...)", i, rawRes.Content[i])
		}
	}
	if !bytes.Equal(accCanon(t, mustMarshal(t, r.Content)), accCanon(t, mustMarshal(t, rawRes.Content))) {
		t.Error("content arrays differ")
	}
	var rawImage struct{ Data, MimeType string }
	for _, it := range rawRes.Content {
		var v struct{ Type, Data, MimeType string }
		json.Unmarshal(it, &v)
		if v.Type == "image" {
			rawImage.Data, rawImage.MimeType = v.Data, v.MimeType
		}
	}
	if rawImage.Data != xmppImage.Data || rawImage.MimeType != xmppImage.MimeType {
		t.Error("raw server image strings differ from the XMPP ones")
	}
	t.Logf("image: mimeType %s, %d base64 chars (%d bytes), identical to go-sdk direct and raw; XMPP item %d bytes canonical == server item canonical",
		xmppImage.MimeType, len(xmppImage.Data), len(decoded), len(xmppItem))
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// accChildren lists processes whose parent is ppid and whose command line
// contains match.
func accChildren(ppid int, match string) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(data[i+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(ppid) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), match) {
			out = append(out, pid)
		}
	}
	return out
}

// presenceLog records presence stanzas from one bare JID.
type presenceLog struct {
	mu    sync.Mutex
	from  string
	types []string // "" is available
	all   []string // every presence stanza, for failure messages
}

func (p *presenceLog) add(el *xmltree.Element) {
	p.mu.Lock()
	p.all = append(p.all, el.String())
	p.mu.Unlock()
	f, err := jid.Parse(el.AttrValue("from"))
	if err != nil || f.Bare().String() != p.from {
		return
	}
	p.mu.Lock()
	p.types = append(p.types, el.AttrValue("type"))
	p.mu.Unlock()
}

func (p *presenceLog) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.types...)
}

func (p *presenceLog) wait(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("timed out after %v waiting for %s; presence received:\n%s", timeout, what, strings.Join(p.all, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// index of the first typ at or after from, or -1.
func (p *presenceLog) index(typ string, from int) int {
	s := p.snapshot()
	for i := from; i < len(s); i++ {
		if s[i] == typ {
			return i
		}
	}
	return -1
}

// TestMCPAcceptanceCrash: SIGKILL of the MCP server during a long-running
// call fails the task with the reserved code unavailable (retryable); a presence
// subscriber sees the endpoint go unavailable and come back; the bridge
// restarts the server and a new call completes.
func TestMCPAcceptanceCrash(t *testing.T) {
	t.Parallel()
	node, real := e2e.AccEverything(t)
	// The other tests of this package run beside this one in the same
	// process and start server-everything children of their own (two of
	// them at -parallel 4 made "the one new child" ambiguous). This
	// gateway's server runs from a link of its own, so its command line
	// names it alone; node resolves the link to the real module.
	entry := filepath.Join(t.TempDir(), "everything-crash-test.js")
	if err := os.Symlink(real, entry); err != nil {
		t.Fatal(err)
	}
	before := accChildren(os.Getpid(), entry)
	e, c, conn, ep := e2e.AccStart(t, "everything", func(d string) string {
		return fmt.Sprintf("\n[[agents]]\njid = %q\n[agents.mcp]\ncommand = [%q, %q, \"stdio\"]\n", "everything@"+d, node, entry)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	pres := &presenceLog{from: ep.String()}
	conn.OnPresence(pres.add)
	if err := conn.Send(ctx, xmltree.New("jabber:client", "presence", "type", "subscribe", "to", ep.String())); err != nil {
		t.Fatal(err)
	}
	// Prosody turns the endpoint's "subscribed" into a roster push; the
	// available presence that follows is delivered.
	pres.wait(t, 20*time.Second, "available presence from the endpoint", func() bool {
		return pres.index("", 0) >= 0
	})
	t.Logf("presence after subscribing: %q", pres.snapshot())

	// The server process: the gateway (this process) spawned it.
	var pid int
	testkit.WaitFor(t, 10*time.Second, "server-everything child process", func() bool {
		var fresh []int
		for _, p := range accChildren(os.Getpid(), entry) {
			if !slices.Contains(before, p) {
				fresh = append(fresh, p)
			}
		}
		if len(fresh) == 1 {
			pid = fresh[0]
			return true
		}
		return false
	})
	t.Logf("server-everything pid %d (parent %d, the in-process gateway)", pid, os.Getpid())

	const tool = "trigger-long-running-operation"
	p, err := c.Pin(ctx, ep, tool)
	if err != nil {
		t.Fatal(err)
	}
	args, _ := p.ValidateArguments(json.RawMessage(`{"duration":30,"steps":30}`))
	acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: tool, Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	progressed := make(chan struct{}, 1)
	var outcome *agentclient.Outcome
	followed := make(chan error, 1)
	go func() {
		var err error
		outcome, err = c.Follow(ctx, ep, acc, agentclient.CallOptions{OnProgress: func(agentclient.Progress) {
			select {
			case progressed <- struct{}{}:
			default:
			}
		}})
		followed <- err
	}()
	select {
	case <-progressed:
	case <-time.After(30 * time.Second):
		t.Fatal("no progress within 30 s")
	}
	mark := len(pres.snapshot())
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	t.Logf("kill -9 %d during the call (task %s)", pid, acc.TaskID)
	select {
	case err := <-followed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the task did not settle within 60 s of the kill")
	}
	var fail struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Retryable *bool  `json:"retryable"`
		} `json:"error"`
	}
	json.Unmarshal(outcome.Payload, &fail)
	if outcome.State != "failed" || fail.Error.Code != "unavailable" || fail.Error.Retryable == nil || !*fail.Error.Retryable {
		t.Fatalf("outcome %s %s, want failed unavailable retryable", outcome.State, outcome.Payload)
	}
	t.Logf("task %s: %s %s", acc.TaskID, outcome.State, outcome.Payload)

	pres.wait(t, 30*time.Second, "unavailable then available presence after the kill", func() bool {
		u := pres.index("unavailable", mark)
		return u >= 0 && pres.index("", u+1) >= 0
	})
	t.Logf("presence from %s: %q (kill after #%d)", ep, pres.snapshot(), mark)

	var newPID int
	testkit.WaitFor(t, 30*time.Second, "a restarted server-everything", func() bool {
		for _, p := range accChildren(os.Getpid(), entry) {
			if p != pid && !slices.Contains(before, p) {
				newPID = p
				return true
			}
		}
		return false
	})
	o, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"after the crash"}`), agentclient.CallOptions{})
	if r := accCompleted(t, "echo after the crash", o, err); !strings.Contains(accText(t, r), "after the crash") {
		t.Errorf("echo after the crash: %s", o.Payload)
	}
	if !strings.Contains(e.Log.String(), "MCP server went away; restarting") {
		t.Error("the gateway did not log the restart")
	}
	t.Logf("restarted server pid %d; echo completed", newPID)
}

// TestMCPAcceptanceHTTP: a streamable-HTTP MCP server requiring a bearer
// token, configured with headers_env, is called through XMPP; the token
// reaches the server and nothing else. To give the log check something to
// miss, a tool echoes the header it received back into its result, and a
// second endpoint is configured with a wrong token that the server refuses
// (which costs the gateway's 20 s wait for backends before it connects).
func TestMCPAcceptanceHTTP(t *testing.T) {
	b := make([]byte, 16)
	rand.Read(b)
	token := "acc-" + hex.EncodeToString(b)
	rand.Read(b)
	wrong := "accwrong-" + hex.EncodeToString(b)
	t.Setenv("AGENTGW_ACC_MCP_AUTH", "Bearer "+token)
	t.Setenv("AGENTGW_ACC_MCP_WRONG", "Bearer "+wrong)

	srv := mcp.NewServer(&mcp.Implementation{Name: "adder", Version: "1.0.0"}, nil)
	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	type addOut struct {
		Sum int `json:"sum"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Adds two integers."}, func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d + %d = %d", in.A, in.B, in.A+in.B)}}}, addOut{Sum: in.A + in.B}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "whoami", Description: "Returns the Authorization header it received.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			h := ""
			if req.Extra != nil {
				h = req.Extra.Header.Get("Authorization")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "seen: " + h}}}, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mu sync.Mutex
	seen := map[string]int{} // good, wrong, other
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "other"
		switch r.Header.Get("Authorization") {
		case "Bearer " + token:
			kind = "good"
		case "Bearer " + wrong:
			kind = "wrong"
		}
		mu.Lock()
		seen[kind]++
		mu.Unlock()
		if kind != "good" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	url := "http://" + ln.Addr().String() + "/mcp"

	// The check is real: no header, no service.
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("request without the header: %d", resp.StatusCode)
	}
	mu.Lock()
	delete(seen, "other")
	mu.Unlock()

	e, c, conn, ep := e2e.AccStart(t, "adder", func(d string) string {
		return fmt.Sprintf(`
[[agents]]
jid = "adder@%[1]s"
[agents.mcp]
url = %[2]q
headers_env = { Authorization = "AGENTGW_ACC_MCP_AUTH" }

[[agents]]
jid = "refused@%[1]s"
[agents.mcp]
url = %[2]q
headers_env = { Authorization = "AGENTGW_ACC_MCP_WRONG" }
`, d, url)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stanzas bytes.Buffer
	var smu sync.Mutex
	conn.OnPresence(func(el *xmltree.Element) { smu.Lock(); stanzas.WriteString(el.String()); smu.Unlock() })

	o, err := c.Call(ctx, ep, "add", json.RawMessage(`{"a":19,"b":23}`), agentclient.CallOptions{})
	r := accCompleted(t, "add over HTTP", o, err)
	if txt := accText(t, r); txt != "19 + 23 = 42" {
		t.Errorf("text %q", txt)
	}
	if got := accCanon(t, r.StructuredContent); string(got) != `{"sum":42}` {
		t.Errorf("structuredContent %s", got)
	}
	who, err := c.Call(ctx, ep, "whoami", json.RawMessage(`{}`), agentclient.CallOptions{})
	wr := accCompleted(t, "whoami over HTTP", who, err)
	if txt := accText(t, wr); !strings.HasPrefix(txt, "seen: ") || strings.Contains(txt, token) {
		t.Errorf("whoami result not redacted: %q", txt)
	} else {
		t.Logf("whoami through XMPP: %q", txt)
	}
	m, err := c.GetManifest(ctx, ep, "")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the refused endpoint's connection error in the log", func() bool {
		return strings.Contains(e.Log.String(), "refused@") && strings.Contains(e.Log.String(), "MCP server unavailable")
	})
	if _, err := c.GetManifest(ctx, e.Endpoint("refused"), ""); err == nil {
		t.Error("the endpoint with the wrong token published a manifest")
	}
	mu.Lock()
	good, bad, other := seen["good"], seen["wrong"], seen["other"]
	mu.Unlock()
	if good == 0 || bad == 0 || other != 0 {
		t.Errorf("server saw %d requests with the token, %d with the wrong one, %d with neither", good, bad, other)
	}
	log := e.Log.String()
	smu.Lock()
	pres := stanzas.String()
	smu.Unlock()
	for place, text := range map[string]string{"gateway log": log, "add result": string(o.Payload), "whoami result": string(who.Payload), "manifest": string(m.JSON), "presence": pres} {
		for name, v := range map[string]string{"token": token, "wrong token": wrong} {
			if strings.Contains(text, v) {
				t.Errorf("the %s appears in the %s", name, place)
			}
		}
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "refused@") && strings.Contains(line, "level=ERROR") {
			t.Logf("refused endpoint: %s", line)
			break
		}
	}
	if !strings.Contains(log, "published MCP manifest") {
		t.Error("the gateway log does not show the published manifest: is it the right log?")
	}
	t.Logf("add completed (%s); server: %d requests with the token, %d with the wrong one; neither value in %d bytes of gateway log", o.Payload, good, bad, len(log))
}
