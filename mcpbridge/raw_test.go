package mcpbridge

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
)

func rawAgent(t *testing.T, secret string) Options {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{JID: testJID, Command: []string{exe}, Env: map[string]string{"MCPBRIDGE_RAW_SERVER": "1", "RAW_SECRET": secret}}
}

func jsonEqual(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("bad JSON %s", got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, w)
}

func toolsByName(doc manifestDoc) map[string]map[string]json.RawMessage {
	m := map[string]map[string]json.RawMessage{}
	for _, tl := range doc.Tools {
		var n string
		json.Unmarshal(tl["name"], &n)
		m[n] = tl
	}
	return m
}

func lossOf(tl map[string]json.RawMessage) []string {
	var l []string
	json.Unmarshal(tl[SemanticLossKey], &l)
	return l
}

func TestRawManifest(t *testing.T) {
	t.Parallel()
	secret := ids.New("sec-")
	s := start(t, rawAgent(t, secret), nil)
	doc := checkManifestValid(t, s.pub.all()[0])
	tools := toolsByName(doc)
	var names []string
	for _, tl := range doc.Tools {
		var n string
		json.Unmarshal(tl["name"], &n)
		names = append(names, n)
	}
	want := []string{"plain", "tuple", "secret-echo", "rpc-error", "sample", "roots", "url-elicit", "iconic", "add", "die", "late-ask", "after-cancel", "form-ask"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v (all pages, server order, first of duplicates, odd dialect left out)", names, want)
	}
	p := tools["plain"]
	if !jsonEqual(t, p["execution"], `{"taskSupport":"optional"}`) || !jsonEqual(t, p["_meta"], `{"x.example/k":1}`) ||
		!jsonEqual(t, p["annotations"], `{"readOnlyHint":true,"title":"Plain!"}`) || string(p["title"]) != `"Plain"` {
		t.Errorf("plain not preserved: %v", p)
	}
	if l := lossOf(p); !slices.Equal(l, []string{"experimental", "prompts"}) {
		t.Errorf("plain loss %v", l)
	}
	if !jsonEqual(t, tools["tuple"]["inputSchema"], `{"type":"object","$defs":{"p":{"type":"integer"}},
		"properties":{"pair":{"type":"array","prefixItems":[{"$ref":"#/$defs/p"},{"type":"string"}],"items":false}},
		"dependentRequired":{"pair":["other"]}}`) {
		t.Errorf("tuple schema not translated: %s", tools["tuple"]["inputSchema"])
	}
	if !slices.Contains(lossOf(tools["tuple"]), "schema-dialect") {
		t.Errorf("tuple loss %v", lossOf(tools["tuple"]))
	}
	var desc string
	json.Unmarshal(tools["iconic"]["description"], &desc)
	l := lossOf(tools["iconic"])
	if utf8.RuneCountInString(desc) != maxToolDesc || !slices.Contains(l, "tool-description-truncated") || !slices.Contains(l, "tool-icons") {
		t.Errorf("iconic: %d runes, loss %v", utf8.RuneCountInString(desc), l)
	}
	if _, ok := tools["iconic"]["icons"]; ok {
		t.Error("icons member kept")
	}
	if strings.Contains(string(s.pub.all()[0]), secret) || string(tools["secret-echo"]["description"]) != `"Echoes [redacted]."` {
		t.Errorf("secret in the manifest: %s", tools["secret-echo"]["description"])
	}
	logs := s.logs.String()
	if strings.Count(logs, "left out of the manifest") != 2 {
		t.Errorf("dropped tools not logged:\n%s", logs)
	}
	if !strings.Contains(logs, "raw server starting with key [redacted]") {
		t.Errorf("stderr not logged redacted:\n%s", logs)
	}
	if strings.Contains(logs, secret) {
		t.Error("secret in the log")
	}
}

