package secrets

// The secrets of [agents.mcp.oauth] (issue 32 §3): client secrets, access
// tokens, refresh tokens and the token file's content, and the MCP
// session id the bridge keeps in task_backend_state to re-attach an HTTP
// task after a restart (for that server it works like a bearer). Each
// is counted in the gateway's debug log, `agentgw oauth login` and
// `agentgw doctor` output, the CLI caller's output (-v), /metrics, task outcomes (the errors of a lost
// login included) and, except the session id that must be kept there,
// the SQLite files.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/mcpbridge/mcpoauth"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/oauthharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

const (
	plOAuthLogin    = "CLI oauth login: output"
	plOAuthOutcomes = "task outcomes (errors included)"
)

// sessionRecorder is a reverse proxy in front of an MCP server that
// learns every Mcp-Session-Id the server hands out.
type sessionRecorder struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *sessionRecorder) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.ids {
		out = append(out, id)
	}
	return out
}

func recordSessions(t *testing.T, target string) (string, *sessionRecorder) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &sessionRecorder{ids: map[string]bool{}}
	p := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	p.FlushInterval = -1
	p.ModifyResponse = func(r *http.Response) error {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			rec.mu.Lock()
			rec.ids[id] = true
			rec.mu.Unlock()
		}
		return nil
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL + u.Path, rec
}

