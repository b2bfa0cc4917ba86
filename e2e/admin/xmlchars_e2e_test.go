package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// ctlManifest is DefaultManifest for ep with control characters (legal in
// JSON text only as escapes) in the agent title and description and in the
// echo tool's title and description, and one in a _meta member name.
func ctlManifest(t *testing.T, ep string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(e2e.DefaultManifest(ep)), &m); err != nil {
		t.Fatal(err)
	}
	agent := m["agent"].(map[string]any)
	agent["title"] = "Ctl\u0001Agent"
	agent["description"] = "line one\u001fend\nline two"
	echo := m["tools"].([]any)[0].(map[string]any)
	echo["title"] = "Echo\u0002"
	echo["description"] = "Returns\u001f its arguments."
	echo["_meta"] = map[string]any{"k\u0003": "v\u0004"}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`\u001f`)) {
		t.Fatalf("the manifest does not carry the escape: %s", b)
	}
	return string(b)
}

// TestManifestControlCharactersThroughProsody: a manifest whose strings
// hold control characters is legal (its JSON text carries them as
// escapes). The gateway starts with it, serves it byte- and hash-exact, and
// its XML text copies (disco identity, endpoint-info and tool-info forms,
// tool items, vCard, search) carry U+FFFD instead. Before, `agentgw serve`
// refused the manifest and would not start.
func TestManifestControlCharactersThroughProsody(t *testing.T) {
	t.Parallel()
	e := e2e.Prepare(t, e2e.Options{Users: []string{"alice"}})
	ep := "ctl@" + e.Domain
	raw := ctlManifest(t, ep)
	e.Opts.Agents = []e2e.Agent{{Localpart: "ctl", Manifest: raw}}
	e.WriteConfig()
	e.StartGateway()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, conn := e.DialConn("alice")
	epJID := e.Endpoint("ctl")

	canon, _, err := ijson.Canonicalize([]byte(raw), directory.ManifestLimits)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.GetManifest(ctx, epJID, "")
	if err != nil {
		t.Fatalf("manifest-request: %v", err)
	}
	if !bytes.Equal(m.JSON, canon) {
		t.Fatalf("served manifest differs from the canonical bytes:\n got %q\nwant %q", m.JSON, canon)
	}
	if m.Hash != ijson.Hash(canon) {
		t.Fatalf("hash %s, want %s", m.Hash, ijson.Hash(canon))
	}
	for _, esc := range []string{`\u0001`, `\u001f`, `\u0002`, `\u0003`, `\u0004`} {
		if !bytes.Contains(m.JSON, []byte(esc)) {
			t.Errorf("served manifest lacks the JSON escape %s", esc)
		}
	}
	if m.Doc.Agent.Description != "line one\u001fend\nline two" {
		t.Errorf("decoded description %q", m.Doc.Agent.Description)
	}
	t.Logf("manifest served exact: %d bytes, sha-256 %s", len(m.JSON), m.Hash)

	info, err := c.Endpoint(ctx, epJID)
	if err != nil {
		t.Fatalf("endpoint disco#info: %v", err)
	}
	if info.Name != "Ctl\uFFFDAgent" || info.ServerTitle != "Ctl\uFFFDAgent" {
		t.Errorf("identity name %q, server_title %q: want the U+FFFD copy", info.Name, info.ServerTitle)
	}
	if info.Description != "line one\uFFFDend\nline two" {
		t.Errorf("endpoint-info description %q", info.Description)
	}
	if info.ManifestHash != m.Hash {
		t.Errorf("endpoint-info hash %s, manifest %s", info.ManifestHash, m.Hash)
	}

	ti, err := c.Info(ctx, epJID, directory.ToolNode(m.Version, "echo"))
	if err != nil {
		t.Fatalf("tool disco#info: %v", err)
	}
	form := ti.Forms[ns.ToolInfo]
	if got := form["title"]; len(got) != 1 || got[0] != "Echo\uFFFD" {
		t.Errorf("tool-info title %q", got)
	}
	if got := form["description"]; len(got) != 1 || got[0] != "Returns\uFFFD its arguments." {
		t.Errorf("tool-info description %q", got)
	}
	var toolIdentity string
	for _, id := range ti.Identities {
		if id.Type == ns.TypeTool {
			toolIdentity = id.Name
		}
	}
	if toolIdentity != "Echo\uFFFD" {
		t.Errorf("tool identity name %q", toolIdentity)
	}
	items, err := c.ToolItems(ctx, epJID, m.Version)
	if err != nil {
		t.Fatalf("tool items: %v", err)
	}
	var echoItem string
	for _, it := range items {
		if it.Node == directory.ToolNode(m.Version, "echo") {
			echoItem = it.Name
		}
	}
	if echoItem != "Echo\uFFFD" {
		t.Errorf("tool item name %q", echoItem)
	}

	reply, err := conn.SendIQ(ctx, xmltree.New("jabber:client", "iq", "type", "get", "to", ep).Add(xmltree.New(ns.VCard, "vCard")))
	if err != nil {
		t.Fatalf("vCard: %v", err)
	}
	vc := reply.Child(ns.VCard, "vCard")
	if vc == nil || vc.Child(ns.VCard, "FN") == nil || vc.Child(ns.VCard, "DESC") == nil {
		t.Fatalf("vCard reply %s", reply.String())
	}
	if fn, desc := vc.Child(ns.VCard, "FN").Text, vc.Child(ns.VCard, "DESC").Text; fn != "Ctl\uFFFDAgent" || desc != "line one\uFFFDend\nline two" {
		t.Errorf("vCard FN %q DESC %q", fn, desc)
	}

	// The endpoint works: echo is callable with the pinned hash.
	out, err := c.Call(ctx, epJID, "echo", json.RawMessage(`{"message":"hi"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" {
		t.Fatalf("echo: %v %+v", err, out)
	}
}

// TestAdminRegisterCharactersThroughProsody: through the admin register
// IQ, a manifest with a control character is registered with the hash of
// its canonical bytes, and one with U+FFFF (which RFC 8785 leaves raw and
// XML 1.0 forbids, so the manifest could never be served) is refused with
// not-acceptable.
func TestAdminRegisterCharactersThroughProsody(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Users: []string{"admin"}, Admins: []string{"admin"}, TOML: e2e.DfRates})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, aconn := e.DialConn("admin")
	ep := "fresh@" + e.Domain

	ok := admManifest(t, ep, "1.0.0", "tab\tand unit separator \u001f here")
	canon, _, err := ijson.Canonicalize([]byte(ok), directory.ManifestLimits)
	if err != nil {
		t.Fatal(err)
	}
	reg := admResult(t, admIQ(t, ctx, aconn, e.Domain, "set", admRegister(ok)), "registered")
	if h := reg.Child(ns.Hashes, "hash"); h == nil || h.Text != ijson.Hash(canon) {
		t.Fatalf("registered %s, want hash %s", reg.String(), ijson.Hash(canon))
	}

	for _, c := range []struct{ name, esc string }{{"U+FFFF", `\uffff`}, {"U+FFFE", `\uFFFE`}} {
		bad := strings.Replace(admManifest(t, ep, "2.0.0", "x"), `"description":"x"`, `"description":"x`+c.esc+`"`, 1)
		if !strings.Contains(bad, c.esc) {
			t.Fatal("test manifest lacks the escape")
		}
		reply := admIQ(t, ctx, aconn, e.Domain, "set", admRegister(bad))
		admCond(t, reply, "not-acceptable")
		t.Logf("%s refused: %s", c.name, xmppclient.StanzaErrorCondition(reply))
	}
	st := admIQ(t, ctx, aconn, e.Domain, "get", xmltree.New(ns.API, "registration-status", "jid", ep))
	if n := len(admResult(t, st, "registration").ChildrenNamed(ns.API, "version")); n != 1 {
		t.Fatalf("%d versions registered, want 1: %s", n, st.String())
	}
}

// TestToolResultCharactersThroughProsody: a tool result holding U+0001,
// U+FFFE and U+FFFF reaches a real client through Prosody as JSON escapes
// that decode back to the exact string, in the completed event and in
// task-result. Before, the XML encoder turned U+FFFE/U+FFFF into U+FFFD.
func TestToolResultCharactersThroughProsody(t *testing.T) {
	t.Parallel()
	const text = "a\u0001b\uffffc\ufffed"
	x := e2e.DefaultExecutor()
	x.Script("slow",
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(50), Message: "half\uffff"}},
		taskstest.Step{Complete: taskstest.Text(text)},
	)
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather", Executor: x}}, Users: []string{"alice"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e.Dial("alice")
	ep := e.Endpoint("weather")

	var progress []string
	out, err := c.Call(ctx, ep, "slow", json.RawMessage(`{}`), agentclient.CallOptions{OnProgress: func(p agentclient.Progress) {
		progress = append(progress, p.Message)
	}})
	if err != nil || out.State != "completed" {
		t.Fatalf("call: %v %+v", err, out)
	}
	check := func(where string, payload []byte) {
		t.Helper()
		for _, esc := range []string{`\u0001`, `\uffff`, `\ufffe`} {
			if !bytes.Contains(bytes.ToLower(payload), []byte(esc)) {
				t.Errorf("%s: payload lacks the JSON escape %s: %q", where, esc, payload)
			}
		}
		if bytes.ContainsRune(payload, '\uFFFD') {
			t.Errorf("%s: payload was altered to U+FFFD: %q", where, payload)
		}
		var v struct {
			Result struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal(payload, &v); err != nil || len(v.Result.Content) != 1 {
			t.Fatalf("%s: payload %q: %v", where, payload, err)
		}
		if got := v.Result.Content[0].Text; got != text {
			t.Errorf("%s: decoded text %q, want %q", where, got, text)
		}
	}
	check("completed event", out.Payload)
	res, err := c.Result(ctx, ep, out.Accepted.TaskID)
	if err != nil {
		t.Fatalf("task-result: %v", err)
	}
	check("task-result", res.Payload)
	if len(progress) != 1 || progress[0] != "half\uffff" {
		t.Errorf("progress messages %q, want [\"half\\uffff\"]", progress)
	}
	t.Logf("completed payload on the wire: %s", out.Payload)
}
