package oan

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// oanStore opens the gateway's store beside the running gateway (as the
// operator commands do) for the bridge's tables.
func oanStore(t *testing.T, e *e2e.Env) (oandb.Driver, func()) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(e.Dir, "agentgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	return sqlite.NewOAN(db), func() { db.Close() }
}

// TestOANThroughProsody is the OpenAgentNetwork bridge end to end: the
// reference OAN server (Node, the real socket.io), `agentgw serve` as a
// process, Prosody, the Go caller and slixmpp as the owner and as a
// non-owner.
func TestOANThroughProsody(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	srv := e2e.StartOAN(t)
	e := e2e.Prepare(t, e2e.Options{Users: []string{"alice", "mallory"}, TOML: fmt.Sprintf(`
[[agents]]
jid = "gofers@%s"
[agents.oan]
base_url = %q
api_key_file = "oan.key"
owner = "alice@%s"
reply_timeout_seconds = 3

[tasks]
input_timeout_seconds = 8
`, "agents.example.test", srv.URL, "example.test")})
	if !strings.HasSuffix(e.Domain, "agents.example.test") {
		t.Fatalf("unexpected component domain %s", e.Domain)
	}
	ep := e.Endpoint("gofers")
	keyFile := filepath.Join(e.Dir, "oan.key")

	// Pairing: the key is written 0600 and never printed; a second
	// pairing needs --force.
	code, _ := srv.PairingCode()
	out := e.Agentgw(0, "oan", "pair", "--config", e.ConfigPath, "--code", code, ep.String())
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	k := strings.TrimSpace(string(key))
	if fi, _ := os.Stat(keyFile); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", fi.Mode())
	}
	if strings.Contains(out, k) || strings.Contains(out, code) || !strings.Contains(out, "paired") {
		t.Fatalf("pair output: %s", out)
	}
	code2, _ := srv.PairingCode()
	if out := e.Agentgw(1, "oan", "pair", "--config", e.ConfigPath, "--code", code2, ep.String()); !strings.Contains(out, "--force") {
		t.Fatalf("second pair without --force: %s", out)
	}

	gw := e.Serve("gw1")
	gw.WaitLog("OAN event stream connected", 60*time.Second)
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	testkit.WaitFor(t, 30*time.Second, "the OAN manifest", func() bool {
		_, err := c.Pin(ctx, ep, "chat")
		return err == nil
	})
	call := func(tool, args string, onInput func(context.Context, agentclient.InputRequest) (json.RawMessage, error)) *agentclient.Outcome {
		t.Helper()
		res, err := c.Call(ctx, ep, tool, json.RawMessage(args), agentclient.CallOptions{OnInput: onInput})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if strings.Contains(string(res.Payload), k) {
			t.Fatalf("%s: the result carries the API key", tool)
		}
		return res
	}
	sc := func(res *agentclient.Outcome) map[string]any {
		t.Helper()
		var p struct {
			Result struct {
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"result"`
		}
		json.Unmarshal(res.Payload, &p)
		if res.State != "completed" {
			t.Fatalf("state %s: %s", res.State, res.Payload)
		}
		return p.Result.StructuredContent
	}

	gofer := sc(call("create_gofer", `{}`, nil))["gofer_id"].(string)
	if m := sc(call("chat", `{"message":"hi there"}`, nil)); m["content"] != "Gofer heard: hi there" {
		t.Fatalf("chat: %v", m)
	}
	// A question under each constraint type, answered.
	for kind, ans := range map[string]string{
		"boolean": `{"answer":false}`, "enum": `{"answer":"blue"}`,
		"json_schema": `{"budget":3,"city":"Turku"}`, "maxlength": `{"answer":"tiny"}`,
	} {
		asked := 0
		m := sc(call("chat", `{"message":"ask:`+kind+`"}`, func(_ context.Context, r agentclient.InputRequest) (json.RawMessage, error) {
			asked++
			return json.RawMessage(ans), nil
		}))
		if asked != 1 || !strings.HasPrefix(m["content"].(string), "Thanks, noted: ") {
			t.Fatalf("%s: asked %d, result %v", kind, asked, m)
		}
	}
	// Silent failure: exactly one POST, then a documented timeout.
	srv.Mode(map[string]any{"silent": true})
	l0, _ := srv.Log()
	res := call("chat", `{"message":"are you there"}`, nil)
	l1, _ := srv.Log()
	srv.Mode(map[string]any{"silent": false})
	if res.State != "failed" || !strings.Contains(string(res.Payload), "agentgw:oan-no-reply") {
		t.Fatalf("silent failure: %s %s", res.State, res.Payload)
	}
	if n := l1.Count("POST", "/api/v1/gofers/") - l0.Count("POST", "/api/v1/gofers/"); n != 1 {
		t.Fatalf("%d POSTs for one silent chat, want 1", n)
	}

	// Escalations: accepted and declined, each POSTed once, by the owner
	// over slixmpp.
	if _, err := srv.MatchRequest(gofer, "Counterpart A"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.PairProposed(gofer, "Counterpart B", true); err != nil {
		t.Fatal(err)
	}
	st, closeStore := oanStore(t, e)
	defer closeStore()
	testkit.WaitFor(t, 20*time.Second, "two pending escalations", func() bool {
		items, _ := st.Items(ctx, ep.String(), oandb.StatePending)
		return len(items) == 2
	})
	e2e.RequireChecks(t, e2e.RunSlixmpp(t, e, "oan.py", "alice", "--endpoint", ep.String(), "--mode", "escalate", "--answers", "accept,decline"), "escalate")
	l2, _ := srv.Log()
	if l2.Count("POST", "/api/v1/match-requests/") != 1 || l2.Count("POST", "/api/v1/threads/") != 1 {
		t.Fatalf("decision POSTs: match %d pair %d", l2.Count("POST", "/api/v1/match-requests/"), l2.Count("POST", "/api/v1/threads/"))
	}

	// A third, never answered by the owner: the input expires and nothing
	// is POSTed; meanwhile the non-owner can neither run escalations nor
	// answer the owner's pending input.
	srv.MatchRequest(gofer, "Counterpart C")
	testkit.WaitFor(t, 20*time.Second, "a third pending escalation", func() bool {
		items, _ := st.Items(ctx, ep.String(), oandb.StatePending)
		return len(items) == 1
	})
	p, err := c.Pin(ctx, ep, "escalations")
	if err != nil {
		t.Fatal(err)
	}
	acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: "escalations", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	var pending struct {
		rid string
		rev int64
	}
	var mu sync.Mutex
	done := make(chan *agentclient.Outcome, 1)
	go func() {
		out, _ := c.Follow(ctx, ep, acc, agentclient.CallOptions{OnInput: func(ctx context.Context, r agentclient.InputRequest) (json.RawMessage, error) {
			mu.Lock()
			pending.rid, pending.rev = r.RequestID, r.Revision
			mu.Unlock()
			<-ctx.Done() // the owner never answers
			return nil, ctx.Err()
		}})
		done <- out
	}()
	testkit.WaitFor(t, 20*time.Second, "the owner's pending input", func() bool { mu.Lock(); defer mu.Unlock(); return pending.rid != "" })
	mu.Lock()
	rid, rev := pending.rid, pending.rev
	mu.Unlock()
	e2e.RequireChecks(t, e2e.RunSlixmpp(t, e, "oan.py", "mallory", "--endpoint", ep.String(), "--mode", "nonowner",
		"--task", acc.TaskID, "--request", rid, "--revision", fmt.Sprint(rev)), "nonowner")
	testkit.WaitFor(t, 60*time.Second, "the unanswered escalation to expire", func() bool {
		st, err := c.State(ctx, ep, acc.TaskID)
		return err == nil && st.State == "failed"
	})
	if l3, _ := srv.Log(); l3.Count("POST", "/api/v1/match-requests/") != 1 {
		t.Fatalf("an unanswered escalation was POSTed (%d match decisions)", l3.Count("POST", "/api/v1/match-requests/"))
	}
	e2e.RequireChecks(t, e2e.RunSlixmpp(t, e, "oan.py", "alice", "--endpoint", ep.String(), "--mode", "ignore"), "ignore")
	if l4, _ := srv.Log(); l4.Count("POST", "/api/v1/match-requests/") != 1 {
		t.Fatal("an unanswered escalation was POSTed")
	}

	// Chat through Human Messaging: the owner's message is a Gofer chat
	// message and the reply comes back as chat.
	e2e.RequireChecks(t, e2e.RunSlixmpp(t, e, "oan.py", "alice", "--endpoint", ep.String(), "--mode", "chat", "--body", "hello over xmpp"), "chat")

	// Socket drop and "io server disconnect": back-fill recovers.
	for i, fault := range []func() error{srv.Drop, srv.ServerDisconnect} {
		fault()
		srv.Emit(map[string]any{"type": "match_request", "goferId": gofer, "source": "platform",
			"payload": map[string]any{"requestId": fmt.Sprintf("rq-fault-%d", i), "counterpartRoleName": "X"},
			"reply":   map[string]any{"method": "POST", "path": fmt.Sprintf("/api/v1/match-requests/rq-fault-%d/decision", i)}})
		testkit.WaitFor(t, 30*time.Second, "back-filled after a fault", func() bool {
			items, _ := st.Items(ctx, ep.String(), oandb.StatePending)
			return len(items) == 2+i
		})
	}

	// kill -9 mid-stream: every event applied exactly once after the
	// restart, the cursor monotonic and numeric.
	before, _ := st.Cursor(ctx, ep.String())
	stop := make(chan struct{})
	emitted := make(chan int, 1)
	go func() {
		n := 0
		defer func() { emitted <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := srv.Emit(map[string]any{"type": "match_request", "goferId": gofer, "source": "platform",
				"payload": map[string]any{"requestId": fmt.Sprintf("rq-burst-%d", n), "counterpartRoleName": "Burst"},
				"reply":   map[string]any{"method": "POST", "path": fmt.Sprintf("/api/v1/match-requests/rq-burst-%d/decision", n)}}); err == nil {
				n++
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(400 * time.Millisecond)
	gw.Kill()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	n := <-emitted
	mid, _ := st.Cursor(ctx, ep.String())
	if mid < before {
		t.Fatalf("cursor went back %d → %d", before, mid)
	}
	gw2 := e.Serve("gw2")
	l5, _ := srv.Log()
	testkit.WaitFor(t, 60*time.Second, "the restarted gateway to catch up", func() bool {
		c, _ := st.Cursor(ctx, ep.String())
		return fmt.Sprint(c) == l5.Cursor
	})
	items, _ := st.Items(ctx, ep.String(), oandb.StatePending)
	burst := map[string]int{}
	for _, it := range items {
		if strings.Contains(it.ReplyPath, "rq-burst-") {
			burst[it.ReplyPath]++
		}
	}
	if len(burst) != n {
		t.Fatalf("%d burst events emitted, %d applied", n, len(burst))
	}
	for p, c := range burst {
		if c != 1 {
			t.Fatalf("%s applied %d times", p, c)
		}
	}
	after, _ := st.Cursor(ctx, ep.String())
	if after < mid || after < 10 {
		t.Fatalf("cursor %d after %d (want monotonic, past the 9→10 boundary)", after, mid)
	}
	t.Logf("kill -9 mid-stream: %d events emitted during the crash window, each applied once; cursor %d → %d → %d", n, before, mid, after)

	// Revocation, then a new pairing; then a ban. The owner, subscribed
	// to the endpoint, sees its presence go unavailable.
	ready := filepath.Join(e.Dir, "presence.ready")
	type scriptOut struct {
		stdout []byte
		stderr string
		err    error
	}
	presence := make(chan scriptOut, 1)
	go func() {
		o, se, err := e2e.ExecSlixmpp(t, e, "oan.py", "alice", "--endpoint", ep.String(), "--mode", "presence", "--ready-file", ready)
		presence <- scriptOut{o, se, err}
	}()
	testkit.WaitFor(t, 60*time.Second, "the owner to see the endpoint available", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	srv.Revoke()
	if p := <-presence; p.err != nil || !strings.Contains(string(p.stdout), `"check": "presence"`) {
		t.Fatalf("presence script: %v\n%s\n%s", p.err, p.stdout, p.stderr)
	}
	gw2.WaitLog("OAN revoked the API key", 30*time.Second)
	res, err = c.Call(ctx, ep, "list_gofers", json.RawMessage(`{}`), agentclient.CallOptions{})
	if err != nil || res.State != "failed" {
		t.Fatalf("list_gofers while revoked: %v %+v", err, res)
	}
	code3, _ := srv.PairingCode()
	e.Agentgw(0, "oan", "pair", "--config", e.ConfigPath, "--force", "--code", code3, ep.String())
	gw2.WaitLog("a new OAN API key was paired", 30*time.Second)
	testkit.WaitFor(t, 30*time.Second, "working again after re-pairing", func() bool {
		res, err := c.Call(ctx, ep, "list_gofers", json.RawMessage(`{}`), agentclient.CallOptions{})
		return err == nil && res.State == "completed"
	})
	srv.Ban()
	gw2.WaitLog("banned", 30*time.Second)
	if strings.Count(gw2.Log(), "OAN revoked the API key") != 1 {
		t.Errorf("revocation logged %d times, want once", strings.Count(gw2.Log(), "OAN revoked the API key"))
	}
	newKey, _ := os.ReadFile(keyFile)
	for _, key := range []string{k, strings.TrimSpace(string(newKey))} {
		for name, text := range map[string]string{"gw1 log": gw.Log(), "gw2 log": gw2.Log()} {
			if strings.Contains(text, key) {
				t.Errorf("%s contains the API key", name)
			}
		}
	}
	if l, _ := srv.Log(); l.StorageAuthSeen != 0 {
		t.Errorf("the storage host saw an Authorization header")
	}
	if out := e.Agentgw(0, "oan", "unpair", "--config", e.ConfigPath, ep.String()); !strings.Contains(out, "unpaired") {
		t.Fatalf("unpair: %s", out)
	}
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Fatalf("the key file survived unpair: %v", err)
	}
	e.Agentgw(1, "oan", "unpair", "--config", e.ConfigPath, ep.String())
}