func TestSecretsAuditOAuth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rec := &e2e.SecRecorder{}
	addr, listen := e2e.FreeAddr(t), e2e.FreeAddr(t)
	resource := "http://" + addr + "/mcp"
	ccSecret, appSecret := e2e.SecRandom("OAuthCCSecret"), e2e.SecRandom("OAuthAppSecret")
	const ttl = 6
	cc := oauthharness.Client{ID: "sec-cc", Secret: ccSecret, GrantTypes: []string{"client_credentials"}, JID: "gw@example.test"}
	app := oauthharness.Client{ID: "sec-app", Secret: appSecret, GrantTypes: []string{"authorization_code", "refresh_token"},
		RedirectURIs: []string{"http://" + listen + "/callback"}}
	is := oauthharness.Start(t, oauthharness.Options{Clients: []oauthharness.Client{cc, app}, AccessTokenTTL: ttl,
		Resources: map[string]oauthharness.Resource{resource: {Scope: "tools", TTL: ttl}}})
	tokensFile := filepath.Join(t.TempDir(), "tokens")
	ps := e2e.StartProtectedMCP(t, is.URL, addr, "--tokens-to", tokensFile)

	// server-everything over HTTP, for an MCP task whose session id the
	// gateway keeps.
	node, entry := e2e.AccEverything(t)
	evURL := startEverythingHTTP(t, node, entry)
	proxied, sessions := recordSessions(t, evURL)

	metricsAddr := e2e.FreeAddr(t)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	d := srv.ComponentDomain
	toml := e2e.OAuthTOML("cc", d, ps.URL, "grant = \"client_credentials\"\nclient_id = \"sec-cc\"\nclient_secret_file = \"cc.secret\"") +
		e2e.OAuthTOML("user", d, ps.URL, "grant = \"authorization_code\"\nclient_id = \"sec-app\"\nclient_secret_file = \"app.secret\"\nscopes = [\"tools\"]\ntoken_file = \"oauth/user.json\"") +
		fmt.Sprintf("\n[[agents]]\njid = %q\n[agents.mcp]\nurl = %q\n\n[metrics]\nlisten = %q\n", "research@"+d, proxied, metricsAddr)
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: toml})
	for f, v := range map[string]string{"cc.secret": ccSecret, "app.secret": appSecret} {
		if err := os.WriteFile(filepath.Join(e.Dir, f), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tokenFile := filepath.Join(e.Dir, "oauth", "user.json")
	var refreshTokens, fileContents []string
	learnFile := func() {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			t.Fatal(err)
		}
		tf, err := mcpoauth.ReadTokenFile(tokenFile)
		if err != nil {
			t.Fatal(err)
		}
		refreshTokens = append(refreshTokens, tf.RefreshToken)
		fileContents = append(fileContents, strings.TrimSpace(string(b)))
	}

	rec.Add(plOAuthLogin, []byte(e2e.OAuthLogin(t, ctx, e, is, listen, "user@"+d, "carol@example.test")))
	learnFile()
	out, _ := e2e.SecRun(t, e.Dir, nil, "doctor", "--config", e.ConfigPath, "--verbose")
	rec.Add(e2e.PlDoctor, []byte(out))
	if n := strings.Count(out, "MCP server answered initialize"); n != 3 {
		t.Errorf("doctor reached %d of the 3 MCP servers (two through OAuth):\n%s", n, out)
	}

	gw := e.Serve("gw")
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	call := func(agent, tool, args string) *agentclient.Outcome {
		o, err := c.Call(ctx, e.Endpoint(agent), tool, json.RawMessage(args), agentclient.CallOptions{})
		if err != nil {
			rec.Add(plOAuthOutcomes, []byte(err.Error()))
			return nil
		}
		b, _ := json.Marshal(o)
		rec.Add(plOAuthOutcomes, b)
		return o
	}
	for _, a := range []string{"cc", "user"} {
		if o := call(a, "whoami", `{}`); o == nil || o.State != "completed" {
			t.Fatalf("whoami at %s: %+v\n%s", a, o, e2e.Tail(gw.Log(), 3000))
		}
	}
	res := call("research", researchTool, `{"topic":"tides"}`)
	if res == nil || res.State != "completed" {
		t.Fatalf("research: %+v", res)
	}
	// The CLI caller reads the task back (and calls the OAuth agents).
	if err := os.WriteFile(filepath.Join(e.Dir, "alice.pw"), []byte(e2e.Password+"alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := []string{"--jid", "alice@" + srv.Domain, "--password-file", "alice.pw", "--server", srv.C2SAddr, "--insecure-skip-verify", "--gateway", d, "-v"}
	for _, args := range [][]string{
		{"task state", "research@" + d, res.Accepted.TaskID},
		{"task result", "research@" + d, res.Accepted.TaskID},
		{"call", "--json", "user@" + d, "whoami"},
		{"call", "--json", "cc@" + d, "whoami"},
	} {
		out, code := e2e.SecRun(t, e.Dir, nil, append(append(strings.Fields(args[0]), cli...), args[1:]...)...)
		rec.Add(e2e.PlCLICaller, []byte(out))
		if code != 0 {
			t.Errorf("agentgw %v exited %d:\n%s", args, code, out)
		}
	}
	// Across expiry (a refresh, a rotated refresh token), then revoked.
	first := time.Now()
	testkit.WaitFor(t, 3*ttl*time.Second, "the access tokens to expire", func() bool { return time.Since(first) > (ttl+1)*time.Second })
	for _, a := range []string{"cc", "user"} {
		if o := call(a, "whoami", `{}`); o == nil || o.State != "completed" {
			t.Fatalf("whoami at %s after expiry: %+v", a, o)
		}
	}
	learnFile()
	if err := is.Revoke(ctx, app, refreshTokens[len(refreshTokens)-1]); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	testkit.WaitFor(t, 3*ttl*time.Second, "the access token to expire", func() bool { return time.Since(revoked) > (ttl+1)*time.Second })
	if o := call("user", "whoami", `{}`); o != nil && o.State == "completed" {
		t.Fatal("a call after the revocation completed")
	}
	gw.WaitLog("MCP server needs a new OAuth login", 60*time.Second)
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	rec.Add(e2e.PlMetrics, mb)
	gw.Stop()
	rec.Add(e2e.PlGatewayLog, []byte(gw.Log()))
	for _, f := range []struct{ place, name string }{{e2e.PlDB, "agentgw.db"}, {e2e.PlWAL, "agentgw.db-wal"}} {
		if b, err := os.ReadFile(filepath.Join(e.Dir, f.name)); err == nil {
			rec.Add(f.place, b)
		}
	}

	tb, err := os.ReadFile(tokensFile)
	if err != nil {
		t.Fatal(err)
	}
	access := strings.Fields(string(tb))
	ids := sessions.list()
	if len(access) < 3 || len(refreshTokens) < 2 || len(ids) == 0 {
		t.Fatalf("learned %d access tokens, %d refresh tokens, %d session ids: the flows did not run", len(access), len(refreshTokens), len(ids))
	}
	type secret struct {
		kind, value string
		inStore     bool // allowed in the SQLite files
	}
	var all []secret
	all = append(all, secret{"client secret (client credentials)", ccSecret, false}, secret{"client secret (authorization code)", appSecret, false})
	for _, v := range access {
		all = append(all, secret{"access token", v, false})
	}
	for _, v := range refreshTokens {
		all = append(all, secret{"refresh token", v, false})
	}
	for _, v := range fileContents {
		all = append(all, secret{"token_file content", v, false})
	}
	for _, v := range ids {
		all = append(all, secret{"MCP session id", v, true})
	}
	places := []string{e2e.PlGatewayLog, plOAuthLogin, e2e.PlDoctor, e2e.PlCLICaller, e2e.PlMetrics, plOAuthOutcomes, e2e.PlDB, e2e.PlWAL}
	leaks := 0
	for _, s := range all {
		for _, p := range places {
			if (p == e2e.PlDB || p == e2e.PlWAL) && s.inStore {
				continue
			}
			if n := strings.Count(rec.Text(p), s.value); n > 0 {
				leaks++
				t.Errorf("%s (%d bytes) appears %d time(s) in %s", s.kind, len(s.value), n, p)
			}
		}
	}
	stored := strings.Count(rec.Text(e2e.PlDB)+rec.Text(e2e.PlWAL), ids[0])
	t.Logf("audited %d secrets (%d access tokens, %d refresh tokens, %d token_file versions, %d session ids, 2 client secrets) in %d places: %d leaks; the session id is in the store %d time(s)",
		len(all), len(access), len(refreshTokens), len(fileContents), len(ids), len(places), leaks, stored)
}

// researchTool is server-everything's tool that runs as an MCP task.
const researchTool = "simulate-research-query"

// startEverythingHTTP runs server-everything over streamable HTTP.
func startEverythingHTTP(t *testing.T, node, entry string) string {
	t.Helper()
	port := e2e.FreePort(t)
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Env = append(cmd.Environ(), "PORT="+strconv.Itoa(port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.StopOnCleanup(t, cmd, "server-everything")
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				once.Do(func() { close(listening) })
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(60 * time.Second):
		t.Fatal("server-everything streamableHttp did not start listening within 60 s")
	}
	return "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
}
