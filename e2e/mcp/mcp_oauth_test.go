package mcp

// MCP servers that need a login (issue 32 §3): an [agents.mcp] url server
// protected by the go-sdk's auth.RequireBearerToken (its own process,
// tokens of a real oidc-provider checked for audience), called through
// Prosody after the gateway discovered the authorization server from the
// server's 401 and got a token by client credentials, or by the refresh
// token of one `agentgw oauth login` (authorization code with PKCE, the
// browser step driven over HTTP). Refresh works across expiry; a revoked
// refresh token makes the endpoint unavailable with one log line and no
// token in it, and a new login brings it back without a restart.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/mcpbridge/mcpoauth"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/oauthharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

const lostLogin = "MCP server needs a new OAuth login"

// whoami calls the protected server's whoami tool and returns the
// principal the server saw, or the failed outcome.
func whoami(ctx context.Context, c *agentclient.Client, ep jid.JID) (map[string]string, *agentclient.Outcome, error) {
	out, err := c.Call(ctx, ep, "whoami", json.RawMessage(`{}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" {
		return nil, out, err
	}
	var res struct {
		Result struct {
			StructuredContent map[string]string `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out.Payload, &res); err != nil {
		return nil, out, fmt.Errorf("whoami payload %.300s: %v", out.Payload, err)
	}
	return res.Result.StructuredContent, out, nil
}

func TestMCPOAuthClientCredentials(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addr := e2e.FreeAddr(t)
	resource := "http://" + addr + "/mcp"
	secret := e2e.SecRandom("cc-secret-")
	svc := oauthharness.Client{ID: "agentgw-cc", Secret: secret, GrantTypes: []string{"client_credentials"}, JID: "gateway@example.test"}
	is := oauthharness.Start(t, oauthharness.Options{Clients: []oauthharness.Client{svc},
		Resources: map[string]oauthharness.Resource{resource: {Scope: "tools"}, resource + "-other": {Scope: "tools"}}})
	ps := e2e.StartProtectedMCP(t, is.URL, addr)

	// The server checks the audience: a good token for another resource
	// is refused.
	other, err := is.ClientCredentials(ctx, svc, resource+"-other", "tools")
	if err != nil {
		t.Fatal(err)
	}
	if code := post(t, ps.URL, other.AccessToken); code != http.StatusUnauthorized {
		t.Fatalf("a token for another resource got %d, want 401", code)
	}

	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"},
		TOML: e2e.OAuthTOML("guarded", srv.ComponentDomain, ps.URL,
			"grant = \"client_credentials\"\nclient_id = \"agentgw-cc\"\nclient_secret_file = \"cc.secret\"\nscopes = [\"tools\"]")})
	if err := os.WriteFile(filepath.Join(e.Dir, "cc.secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := e.Serve("gw")
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	who, out, err := whoami(ctx, c, e.Endpoint("guarded"))
	if err != nil || who == nil {
		t.Fatalf("whoami through the gateway: %v %+v\n%s", err, out, e2e.Tail(gw.Log(), 3000))
	}
	if who["client_id"] != "agentgw-cc" || who["jid"] != "gateway@example.test" {
		t.Fatalf("the server saw %v, want the gateway's client", who)
	}
	t.Logf("client credentials: whoami = %v, %v after the first call started", who, time.Since(start).Round(time.Millisecond))
	if strings.Contains(gw.Log(), secret) {
		t.Fatal("the client secret is in the gateway log")
	}
}

// post sends an initialize with token and returns the status.
func post(t *testing.T, url, token string) int {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestMCPOAuthLoginRefreshRevoke(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	addr, listen := e2e.FreeAddr(t), e2e.FreeAddr(t)
	resource := "http://" + addr + "/mcp"
	secret := e2e.SecRandom("app-secret-")
	const ttl = 6 * time.Second
	app := oauthharness.Client{ID: "agentgw-app", Secret: secret, GrantTypes: []string{"authorization_code", "refresh_token"},
		RedirectURIs: []string{"http://" + listen + "/callback"}}
	is := oauthharness.Start(t, oauthharness.Options{Clients: []oauthharness.Client{app}, AccessTokenTTL: int(ttl / time.Second),
		Resources: map[string]oauthharness.Resource{resource: {Scope: "tools", TTL: int(ttl / time.Second)}}})
	ps := e2e.StartProtectedMCP(t, is.URL, addr)

	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"},
		TOML: e2e.OAuthTOML("carolsdrive", srv.ComponentDomain, ps.URL,
			"grant = \"authorization_code\"\nclient_id = \"agentgw-app\"\nclient_secret_file = \"app.secret\"\nscopes = [\"tools\"]\ntoken_file = \"oauth/carolsdrive.json\"")})
	if err := os.WriteFile(filepath.Join(e.Dir, "app.secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := "carolsdrive@" + srv.ComponentDomain
	tokenFile := filepath.Join(e.Dir, "oauth", "carolsdrive.json")

	printed := e2e.OAuthLogin(t, ctx, e, is, listen, agent, "carol@example.test")
	st, err := os.Stat(tokenFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token_file after login: %v %v, want mode 0600", st, err)
	}
	tf, err := mcpoauth.ReadTokenFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	seen := []string{secret, tf.RefreshToken}
	if strings.Contains(printed, tf.RefreshToken) {
		t.Fatal("agentgw oauth login printed the refresh token")
	}
	t.Logf("login printed:\n%s", printed)

	gw := e.Serve("gw")
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	ep := e.Endpoint("carolsdrive")
	who, out, err := whoami(ctx, c, ep)
	if err != nil || who == nil {
		t.Fatalf("whoami after login: %v %+v\n%s", err, out, e2e.Tail(gw.Log(), 3000))
	}
	if who["jid"] != "carol@example.test" {
		t.Fatalf("the server saw %v, want carol's login", who)
	}
	first := time.Now()

	// Across expiry: the next call needs a new access token, which the
	// gateway gets with the (rotated) refresh token.
	testkit.WaitFor(t, 2*ttl, "the first access token to expire", func() bool { return time.Since(first) > ttl+time.Second })
	if who, out, err = whoami(ctx, c, ep); err != nil || who["jid"] != "carol@example.test" {
		t.Fatalf("whoami after the access token expired: %v %v %+v\n%s", who, err, out, e2e.Tail(gw.Log(), 3000))
	}
	tf2, err := mcpoauth.ReadTokenFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if tf2.RefreshToken == tf.RefreshToken {
		t.Fatal("the refresh token did not rotate across expiry: the gateway did not refresh")
	}
	seen = append(seen, tf2.RefreshToken)
	t.Logf("refresh across expiry: call after %v worked, refresh token rotated in token_file", time.Since(first).Round(time.Millisecond))

	// Revoked: the access token in use runs out, the refresh is refused.
	if err := is.Revoke(ctx, app, tf2.RefreshToken); err != nil {
		t.Fatal(err)
	}
	revoked, logAt := time.Now(), len(gw.Log())
	testkit.WaitFor(t, 2*ttl, "the last access token to expire", func() bool { return time.Since(revoked) > ttl+time.Second })
	_, out, err = whoami(ctx, c, ep)
	if err == nil && out != nil && out.State == "completed" {
		tfx, _ := mcpoauth.ReadTokenFile(tokenFile)
		t.Fatalf("a call after the grant was revoked completed (token file rotated since: %v)\n%s", tfx.RefreshToken != tf2.RefreshToken, e2e.Tail(gw.Log(), 5000))
	}
	gw.WaitLog(lostLogin, 60*time.Second)
	t.Logf("after revocation: %v %s", err, func() string {
		if out == nil {
			return ""
		}
		return string(out.Payload)
	}())
	// Later calls fail too, the gateway keeps running, and it said so
	// once.
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	_, out2, err2 := whoami(cctx, c, ep)
	ccancel()
	if err2 == nil && out2 != nil && out2.State == "completed" {
		t.Fatal("a second call after the grant was revoked completed")
	}
	if out2 != nil {
		t.Logf("a second call: %s %s", out2.State, out2.Payload)
	} else {
		t.Logf("a second call: %v", err2)
	}
	select {
	case <-gw.Exited():
		t.Fatal("the gateway exited after the revocation")
	default:
	}
	if n := strings.Count(gw.Log(), lostLogin); n != 1 {
		t.Fatalf("the lost login was logged %d times, want once:\n%s", n, e2e.Tail(gw.Log(), 4000))
	}
	// Nothing else about this endpoint is said at warning level or
	// above after the revocation: the one line says it all.
	after := gw.Log()[logAt:]
	for _, l := range strings.Split(after, "\n") {
		if strings.Contains(l, lostLogin) {
			t.Logf("the one line: %s", l)
		} else if (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) && strings.Contains(l, "carolsdrive@") {
			t.Errorf("another line about the endpoint after the revocation: %s", l)
		}
	}

	// A new login brings the endpoint back without a restart.
	e2e.OAuthLogin(t, ctx, e, is, listen, agent, "carol@example.test")
	tf3, err := mcpoauth.ReadTokenFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	seen = append(seen, tf3.RefreshToken)
	relogged := time.Now()
	testkit.WaitFor(t, 90*time.Second, "calls to work again after the new login", func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		who, _, err := whoami(cctx, c, ep)
		return err == nil && who["jid"] == "carol@example.test"
	})
	t.Logf("a new login brought the endpoint back %v later", time.Since(relogged).Round(time.Millisecond))
	log := gw.Log()
	for _, s := range seen {
		if strings.Contains(log, s) {
			t.Fatalf("a secret (%d bytes) is in the gateway log", len(s))
		}
	}
}
