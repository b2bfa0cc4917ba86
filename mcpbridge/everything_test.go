package mcpbridge

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
	"github.com/agentgw/agentgw/tasks"
)

// directSession connects a plain go-sdk client to its own server-everything
// process, declaring the same capabilities as the bridge.
func directSession(tb testing.TB) *mcp.ClientSession {
	tb.Helper()
	cmd := everythingCmd(tb)
	c := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(cmd[0], cmd[1:]...)}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

type manifestDoc struct {
	ManifestSpecVersion string `json:"manifestSpecVersion"`
	Agent               struct {
		JID, Name, Title, Description, Version string
	} `json:"agent"`
	Implementation     *struct{ Name, Version string } `json:"implementation"`
	MCPProtocolVersion string                          `json:"mcpProtocolVersion"`
	Tools              []map[string]json.RawMessage    `json:"tools"`
}

func manifestSchema(tb testing.TB) *schema.Schema {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(file)), "directory", "manifest.schema.json"))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := schema.Compile(data)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func checkManifestValid(tb testing.TB, m []byte) manifestDoc {
	tb.Helper()
	v, err := ijson.Parse(m, ijson.Limits{MaxBytes: 8 << 20})
	if err != nil {
		tb.Fatalf("manifest is not I-JSON: %v", err)
	}
	if err := manifestSchema(tb).Validate(v); err != nil {
		tb.Fatalf("manifest does not validate against the manifest schema: %v", err)
	}
	canon, err := ijson.Canonical(v)
	if err != nil || !bytes.Equal(canon, m) {
		tb.Fatalf("published manifest is not RFC 8785 canonical")
	}
	if _, err := directory.ParseManifest(m); err != nil {
		tb.Fatalf("the directory refuses the manifest: %v", err)
	}
	var doc manifestDoc
	if err := json.Unmarshal(m, &doc); err != nil {
		tb.Fatal(err)
	}
	names := map[string]bool{}
	for _, t := range doc.Tools {
		var name string
		json.Unmarshal(t["name"], &name)
		if names[name] {
			tb.Fatalf("duplicate tool %q", name)
		}
		names[name] = true
		if _, err := schema.CompileInput(t["inputSchema"]); err != nil {
			tb.Fatalf("tool %q: input schema not accepted by the gateway: %v", name, err)
		}
		if o, ok := t["outputSchema"]; ok {
			if _, err := schema.Compile(o); err != nil {
				tb.Fatalf("tool %q: output schema not accepted: %v", name, err)
			}
		}
	}
	return doc
}

