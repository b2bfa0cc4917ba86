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
)

// Per-operation scopes on `agentgw mcp --http --issuer`: with
// --scope-for invoke=agents.invoke a token with only "agents" initializes
// and lists tools but its tools/call (alone or in a batch) is 403
// insufficient_scope naming every scope the call needs; a token with
// agents.invoke calls; the metadata lists every scope; nothing logged
// carries a token.
func TestMCPFrontOAuthOpScopes(t *testing.T) {
	t.Parallel()
	x := startEnv(t, "/mcp", "agents.invoke")
	f := x.startFront(t, "mcp", "serving MCP", "--public-url", x.resource, "--scopes", "agents", "--scope-for", "invoke=agents.invoke")
	meta := "http://" + x.addr + "/.well-known/oauth-protected-resource/mcp"
	tok := func(scope string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tk, err := x.is.ClientCredentials(ctx, x.alice, x.resource, scope)
		if err != nil {
			t.Fatalf("%v\n%s", err, x.is.Logs.String())
		}
		return tk.AccessToken
	}
	readTok, invokeTok := tok("agents"), tok("agents agents.invoke")

	post := func(tok, session, body string) (*http.Response, string) {
		t.Helper()
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
	resp, _ := post(readTok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize with the read token: %d, session %q\n%s", resp.StatusCode, sid, f.stderr())
	}
	post(readTok, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp, body := post(readTok, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`); resp.StatusCode != http.StatusOK || !strings.Contains(body, "vault.echo") {
		t.Fatalf("tools/list with the read token: %d %.300s", resp.StatusCode, body)
	}
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"vault.echo","arguments":{"message":"scoped call"}}}`
	want := `Bearer error="insufficient_scope", scope="agents agents.invoke", resource_metadata="` + meta + `"`
	for name, body := range map[string]string{
		"tools/call":          call,
		"a batch with a call": `[{"jsonrpc":"2.0","id":4,"method":"ping"},` + call + `]`,
	} {
		resp, got := post(readTok, sid, body)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("WWW-Authenticate") != want {
			t.Fatalf("%s with the read token: %d %q %.200s", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), got)
		}
		if strings.Contains(got, "scoped call") {
			t.Fatalf("%s with the read token ran: %s", name, got)
		}
	}
	if resp, body := post(invokeTok, sid, call); resp.StatusCode != http.StatusOK || !strings.Contains(body, "scoped call") || strings.Contains(body, `"isError":true`) {
		t.Fatalf("tools/call with agents.invoke: %d %.300s\n%s", resp.StatusCode, body, f.stderr())
	}
	// The metadata lists every scope.
	mresp, err := http.Get(meta)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Scopes []string `json:"scopes_supported"`
	}
	_ = json.NewDecoder(mresp.Body).Decode(&m)
	mresp.Body.Close()
	if !slices.Equal(m.Scopes, []string{"agents", "agents.invoke"}) {
		t.Fatalf("scopes_supported %q", m.Scopes)
	}
	log := f.stderr()
	if !strings.Contains(log, "lacks the operation's scope") || !strings.Contains(log, "missing=agents.invoke") {
		t.Fatalf("the refusal was not logged:\n%s", log)
	}
	for _, tk := range []string{readTok, invokeTok} {
		for _, part := range strings.Split(tk, ".") {
			if len(part) > 16 && strings.Contains(log, part) {
				t.Fatal("the log carries a piece of a token")
			}
		}
	}
}

// The same on `agentgw a2a --issuer` with the @a2a-js/sdk client:
// with --scope-for invoke=agents.invoke a token with only "agents" reads
// the card but its SendMessage is 403 insufficient_scope; a token with
// agents.invoke sends.
func TestA2AFrontOAuthOpScopes(t *testing.T) {
	t.Parallel()
	x := startEnv(t, "", "agents.invoke")
	f := x.startFront(t, "a2a", "serving A2A", "--scopes", "agents", "--scope-for", "invoke=agents.invoke")
	weather := "weather@" + x.gw.Domain
	tok := func(scope string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tk, err := x.is.ClientCredentials(ctx, x.alice, x.resource, scope)
		if err != nil {
			t.Fatalf("%v\n%s", err, x.is.Logs.String())
		}
		return tk.AccessToken
	}
	readTok, invokeTok := tok("agents"), tok("agents agents.invoke")
	send := map[string]any{"op": "send", "jid": weather, "skill": "echo", "data": map[string]any{"message": "scoped send"}}

	var read a2aOut
	x.node(t, "a2a/client.mjs", map[string]any{"base": x.resource, "bearer": readTok, "proto": "1.0-jsonrpc", "steps": []map[string]any{{"op": "card", "jid": weather}}}, &read)
	if read.Fatal != nil || len(read.Steps) != 1 || read.Steps[0].Status != http.StatusOK || !strings.Contains(string(read.Steps[0].Body), "agents.invoke") {
		t.Fatalf("the card with the read token: %+v\n%s", read, f.stderr())
	}
	var refused a2aOut
	x.node(t, "a2a/client.mjs", map[string]any{"base": x.resource, "bearer": readTok, "proto": "1.0-jsonrpc", "steps": []map[string]any{send}}, &refused)
	if refused.Fatal == nil && (len(refused.Steps) != 1 || refused.Steps[0].Error == nil) {
		t.Fatalf("SendMessage with the read token: %+v", refused)
	}
	// The challenge itself, on a raw JSON-RPC request.
	req, _ := http.NewRequest(http.MethodPost, x.resource+"/agents/"+weather, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`))
	req.Header.Set("Authorization", "Bearer "+readTok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := `Bearer error="insufficient_scope", scope="agents agents.invoke", resource_metadata="http://` + x.addr + `/.well-known/oauth-protected-resource"`
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("raw SendMessage with the read token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	var ok a2aOut
	x.node(t, "a2a/client.mjs", map[string]any{"base": x.resource, "bearer": invokeTok, "proto": "1.0-jsonrpc", "steps": []map[string]any{send}}, &ok)
	if ok.Fatal != nil || len(ok.Steps) != 1 || ok.Steps[0].Task == nil || ok.Steps[0].Task.State != "TASK_STATE_COMPLETED" || !strings.Contains(string(ok.Steps[0].Task.Artifacts), "scoped send") {
		t.Fatalf("SendMessage with agents.invoke: %+v\n%s", ok, f.stderr())
	}
	log := f.stderr()
	if strings.Count(log, "lacks the operation's scope") < 2 || !strings.Contains(log, "op=invoke") {
		t.Fatalf("the refusals were not logged:\n%s", log)
	}
	for _, tk := range []string{readTok, invokeTok} {
		for _, part := range strings.Split(tk, ".") {
			if len(part) > 16 && strings.Contains(log, part) {
				t.Fatal("the log carries a piece of a token")
			}
		}
	}
}
