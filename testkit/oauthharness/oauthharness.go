// Package oauthharness runs a real OAuth 2.1 / OpenID Connect
// authorization server for tests: oidc-provider (npm, in the lockfile) as
// its own Node process, configured by the test (testdata/oauth/issuer.mjs).
// It issues RFC 8707 resource-bound JWT access tokens carrying the
// caller's JID in a "jid" claim, by client credentials and by
// authorization code with PKCE; the harness drives the issuer's
// development login pages over HTTP in place of a browser.
package oauthharness

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/porttest"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// Client is one registered client (oidc-provider's client metadata).
type Client struct {
	ID           string   `json:"client_id"`
	Secret       string   `json:"client_secret,omitempty"`
	GrantTypes   []string `json:"grant_types"`
	RedirectURIs []string `json:"redirect_uris"`
	// AuthMethod is the token endpoint auth method (default
	// client_secret_basic; "none" for a public client).
	AuthMethod    string   `json:"token_endpoint_auth_method,omitempty"`
	ResponseTypes []string `json:"response_types"`
	// JID is put in the "jid" claim of its client-credentials tokens.
	JID string `json:"jid,omitempty"`
}

// Resource is a protected resource (an audience) and the scopes granted
// for it.
type Resource struct {
	Scope string `json:"scope"`
	TTL   int    `json:"ttl,omitempty"` // access token lifetime, seconds
}

// Options configure the issuer.
type Options struct {
	Clients        []Client
	Resources      map[string]Resource
	AccessTokenTTL int // seconds; default 300
}

// Issuer is a running authorization server.
type Issuer struct {
	URL  string // the issuer identifier, http://127.0.0.1:port
	Logs *strings.Builder
	cmd  *exec.Cmd
}

// Start runs an issuer for the test and stops it on cleanup. Without node
// or the package it skips, except under CI=true.
func Start(t testing.TB, o Options) *Issuer {
	t.Helper()
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testkit.Unavailable(t, "node is not installed (run scripts/install-deps.sh)")
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "oidc-provider")); err != nil {
		testkit.Unavailable(t, "oidc-provider is not installed (npm ci)")
	}
	port, err := porttest.Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range o.Clients {
		c := &o.Clients[i]
		if c.ResponseTypes == nil {
			c.ResponseTypes = []string{}
			for _, g := range c.GrantTypes {
				if g == "authorization_code" {
					c.ResponseTypes = []string{"code"}
				}
			}
		}
		if c.RedirectURIs == nil {
			c.RedirectURIs = []string{}
		}
	}
	cfg, _ := json.Marshal(map[string]any{"port": port, "clients": o.Clients, "resources": o.Resources, "accessTokenTTL": o.AccessTokenTTL})
	path := filepath.Join(t.TempDir(), "issuer.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(root, "testdata", "oauth", "issuer.mjs"), path)
	cmd.Dir = root
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	is := &Issuer{Logs: &strings.Builder{}, cmd: cmd}
	cmd.Stderr = &lockedWriter{b: is.Logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.StopOnCleanup(t, cmd, "oidc-provider")
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- u
			}
		}
	}()
	select {
	case is.URL = <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("oidc-provider did not start within 60 s:\n%s", is.Logs.String())
	}
	return is
}

var formAction = regexp.MustCompile(`<form[^>]* action="([^"]+)"`)

type lockedWriter struct{ b *strings.Builder }

func (w *lockedWriter) Write(p []byte) (int, error) {
	if w.b.Len() < 1<<20 {
		w.b.Write(p)
	}
	return len(p), nil
}

// Tokens is a token endpoint response.
type Tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	Scope        string `json:"scope"`
}

// post posts form to path as client (HTTP Basic, or client_id in the
// form for a public client) and returns the body of a 200.
func (is *Issuer) post(ctx context.Context, c Client, path string, form url.Values) ([]byte, error) {
	if c.AuthMethod == "none" {
		form.Set("client_id", c.ID)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, is.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.AuthMethod != "none" {
		req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, body)
	}
	return body, nil
}

// token posts form to the token endpoint as client.
func (is *Issuer) token(ctx context.Context, c Client, form url.Values) (*Tokens, error) {
	body, err := is.post(ctx, c, "/token", form)
	if err != nil {
		return nil, err
	}
	var t Tokens
	return &t, json.Unmarshal(body, &t)
}

// ClientCredentials gets a token for resource by the client credentials
// grant.
func (is *Issuer) ClientCredentials(ctx context.Context, c Client, resource, scope string) (*Tokens, error) {
	return is.token(ctx, c, url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {scope}})
}

// Refresh redeems a refresh token for resource.
func (is *Issuer) Refresh(ctx context.Context, c Client, refresh, resource string) (*Tokens, error) {
	return is.token(ctx, c, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "resource": {resource}})
}

// Revoke revokes a token (RFC 7009).
func (is *Issuer) Revoke(ctx context.Context, c Client, token string) error {
	_, err := is.post(ctx, c, "/token/revocation", url.Values{"token": {token}})
	return err
}

// Login runs the authorization code grant with PKCE as user would in a
// browser: the authorization request, the issuer's development login page
// (the login name becomes the subject and the "jid" claim) and consent,
// then the code exchange at the token endpoint.
func (is *Issuer) Login(ctx context.Context, c Client, user, resource, scope string) (*Tokens, error) {
	if len(c.RedirectURIs) == 0 {
		return nil, errors.New("oauthharness: the client has no redirect URI")
	}
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"client_id": {c.ID}, "response_type": {"code"}, "redirect_uri": {c.RedirectURIs[0]},
		"scope": {scope}, "resource": {resource}, "state": {rand.Text()},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"prompt": {"consent"},
	}
	jar, _ := cookiejar.New(nil)
	var code string
	browser := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), c.RedirectURIs[0]) {
			code = req.URL.Query().Get("code")
			return http.ErrUseLastResponse
		}
		return nil
	}}
	if err := drivePages(browser, is.URL+"/auth?"+q.Encode(), user, func() bool { return code != "" }); err != nil {
		return nil, err
	}
	if code == "" {
		return nil, errors.New("oauthharness: no authorization code after the login pages")
	}
	return is.token(ctx, c, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {c.RedirectURIs[0]}, "code_verifier": {verifier}, "resource": {resource}})
}