func TestEverythingManifest(t *testing.T) {
	t.Parallel()
	s := start(t, stdioAgent(everythingCmd(t)), nil)
	pub := s.pub.all()
	if len(pub) == 0 {
		t.Fatal("nothing published")
	}
	m := pub[0]
	doc := checkManifestValid(t, m)

	if doc.Agent.JID != testJID || doc.Agent.Name != "mcp-servers/everything" || doc.Agent.Title != "Everything Reference Server" {
		t.Errorf("agent = %+v", doc.Agent)
	}
	if doc.Implementation == nil || doc.Implementation.Name != "mcp-servers/everything" || doc.Implementation.Version != "2.0.0" {
		t.Errorf("implementation = %+v", doc.Implementation)
	}
	if doc.MCPProtocolVersion != "2025-11-25" {
		t.Errorf("mcpProtocolVersion = %q", doc.MCPProtocolVersion)
	}
	if !regexp.MustCompile(`^mcp-[0-9a-f]{16}$`).MatchString(doc.Agent.Version) {
		t.Errorf("version %q is not mcp- + 16 hex", doc.Agent.Version)
	}
	if v, _ := s.b.Current(); v != doc.Agent.Version {
		t.Errorf("Current() = %q, want %q", v, doc.Agent.Version)
	}

	// Every tool the server lists, with its members preserved.
	direct := directSession(t)
	res, err := direct.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]map[string]json.RawMessage{}
	for _, tl := range doc.Tools {
		var n string
		json.Unmarshal(tl["name"], &n)
		byName[n] = tl
	}
	if len(res.Tools) != len(doc.Tools) {
		t.Errorf("manifest has %d tools, server lists %d", len(doc.Tools), len(res.Tools))
	}
	for _, want := range res.Tools {
		got, ok := byName[want.Name]
		if !ok {
			t.Errorf("tool %q missing from the manifest", want.Name)
			continue
		}
		var title, desc string
		json.Unmarshal(got["title"], &title)
		json.Unmarshal(got["description"], &desc)
		if title != want.Title || desc != want.Description {
			t.Errorf("%s: title/description changed", want.Name)
		}
		// Schemas: the server's, minus the draft-07 $schema declaration.
		wantIn := want.InputSchema.(map[string]any)
		delete(wantIn, "$schema")
		var gotIn map[string]any
		json.Unmarshal(got["inputSchema"], &gotIn)
		if !reflect.DeepEqual(gotIn, wantIn) {
			t.Errorf("%s: inputSchema\n got %v\nwant %v", want.Name, gotIn, wantIn)
		}
		if want.OutputSchema != nil {
			wantOut := want.OutputSchema.(map[string]any)
			delete(wantOut, "$schema")
			var gotOut map[string]any
			json.Unmarshal(got["outputSchema"], &gotOut)
			if !reflect.DeepEqual(gotOut, wantOut) {
				t.Errorf("%s: outputSchema differs", want.Name)
			}
		}
		wa, _ := json.Marshal(want.Annotations)
		var ga, wa2 any
		json.Unmarshal(got["annotations"], &ga)
		json.Unmarshal(wa, &wa2)
		if !reflect.DeepEqual(ga, wa2) {
			t.Errorf("%s: annotations %s, want %s", want.Name, got["annotations"], wa)
		}
		// The SDK drops "execution"; the bridge keeps the server's bytes.
		if _, ok := got["execution"]; !ok {
			t.Errorf("%s: execution member lost", want.Name)
		}
		var ext map[string]bool
		json.Unmarshal(got["urn:xmpp:agent-api:0"], &ext)
		if !ext["supportsProgress"] || !ext["supportsCancellation"] || !ext["supportsInput"] {
			t.Errorf("%s: extension = %s", want.Name, got["urn:xmpp:agent-api:0"])
		}
		var loss []string
		json.Unmarshal(got[SemanticLossKey], &loss)
		for _, l := range []string{"completions", "instructions", "logging", "prompts", "resources", "schema-dialect"} {
			if !slices.Contains(loss, l) {
				t.Errorf("%s: semantic loss %v lacks %q", want.Name, loss, l)
			}
		}
		// The server's tasks are carried (taskcall.go): no loss.
		for _, l := range []string{"tasks", "task-required"} {
			if slices.Contains(loss, l) {
				t.Errorf("%s: semantic loss %v still has %q", want.Name, loss, l)
			}
		}
	}
	for _, name := range []string{"echo", "get-sum", "get-structured-content", "trigger-long-running-operation", "trigger-elicitation-request", "get-tiny-image"} {
		if byName[name] == nil {
			t.Errorf("expected tool %q", name)
		}
	}
	var ex map[string]string
	json.Unmarshal(byName["simulate-research-query"]["execution"], &ex)
	if ex["taskSupport"] != "required" {
		t.Errorf("simulate-research-query execution = %v", ex)
	}

	// Deterministic: another spawn of the same server gives the same bytes.
	again, err := s.b.BuildManifest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, m) {
		t.Errorf("manifest not deterministic:\n%s\n%s", m, again)
	}
}

func TestEverythingPinnedVersionAndConfigNames(t *testing.T) {
	t.Parallel()
	agent := stdioAgent(everythingCmd(t))
	agent.Version = "1.2.3"
	agent.Name, agent.Title, agent.Description = "everything", "Everything", "Reference server"
	s := start(t, agent, nil)
	doc := checkManifestValid(t, s.pub.all()[0])
	if doc.Agent.Version != "1.2.3" || doc.Agent.Name != "everything" || doc.Agent.Title != "Everything" || doc.Agent.Description != "Reference server" {
		t.Errorf("agent = %+v", doc.Agent)
	}
}