func TestRawCalls(t *testing.T) {
	t.Parallel()
	secret := ids.New("sec-")
	s := start(t, rawAgent(t, secret), nil)

	r := s.exec(t, "plain", `{"v":"x"}`, nil)
	if r.Result == nil {
		t.Fatal(r.Outcome())
	}
	if string(r.Result.Content) != `[{"type":"text","text":"ok","annotations":{"audience":["user"],"priority":0.5},"_meta":{"m":1},"x-extra":true}]` {
		t.Errorf("content not byte-identical: %s", r.Result.Content)
	}
	if r.Result.IsError == nil || *r.Result.IsError {
		t.Errorf("isError %v, want explicit false", r.Result.IsError)
	}
	if string(r.Result.StructuredContent) != `{"a":[1,2.5,"x"]}` || string(r.Result.Meta) != `{"r":2}` {
		t.Errorf("structuredContent %s _meta %s", r.Result.StructuredContent, r.Result.Meta)
	}

	r = s.exec(t, "secret-echo", `{}`, nil)
	if got := textOf(t, r.Result); got != "the key is [redacted]" {
		t.Errorf("secret-echo = %q", got)
	}

	r = s.exec(t, "rpc-error", `{}`, nil)
	if r.Failure == nil || r.Failure.Code != "mcp:-32000" || strings.Contains(r.Failure.Message, "boom") || strings.Contains(r.Failure.Message, secret) {
		t.Errorf("rpc-error: %s", r.Outcome())
	}

	for tool, code := range map[string]string{
		"sample":     agentproto.CodeUnsupportedSampling,
		"roots":      agentproto.CodeUnsupportedRoots,
		"url-elicit": agentproto.CodeUnsupportedURLElicitation,
	} {
		r = s.exec(t, tool, `{}`, nil)
		if r.Failure == nil || r.Failure.Code != code || r.Failure.Retryable {
			t.Errorf("%s: %s, want %s", tool, r.Outcome(), code)
		}
	}
	if l := s.b.SemanticLosses(); !slices.Equal(l, []string{agentproto.CodeUnsupportedRoots, agentproto.CodeUnsupportedSampling, agentproto.CodeUnsupportedURLElicitation}) {
		t.Errorf("SemanticLosses = %v", l)
	}

	// tools/list_changed: a new version is published; the old one stays
	// (the bridge never removes versions).
	first, _ := s.b.Current()
	s.exec(t, "add", `{}`, nil)
	deadline := time.Now().Add(10 * time.Second)
	for len(s.pub.all()) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	pubs := s.pub.all()
	if len(pubs) != 2 {
		t.Fatalf("%d publications after list_changed", len(pubs))
	}
	doc := checkManifestValid(t, pubs[1])
	if toolsByName(doc)["added"] == nil || doc.Agent.Version == first {
		t.Errorf("second manifest: version %s (first %s), tools %d", doc.Agent.Version, first, len(doc.Tools))
	}
	if v, _ := s.b.Current(); v != doc.Agent.Version {
		t.Errorf("Current %s, want %s", v, doc.Agent.Version)
	}

	// A server that exits mid-call.
	r = s.exec(t, "die", `{}`, nil)
	if r.Failure == nil || r.Failure.Code != agentproto.CodeUnavailable || !r.Failure.Retryable {
		t.Errorf("die: %s", r.Outcome())
	}
	s.waitUp(t, 30*time.Second)
	if got := textOf(t, s.exec(t, "plain", `{}`, nil).Result); got != "ok" {
		t.Errorf("after restart: %q", got)
	}
	if strings.Contains(s.logs.String(), secret) {
		t.Error("secret in the log")
	}
}

// A cancelled call may still run at the server (MCP cancellation is
// advisory, and a server need not answer a cancelled request), so its late
// question must not reach the next caller. The next caller therefore never
// runs on the session of the abandoned call: it gets a session of its own,
// where every question is its own, while the abandoned session takes no
// calls (and would refuse a question there, see soleCall).
//
// The raw server runs in this process behind the injected transport (one
// raw server per session): the attribution logic, not a real process, is
// the point.
func TestRawLateElicitationNotGivenToAnotherCaller(t *testing.T) {
	t.Parallel()
	s := start(t, Options{JID: testJID, Transport: inMemoryRaw(ids.New("sec-"))}, nil)

	a := newFakeRun()
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		s.b.Execute(context.Background(), tasks.Call{TaskID: "task-a", Tool: "late-ask", Arguments: json.RawMessage(`{}`), Endpoint: testJID}, a)
	}()
	select {
	case <-a.ProgressCh:
	case <-time.After(10 * time.Second):
		t.Fatal("late-ask did not start")
	}
	close(a.CancelReq)
	a.Wait(t, 10*time.Second)
	<-aDone
	if a.Outcome() == "not settled" || a.Result != nil || a.Failure != nil {
		t.Fatalf("caller A: %s, want cancelled", a.Outcome())
	}
	abandoned := s.b.current()

	// after-cancel asks the late-ask call's question if that call is
	// still open on its session; B's session has none, so the question
	// it gets is asked during B's own call, on B's own session.
	b := newFakeRun()
	b.Answer = func(tasks.InputRequest) (json.RawMessage, error) { return json.RawMessage(`{"color":"blue"}`), nil }
	s.exec(t, "after-cancel", `{}`, b)
	if got := textOf(t, b.Result); got != `late question answered: {"action":"accept","content":{"color":"blue"}}` || len(b.Inputs) != 1 {
		t.Errorf("caller B: %q after %d input requests", got, len(b.Inputs))
	}
	// B was kept off A's session: A's request is still unanswered there.
	if n := abandoned.tap.unanswered(); n != 1 {
		t.Errorf("A's session has %d unanswered abandoned requests, want 1: B ran on it", n)
	}
	// And a question arriving there now would be refused, never given to
	// a caller in flight on it.
	probe := &callState{token: "probe"}
	abandoned.add(probe)
	if st, why := abandoned.soleCall(); st != nil || !strings.Contains(why, "abandoned call may still be running") {
		t.Errorf("soleCall on the abandoned session = %v, %q", st, why)
	}
	abandoned.remove(probe)

	c := newFakeRun()
	c.Answer = func(tasks.InputRequest) (json.RawMessage, error) { return json.RawMessage(`{"color":"green"}`), nil }
	s.exec(t, "form-ask", `{}`, c)
	if len(c.Inputs) != 1 || c.Inputs[0].Question != "Favourite colour?" {
		t.Errorf("caller C inputs %+v", c.Inputs)
	}
	if got := textOf(t, c.Result); got != `answered: {"action":"accept","content":{"color":"green"}}` {
		t.Errorf("caller C: %q", got)
	}
}
