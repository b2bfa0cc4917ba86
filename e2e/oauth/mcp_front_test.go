package oauth

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	gatewaytest "github.com/agentgw/agentgw/testkit/e2e"
)

type mcpOut struct {
	Fetches []struct {
		Method, URL, Challenge string
		Status                 int
	} `json:"fetches"`
	Steps []struct {
		Op     string          `json:"op"`
		Tools  []string        `json:"tools"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	} `json:"steps"`
	Token bool `json:"token"`
	Fatal *struct {
		Message string `json:"message"`
	} `json:"fatal"`
}

type tasksOut struct {
	Steps []struct {
		Op     string `json:"op"`
		TaskID string `json:"taskId"`
		Task   *struct {
			Status string `json:"status"`
		} `json:"task"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	} `json:"steps"`
	Fatal *struct {
		Message string `json:"message"`
	} `json:"fatal"`
}

// Two users through one `agentgw mcp --http --issuer`: the TS SDK's OAuth
// client finds the issuer from the front's 401 and gets a token by itself;
// each user sees the tools their own JID may see and neither can read or
// cancel the other's task; hostile tokens are refused with 401 and never
// logged.
func TestMCPFrontOAuthUsers(t *testing.T) {
	t.Parallel()
	x := startEnv(t, "/mcp")
	f := x.startFront(t, "mcp", "serving MCP", "--public-url", x.resource, "--scopes", "agents")
	meta := "http://" + x.addr + "/.well-known/oauth-protected-resource/mcp"

	plan := func(c string, secret string, steps ...map[string]any) map[string]any {
		return map[string]any{"url": x.resource, "clientId": c, "clientSecret": secret, "scope": "agents", "steps": steps}
	}
	var alice mcpOut
	x.node(t, "oauth/mcpclient.mjs", plan(x.alice.ID, x.alice.Secret,
		map[string]any{"op": "list"},
		map[string]any{"op": "call", "tool": "vault.echo", "args": map[string]any{"message": "for alice"}}), &alice)
	if alice.Fatal != nil {
		t.Fatalf("alice's MCP client: %s\nfront:\n%s", alice.Fatal.Message, f.stderr())
	}
	// Discovery from the 401, as MCP 2026-07-28 names it.
	if len(alice.Fetches) == 0 || alice.Fetches[0].Status != http.StatusUnauthorized || !strings.Contains(alice.Fetches[0].Challenge, `resource_metadata="`+meta+`"`) {
		t.Fatalf("the first exchange was not the challenge: %+v", alice.Fetches)
	}
	fetched := func(o mcpOut, url string) bool {
		return slices.ContainsFunc(o.Fetches, func(e struct {
			Method, URL, Challenge string
			Status                 int
		}) bool {
			return strings.HasPrefix(e.URL, url) && e.Status == http.StatusOK
		})
	}
	if !fetched(alice, meta) || !fetched(alice, x.is.URL+"/token") {
		t.Fatalf("the client did not read the metadata and the issuer's token endpoint: %+v", alice.Fetches)
	}
	if !alice.Token || len(alice.Steps) != 2 {
		t.Fatalf("alice: %+v", alice)
	}
	if !slices.Contains(alice.Steps[0].Tools, "vault.echo") || !slices.Contains(alice.Steps[0].Tools, "weather.echo") {
		t.Fatalf("alice sees %v, want vault and weather tools", alice.Steps[0].Tools)
	}
	if alice.Steps[1].Error != nil || !strings.Contains(string(alice.Steps[1].Result), "for alice") {
		t.Fatalf("alice's call: %+v %s", alice.Steps[1].Error, alice.Steps[1].Result)
	}

	var bob mcpOut
	x.node(t, "oauth/mcpclient.mjs", plan(x.bob.ID, x.bob.Secret,
		map[string]any{"op": "list"},
		map[string]any{"op": "call", "tool": "vault.echo", "args": map[string]any{"message": "for bob"}}), &bob)
	if bob.Fatal != nil || len(bob.Steps) != 2 {
		t.Fatalf("bob's MCP client: %+v", bob)
	}
	if slices.ContainsFunc(bob.Steps[0].Tools, func(s string) bool { return strings.HasPrefix(s, "vault.") }) || !slices.Contains(bob.Steps[0].Tools, "weather.echo") {
		t.Fatalf("bob sees %v, want weather's tools only", bob.Steps[0].Tools)
	}
	if strings.Contains(string(bob.Steps[1].Result), "for bob") && !strings.Contains(string(bob.Steps[1].Result), "isError") {
		t.Fatalf("bob called vault: %s", bob.Steps[1].Result)
	}

	// Tasks: alice starts one (the TS SDK's tasks client, bearer from the
	// issuer); bob, holding its id, can neither read nor cancel it.
	aliceTok, bobTok := x.token(t, x.alice, x.resource), x.token(t, x.bob, x.resource)
	tasksPlan := func(tok string, steps ...map[string]any) map[string]any {
		return map[string]any{"transport": "http", "url": x.resource, "bearer": tok, "steps": steps}
	}
	var started tasksOut
	x.node(t, "mcpfront/tasks.mjs", tasksPlan(aliceTok, map[string]any{"op": "create", "tool": "weather.wait", "args": map[string]any{}, "ttl": 600000}), &started)
	if started.Fatal != nil || len(started.Steps) != 1 || started.Steps[0].TaskID == "" {
		t.Fatalf("alice's task: %+v\nfront:\n%s", started, f.stderr())
	}
	id := started.Steps[0].TaskID
	var stolen tasksOut
	x.node(t, "mcpfront/tasks.mjs", tasksPlan(bobTok,
		map[string]any{"op": "get", "taskId": id},
		map[string]any{"op": "cancel", "taskId": id},
		map[string]any{"op": "result", "taskId": id, "timeoutMs": 5000}), &stolen)
	if stolen.Fatal != nil || len(stolen.Steps) != 3 {
		t.Fatalf("bob's client: %+v", stolen)
	}
	for _, s := range stolen.Steps {
		if s.Error == nil {
			t.Errorf("bob's %s of alice's task succeeded: %+v", s.Op, s.Task)
		}
	}
	var own tasksOut
	x.node(t, "mcpfront/tasks.mjs", tasksPlan(aliceTok,
		map[string]any{"op": "get", "taskId": id},
		map[string]any{"op": "cancel", "taskId": id}), &own)
	if own.Fatal != nil || len(own.Steps) != 2 || own.Steps[0].Error != nil || own.Steps[0].Task.Status != "working" || own.Steps[1].Error != nil {
		t.Fatalf("alice's own task after bob's tries: %+v", own)
	}

	// An MCP session belongs to its user: Bob's token with Alice's
	// session id finds no session.
	post := func(tok, session, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, x.resource, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp, string(b)
	}
	resp, _ := post(aliceTok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("alice's initialize: %d, session %q", resp.StatusCode, sid)
	}
	post(aliceTok, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	if resp, body := post(bobTok, sid, list); resp.StatusCode == http.StatusOK || strings.Contains(body, "vault.") {
		t.Fatalf("bob in alice's session: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(aliceTok, sid, list); resp.StatusCode != http.StatusOK || !strings.Contains(body, "vault.echo") {
		t.Fatalf("alice in her session: %d %.300s", resp.StatusCode, body)
	}

	// Hostile tokens at the front.
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	refuses(t, x.resource, http.MethodPost, meta, body, x.hostile(t), f)
	// The tokens it accepted never reach its log either.
	keepsSecret(t, f, aliceTok, bobTok)
	// The metadata, at the path-suffixed and the root well-known URL.
	for _, u := range []string{meta, "http://" + x.addr + "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if m.Resource != x.resource || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != x.is.URL {
			t.Fatalf("%s: %+v", u, m)
		}
	}
}

// The gateway side of the assertion, through Prosody: the trusted front
// acts for a principal, whose tasks are theirs alone; any other account
// naming a principal gets the same forbidden, whatever it names.
func TestPrincipalAssertionThroughProsody(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{
		Agents: []gatewaytest.Agent{{Localpart: "weather"}},
		Users:  []string{"front", "alice", "bob", "mallory", "root"},
		Admins: []string{"root"},
		Mutate: func(c *config.Config) { c.Policy.TrustedFronts = []string{"front@example.test"} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	front, mallory, bob := gw.Dial("front"), gw.Dial("mallory"), gw.Dial("bob")
	ep := gw.Endpoint("weather")
	pin := gatewaytest.WaitPinned(t, ctx, front, ep, "wait")
	asAlice := agentclient.WithPrincipal(ctx, gatewaytest.MustJID("alice@example.test"))
	asBob := agentclient.WithPrincipal(ctx, gatewaytest.MustJID("bob@example.test"))
	acc, err := front.Invoke(asAlice, ep, invokeReq(pin, "wait", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := front.State(asAlice, ep, acc.TaskID)
	if err != nil {
		t.Fatalf("alice's own task through the front: %v", err)
	}
	for name, op := range map[string]func() error{
		"front as bob: state":  func() error { _, err := front.State(asBob, ep, acc.TaskID); return err },
		"front as bob: cancel": func() error { _, err := front.Cancel(asBob, ep, acc.TaskID, 0, nil); return err },
		"front itself: state":  func() error { _, err := front.State(ctx, ep, acc.TaskID); return err },
		"bob himself: result":  func() error { _, err := bob.Result(ctx, ep, acc.TaskID); return err },
	} {
		if err := op(); gatewaytest.ErrCondition(err) != "item-not-found" {
			t.Errorf("%s: %v, want item-not-found", name, err)
		}
	}
	// Not a trusted front: refused, the same whatever is claimed.
	_, e1 := mallory.State(asAlice, ep, acc.TaskID)
	_, e2 := mallory.State(asBob, ep, acc.TaskID)
	_, e3 := mallory.Invoke(asAlice, ep, invokeReq(pin, "echo", `{"message":"x"}`))
	if gatewaytest.ErrCondition(e1) != "forbidden" || e1.Error() != e2.Error() || gatewaytest.ErrCondition(e3) != "forbidden" {
		t.Fatalf("mallory asserting a principal: %v / %v / %v", e1, e2, e3)
	}
	if strings.Contains(e1.Error(), "alice") {
		t.Fatalf("the refusal reflects the claim: %v", e1)
	}
	// An admin acts only as themselves: no front can name one.
	asRoot := agentclient.WithPrincipal(ctx, gatewaytest.MustJID("root@example.test"))
	if _, err := front.Invoke(asRoot, ep, invokeReq(pin, "echo", `{"message":"x"}`)); gatewaytest.ErrCondition(err) != "forbidden" {
		t.Fatalf("the front naming an admin: %v, want forbidden", err)
	}
	// Cancel as alice through the front settles her task.
	if _, err := front.Cancel(asAlice, ep, acc.TaskID, st.Revision, nil); err != nil {
		t.Fatalf("alice cancels through the front: %v", err)
	}
}

func invokeReq(p *agentclient.Pinned, tool, args string) *agentclient.InvokeRequest {
	return &agentclient.InvokeRequest{Tool: tool, Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(args)}
}