func TestEverythingCalls(t *testing.T) {
	t.Parallel()
	s := start(t, stdioAgent(everythingCmd(t)), nil)

	t.Run("echo", func(t *testing.T) {
		r := s.exec(t, "echo", `{"message":"hello bridge"}`, nil)
		if got := textOf(t, r.Result); got != "Echo: hello bridge" {
			t.Errorf("echo = %q (%s)", got, r.Outcome())
		}
	})
	t.Run("get-sum", func(t *testing.T) {
		r := s.exec(t, "get-sum", `{"a":2,"b":40}`, nil)
		if got := textOf(t, r.Result); !strings.Contains(got, "42") {
			t.Errorf("get-sum = %q", got)
		}
	})
	t.Run("get-structured-content", func(t *testing.T) {
		r := s.exec(t, "get-structured-content", `{"location":"Chicago"}`, nil)
		if r.Result == nil || r.Result.StructuredContent == nil {
			t.Fatalf("no structuredContent: %s", r.Outcome())
		}
		var sc map[string]any
		json.Unmarshal(r.Result.StructuredContent, &sc)
		want := map[string]any{"temperature": 36.0, "conditions": "Light rain / drizzle", "humidity": 82.0}
		if !reflect.DeepEqual(sc, want) {
			t.Errorf("structuredContent = %v", sc)
		}
		if r.Result.IsError != nil {
			t.Errorf("isError = %v, want absent as the server sent it", *r.Result.IsError)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		r := s.exec(t, "no-such-tool", `{}`, nil)
		// The TypeScript SDK reports an unknown tool as an isError
		// result, which is a completed call.
		if r.Result == nil && (r.Failure == nil || !strings.HasPrefix(r.Failure.Code, "mcp:")) {
			t.Errorf("unknown tool: %s", r.Outcome())
		}
	})
	t.Run("progress", func(t *testing.T) {
		r := s.exec(t, "trigger-long-running-operation", `{"duration":1,"steps":5}`, nil)
		if r.Result == nil {
			t.Fatal(r.Outcome())
		}
		var last float64 = -1
		n := 0
		for _, p := range r.Updates {
			if p.Percent == nil {
				continue
			}
			if *p.Percent <= last {
				t.Errorf("percent not rising: %v after %v", *p.Percent, last)
			}
			last = *p.Percent
			n++
		}
		if n < 3 || last != 100 {
			t.Errorf("%d progress events, last %v%%", n, last)
		}
	})
	t.Run("elicitation", func(t *testing.T) {
		r := newFakeRun()
		r.Answer = func(req tasks.InputRequest) (json.RawMessage, error) {
			return json.RawMessage(`{"name":"Ada Lovelace","check":true,"integer":7}`), nil
		}
		s.exec(t, "trigger-elicitation-request", `{}`, r)
		if len(r.Inputs) != 1 {
			t.Fatalf("%d input requests", len(r.Inputs))
		}
		in := r.Inputs[0]
		if in.Question != "Please provide inputs for the following fields:" {
			t.Errorf("question = %q", in.Question)
		}
		var sch struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(in.Schema, &sch); err != nil || sch.Type != "object" || sch.Properties["name"] == nil || !slices.Equal(sch.Required, []string{"name"}) {
			t.Errorf("schema = %s", in.Schema)
		}
		// The engine compiles the input schema before committing
		// input_required.
		if _, err := schema.Compile(in.Schema); err != nil {
			t.Errorf("elicitation schema not accepted by the gateway: %v", err)
		}
		got := textOf(t, r.Result)
		for _, want := range []string{"Name: Ada Lovelace", "Agreed to terms: true", "Favorite Integer: 7", `"action": "accept"`} {
			if !strings.Contains(got, want) {
				t.Errorf("result lacks %q:\n%s", want, got)
			}
		}
	})
	t.Run("tiny image byte-identical", func(t *testing.T) {
		r := s.exec(t, "get-tiny-image", `{}`, nil)
		direct := directSession(t)
		res, err := direct.CallTool(context.Background(), &mcp.CallToolParams{Name: "get-tiny-image", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		var want *mcp.ImageContent
		for _, c := range res.Content {
			if ic, ok := c.(*mcp.ImageContent); ok {
				want = ic
			}
		}
		var items []struct {
			Type, Data, MimeType string
		}
		json.Unmarshal(r.Result.Content, &items)
		var got []byte
		for _, it := range items {
			if it.Type == "image" {
				if it.MimeType != want.MIMEType {
					t.Errorf("mimeType %q, want %q", it.MimeType, want.MIMEType)
				}
				var err error
				if got, err = base64.StdEncoding.DecodeString(it.Data); err != nil {
					t.Fatal(err)
				}
			}
		}
		if want == nil || len(want.Data) == 0 || !bytes.Equal(got, want.Data) {
			t.Errorf("image bytes differ: %d bytes, direct %d", len(got), len(want.Data))
		}
		if len(items) != len(res.Content) {
			t.Errorf("%d content items, direct %d", len(items), len(res.Content))
		}
	})
}

// callFrames finds the JSON-RPC id of the tools/call carrying token-less
// arguments matching marker, and what was sent and received for it.
func callID(frames []frame, tool string) json.RawMessage {
	for _, f := range frames {
		if !f.out {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(f.data, &m) == nil && m.Method == "tools/call" && m.Params.Name == tool {
			return m.ID
		}
	}
	return nil
}

func TestEverythingCancel(t *testing.T) {
	t.Parallel()
	s := start(t, stdioAgent(everythingCmd(t)), nil)
	r := newFakeRun()
	done := make(chan struct{})
	go func() {
		s.b.Execute(context.Background(), tasks.Call{TaskID: "t-cancel", Tool: "trigger-long-running-operation", Arguments: json.RawMessage(`{"duration":2,"steps":8}`)}, r)
		close(done)
	}()
	select {
	case <-r.ProgressCh:
	case <-time.After(20 * time.Second):
		t.Fatal("no progress before cancelling")
	}
	cancelAt := time.Now()
	close(r.CancelReq)
	r.Wait(t, 10*time.Second)
	<-done
	if r.CancelReason == "" || r.Result != nil || r.Failure != nil {
		t.Fatalf("want cancelled, got %s", r.Outcome())
	}

	id := callID(s.framesCopy(), "trigger-long-running-operation")
	if id == nil {
		t.Fatal("tools/call frame not seen")
	}
	// Wait past the moment the operation would have finished; the server
	// must have dropped its response because it saw notifications/cancelled.
	time.Sleep(time.Until(cancelAt.Add(2500 * time.Millisecond)))
	sentCancel, gotResponse := false, false
	for _, f := range s.framesCopy() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		json.Unmarshal(f.data, &m)
		if f.out && m.Method == "notifications/cancelled" && bytes.Equal(m.Params.RequestID, id) {
			sentCancel = true
		}
		if !f.out && m.Method == "" && bytes.Equal(m.ID, id) {
			gotResponse = true
		}
	}
	if !sentCancel {
		t.Error("no notifications/cancelled sent for the call")
	}
	if gotResponse {
		t.Error("the server answered the cancelled call: it did not act on notifications/cancelled")
	}
	// The session is still usable.
	if got := textOf(t, s.exec(t, "echo", `{"message":"after"}`, nil).Result); got != "Echo: after" {
		t.Errorf("echo after cancel = %q", got)
	}
}

func TestEverythingCancelDuringInput(t *testing.T) {
	t.Parallel()
	s := start(t, stdioAgent(everythingCmd(t)), nil)
	r := newFakeRun() // answer nil: RequestInput blocks until its context ends
	done := make(chan struct{})
	go func() {
		s.b.Execute(context.Background(), tasks.Call{TaskID: "t-ci", Tool: "trigger-elicitation-request", Arguments: json.RawMessage(`{}`)}, r)
		close(done)
	}()
	select {
	case <-r.InputCh:
	case <-time.After(20 * time.Second):
		t.Fatal("no input request")
	}
	close(r.CancelReq)
	r.Wait(t, 10*time.Second)
	<-done
	if r.CancelReason == "" {
		t.Fatalf("want cancelled, got %s", r.Outcome())
	}
	// The elicitation was answered "cancel" so the server is not left
	// waiting: find our response to its elicitation/create.
	var elicitID json.RawMessage
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, f := range s.framesCopy() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Result struct {
					Action string `json:"action"`
				} `json:"result"`
			}
			json.Unmarshal(f.data, &m)
			if !f.out && m.Method == "elicitation/create" {
				elicitID = m.ID
			}
			if f.out && elicitID != nil && m.Method == "" && bytes.Equal(m.ID, elicitID) {
				if m.Result.Action != "cancel" {
					t.Errorf("elicitation answered %q, want cancel", m.Result.Action)
				}
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Error("the open elicitation was never answered")
}

func TestEverythingInputExpiry(t *testing.T) {
	t.Parallel()
	s := start(t, stdioAgent(everythingCmd(t)), nil)
	r := newFakeRun()
	r.Answer = func(tasks.InputRequest) (json.RawMessage, error) {
		// What the engine does when the input request expires: it
		// settles the task and tells the executor.
		r.Fail(tasks.Failure{Code: agentproto.CodeInputExpired})
		return nil, tasks.ErrInputExpired
	}
	s.exec(t, "trigger-elicitation-request", `{}`, r)
	if r.Failure == nil || r.Failure.Code != agentproto.CodeInputExpired {
		t.Fatalf("got %s", r.Outcome())
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, f := range s.framesCopy() {
			if f.out && bytes.Contains(f.data, []byte(`"action":"decline"`)) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Error("expired input was not answered decline")
}

func TestEverythingServerKilledAndRestarted(t *testing.T) {
	t.Parallel()
	s := start(t, stdioAgent(everythingCmd(t)), nil)
	first, _ := s.b.Current()
	pid := s.b.current().proc.pid

	r := newFakeRun()
	done := make(chan struct{})
	go func() {
		s.b.Execute(context.Background(), tasks.Call{TaskID: "t-kill", Tool: "trigger-long-running-operation", Arguments: json.RawMessage(`{"duration":20,"steps":40}`)}, r)
		close(done)
	}()
	select {
	case <-r.ProgressCh:
	case <-time.After(20 * time.Second):
		t.Fatal("no progress")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.Wait(t, 10*time.Second)
	<-done
	if r.Failure == nil || r.Failure.Code != agentproto.CodeUnavailable || !r.Failure.Retryable {
		t.Fatalf("want retryable unavailable, got %s", r.Outcome())
	}
	select {
	case up := <-s.avail.ch:
		if up {
			t.Fatal("availability went up, want down first")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("availability not reported down")
	}
	s.waitUp(t, 60*time.Second)
	if s.b.current().proc.pid == pid {
		t.Fatal("same process after restart")
	}
	if got := textOf(t, s.exec(t, "echo", `{"message":"again"}`, nil).Result); got != "Echo: again" {
		t.Errorf("echo after restart = %q", got)
	}
	if v, _ := s.b.Current(); v != first {
		t.Errorf("version changed across restart: %s -> %s", first, v)
	}
	if n := len(s.pub.all()); n != 1 {
		t.Errorf("identical manifest published %d times", n)
	}
	// Calls while down fail at once and retryably.
	if !strings.Contains(s.logs.String(), "restarting") {
		t.Error("restart not logged")
	}
}

func TestEverythingUnavailableWhenNotStarted(t *testing.T) {
	t.Parallel()
	log, _ := testLogger(t)
	b, err := New(Options{JID: testJID, Command: []string{"/nonexistent/mcp-server"}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r := newFakeRun()
	b.Execute(context.Background(), tasks.Call{TaskID: "t", Tool: "echo"}, r)
	if r.Failure == nil || r.Failure.Code != agentproto.CodeUnavailable || !r.Failure.Retryable {
		t.Fatalf("got %s", r.Outcome())
	}
	err = b.Initialize(context.Background())
	if err == nil || !strings.Contains(err.Error(), "mcp-server") {
		t.Fatalf("Initialize of a missing command: %v", err)
	}
}

func TestEverythingInitialize(t *testing.T) {
	t.Parallel()
	log, _ := testLogger(t)
	b, err := New(Options{JID: testJID, Command: everythingCmd(t), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestEverythingDeadlineAndShutdown(t *testing.T) {
	t.Parallel()
	s := start(t, stdioAgent(everythingCmd(t)), nil)

	r := newFakeRun()
	s.b.Execute(context.Background(), tasks.Call{TaskID: "t-dl", Tool: "trigger-long-running-operation",
		Arguments: json.RawMessage(`{"duration":5,"steps":5}`), Deadline: time.Now().Add(300 * time.Millisecond)}, r)
	r.Wait(t, 10*time.Second)
	if r.Failure == nil || r.Failure.Code != agentproto.CodeDeadlineExpired {
		t.Errorf("deadline: %s", r.Outcome())
	}

	// Gateway shutdown: Execute returns and leaves settlement (interrupted)
	// to the engine.
	r = newFakeRun()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.b.Execute(ctx, tasks.Call{TaskID: "t-sd", Tool: "trigger-long-running-operation", Arguments: json.RawMessage(`{"duration":5,"steps":5}`)}, r)
		close(done)
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Execute did not return on shutdown")
	}
	if got := r.Outcome(); got != "not settled" {
		t.Errorf("shutdown settled the task: %s", got)
	}
}
