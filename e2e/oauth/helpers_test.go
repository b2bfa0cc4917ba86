package oauth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/testkit"
	gatewaytest "github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/oauthharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

const pwEnv = "OAUTH_TEST_PASSWORD"

// env is a gateway with a public agent (weather) and one only alice may
// see and invoke (vault), an issuer whose clients stand for alice and bob,
// and the front's account listed in [policy] trusted_fronts.
type env struct {
	gw       *gatewaytest.Env
	is       *oauthharness.Issuer
	resource string // the front's public URL (audience)
	other    string // another resource the issuer knows
	addr     string // where the front listens
	root     string
	alice    oauthharness.Client
	bob      oauthharness.Client
	web      oauthharness.Client // a public client that logs users in (PKCE)
}

// startEnv starts the environment of a front at path; scope, if given, is
// the scopes the issuer may grant for the front's resource (default
// "agents").
func startEnv(t *testing.T, path string, scope ...string) *env {
	t.Helper()
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testkit.Unavailable(t, "node is not installed")
	}
	x := &env{root: root, addr: gatewaytest.FreeAddr(t)}
	x.resource = "http://" + x.addr + path
	x.other = "http://" + x.addr + "/not-this-front"
	x.gw = gatewaytest.Start(t, gatewaytest.Options{
		Agents: []gatewaytest.Agent{{Localpart: "weather"}, {Localpart: "vault"}},
		Users:  []string{"front", "alice", "bob", "mallory"},
		Mutate: func(c *config.Config) {
			for i := range c.Agents {
				if strings.HasPrefix(c.Agents[i].JID, "vault@") {
					c.Agents[i].VisibleTo = []string{"alice@example.test"}
					c.Agents[i].InvocableBy = []string{"alice@example.test"}
				}
			}
			c.Policy.TrustedFronts = []string{"front@example.test"}
		},
	})
	x.alice = oauthharness.Client{ID: "alice-app", Secret: "alice-secret-" + rand.Text(), GrantTypes: []string{"client_credentials"}, JID: "alice@example.test"}
	x.bob = oauthharness.Client{ID: "bob-app", Secret: "bob-secret-" + rand.Text(), GrantTypes: []string{"client_credentials"}, JID: "bob@example.test"}
	x.web = oauthharness.Client{ID: "web", GrantTypes: []string{"authorization_code", "refresh_token"}, AuthMethod: "none", RedirectURIs: []string{"http://127.0.0.1:1/callback"}}
	x.is = oauthharness.Start(t, oauthharness.Options{Clients: []oauthharness.Client{x.alice, x.bob, x.web},
		Resources: map[string]oauthharness.Resource{x.resource: {Scope: strings.Join(append([]string{"agents"}, scope...), " ")}, x.other: {Scope: "agents"}}})
	return x
}

func (x *env) token(t *testing.T, c oauthharness.Client, resource string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := x.is.ClientCredentials(ctx, c, resource, "agents")
	if err != nil {
		t.Fatalf("%v\n%s", err, x.is.Logs.String())
	}
	return tok.AccessToken
}

// front is a running `agentgw mcp` or `agentgw a2a` with its stderr.
type front struct {
	mu  sync.Mutex
	err strings.Builder
}

func (f *front) stderr() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err.String()
}

// startFront runs agentgw CMD as front@ with args and waits for ready on
// its stderr.
func (x *env) startFront(t *testing.T, cmdName, ready string, args ...string) *front {
	t.Helper()
	s := x.gw.Server
	all := append([]string{cmdName, "--jid", x.gw.JID("front"), "--password-env", pwEnv, "--server", s.C2SAddr, "--ca-file", s.CAFile,
		"--gateway", x.gw.Domain, "--http", x.addr, "--issuer", x.is.URL, "--jid-claim", "jid"}, args...)
	cmd := exec.Command(gatewaytest.Binary(t), all...)
	cmd.Env = append(os.Environ(), pwEnv+"="+gatewaytest.Password+"front")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.StopOnCleanup(t, cmd, "agentgw "+cmdName)
	f := &front{}
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			f.mu.Lock()
			f.err.WriteString(sc.Text() + "\n")
			f.mu.Unlock()
			if strings.Contains(sc.Text(), ready) {
				once.Do(func() { close(up) })
			}
		}
	}()
	select {
	case <-up:
	case <-time.After(60 * time.Second):
		t.Fatalf("agentgw %s did not start:\n%s", cmdName, f.stderr())
	}
	return f
}

// node runs a script of testdata with one JSON plan and decodes its
// stdout into out.
func (x *env) node(t *testing.T, script string, plan any, out any) {
	t.Helper()
	b, _ := json.Marshal(plan)
	cmd := exec.Command("node", filepath.Join(x.root, "testdata", script), string(b))
	cmd.Dir = x.root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s\n%s", script, err, stdout.String(), stderr.String())
	}
	t.Logf("%s ran %v", script, time.Since(start).Round(time.Millisecond))
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("%s: %v in %q\n%s", script, err, stdout.String(), stderr.String())
	}
}

// hostile are tokens each resource server must refuse: a real token of
// the issuer is taken apart and put together wrongly.
func (x *env) hostile(t *testing.T) map[string]string {
	t.Helper()
	good := x.token(t, x.alice, x.resource)
	p := strings.Split(good, ".")
	dec := func(s string) map[string]any {
		b, _ := base64.RawURLEncoding.DecodeString(s)
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	enc := func(m map[string]any) string {
		b, _ := json.Marshal(m)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	header, payload := dec(p[0]), dec(p[1])
	edited := map[string]any{}
	for k, v := range payload {
		edited[k] = v
	}
	edited["jid"] = "bob@example.test"
	own, _ := rsa.GenerateKey(rand.Reader, 2048)
	forged := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims(payload))
	forged.Header["kid"] = "not-a-kid"
	forgedTok, _ := forged.SignedString(own)
	// HS256 keyed with the issuer's public key (the classic confusion).
	var jwks struct {
		Keys []map[string]any `json:"keys"`
	}
	resp, err := http.Get(x.is.URL + "/jwks")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&jwks)
	resp.Body.Close()
	pubJSON, _ := json.Marshal(jwks.Keys[0])
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(payload))
	hs.Header["kid"] = header["kid"]
	hsTok, _ := hs.SignedString(pubJSON)
	none := map[string]any{"alg": "none", "typ": "JWT"}
	return map[string]string{
		"garbage":            "not.a.jwt",
		"alg none":           enc(none) + "." + p[1] + ".",
		"edited jid":         p[0] + "." + enc(edited) + "." + p[2],
		"unknown kid":        forgedTok,
		"hs256 with pub key": hsTok,
		"wrong audience":     x.token(t, x.alice, x.other),
	}
}

// refuses checks that url answers 401 with the resource metadata challenge
// to each hostile token and to none, and that no token reaches the log.
func refuses(t *testing.T, url, method, metaURL string, body []byte, bad map[string]string, f *front) {
	t.Helper()
	bad[""] = "" // none
	for name, tok := range bad {
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(ch, `resource_metadata="`+metaURL+`"`) {
			t.Errorf("token %q: HTTP %d, challenge %q; want 401 pointing at %s", name, resp.StatusCode, ch, metaURL)
		}
		if tok != "" && !strings.Contains(ch, `error="invalid_token"`) {
			t.Errorf("token %q: challenge %q lacks invalid_token", name, ch)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "the refusals logged", func() bool {
		// Each presented token is a warning (a missing one is info).
		return strings.Count(f.stderr(), "bad access token") >= len(bad)-1
	})
	log := f.stderr()
	for name, tok := range bad {
		if tok == "" {
			continue
		}
		for _, part := range strings.Split(tok, ".") {
			if len(part) > 16 && strings.Contains(log, part) {
				t.Errorf("the log carries a piece of the %q token", name)
			}
		}
	}
}

// keepsSecret checks that no piece of the valid tokens the front accepted
// (header, claims or signature, each over 16 characters) reached its
// stderr: the secrets audit for access tokens at the resource servers.
func keepsSecret(t *testing.T, f *front, toks ...string) {
	t.Helper()
	if len(toks) == 0 {
		t.Fatal("keepsSecret: no tokens to look for")
	}
	log := f.stderr()
	for i, tok := range toks {
		parts := strings.Split(tok, ".")
		if len(parts) != 3 {
			t.Fatalf("token %d is not a JWS compact token", i)
		}
		for _, part := range parts {
			if len(part) > 16 && strings.Contains(log, part) {
				t.Errorf("the front's log carries a piece of valid token %d", i)
			}
		}
	}
}
