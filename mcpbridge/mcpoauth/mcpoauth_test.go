package mcpoauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// fakeAS is a hostile-able authorization server and MCP server pair:
// unit tests of the client's checks on what the servers send. The real
// issuer is exercised end to end in e2e/mcp (mcp_oauth_test.go).
type fakeAS struct {
	as, rs   *httptest.Server
	tokens   atomic.Int64
	asMeta   func(issuer string) map[string]any
	prm      func(resource, issuer string) any
	token    func(w http.ResponseWriter, r *http.Request)
	header   func(rs string) string
	lastForm url.Values
}

func newFake(t *testing.T) *fakeAS {
	f := &fakeAS{}
	f.asMeta = func(issuer string) map[string]any {
		return map[string]any{"issuer": issuer, "token_endpoint": issuer + "/token", "authorization_endpoint": issuer + "/auth",
			"code_challenge_methods_supported": []string{"S256"}, "scopes_supported": []string{"tools", "offline_access"}}
	}
	f.prm = func(resource, issuer string) any {
		return map[string]any{"resource": resource, "authorization_servers": []string{issuer}, "scopes_supported": []string{"tools"}}
	}
	f.header = func(rs string) string {
		return `Bearer resource_metadata="` + rs + `/.well-known/oauth-protected-resource/mcp", scope="tools"`
	}
	f.token = func(w http.ResponseWriter, r *http.Request) {
		n := f.tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"access-%d","token_type":"Bearer","expires_in":100,"refresh_token":"refresh-%d"}`, n, n)
	}
	f.as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(f.asMeta(f.as.URL))
		case "/token":
			_ = r.ParseForm()
			f.lastForm = r.PostForm
			f.token(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.as.Close)
	// The MCP server on another origin ("localhost" against the AS's
	// 127.0.0.1): the MCP spec lets the authorization server live
	// elsewhere.
	f.rs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp":
			w.Header().Set("Content-Type", "application/json")
			switch v := f.prm(f.url(), f.as.URL).(type) {
			case []byte:
				w.Write(v)
			default:
				json.NewEncoder(w).Encode(v)
			}
		case "/mcp":
			if h := f.header(f.rsBase()); h != "" {
				w.Header().Set("WWW-Authenticate", h)
			}
			w.WriteHeader(http.StatusUnauthorized)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.rs.Close)
	return f
}

func (f *fakeAS) rsBase() string { return strings.Replace(f.rs.URL, "127.0.0.1", "localhost", 1) }
func (f *fakeAS) url() string    { return f.rsBase() + "/mcp" }

func TestDiscover(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(f *fakeAS)
		want  string // "" = success; else a fragment of the error
	}{
		{"authorization server on another host", func(f *fakeAS) {}, ""},
		{"no resource_metadata in the 401: the well-known URL", func(f *fakeAS) { f.header = func(string) string { return `Bearer realm="x"` } }, ""},
		{"issuer mismatch", func(f *fakeAS) {
			m := f.asMeta
			f.asMeta = func(iss string) map[string]any { d := m(iss); d["issuer"] = "https://evil.example"; return d }
		}, "does not match"},
		{"resource mismatch", func(f *fakeAS) {
			f.prm = func(_, iss string) any {
				return map[string]any{"resource": "https://other.example/mcp", "authorization_servers": []string{iss}}
			}
		}, "want"},
		{"plain http metadata off loopback", func(f *fakeAS) {
			f.header = func(string) string { return `Bearer resource_metadata="http://metadata.example/prm"` }
		}, "neither https nor http on a loopback"},
		{"plain http authorization server off loopback", func(f *fakeAS) {
			f.prm = func(res, _ string) any {
				return map[string]any{"resource": res, "authorization_servers": []string{"http://as.example"}}
			}
		}, "HTTPS"},
		{"a hostname that only starts like loopback", func(f *fakeAS) {
			f.prm = func(res, _ string) any {
				return map[string]any{"resource": res, "authorization_servers": []string{"http://127.0.0.1.evil.example"}}
			}
		}, "HTTPS"},
		{"plain http token endpoint off loopback", func(f *fakeAS) {
			m := f.asMeta
			f.asMeta = func(iss string) map[string]any {
				d := m(iss)
				d["token_endpoint"] = "http://as.example/token"
				return d
			}
		}, "token_endpoint"},
		{"no authorization servers", func(f *fakeAS) {
			f.prm = func(res, _ string) any { return map[string]any{"resource": res} }
		}, "no authorization_servers"},
		{"oversized metadata", func(f *fakeAS) {
			f.prm = func(res, iss string) any {
				return []byte(`{"resource":"` + res + `","authorization_servers":["` + iss + `"],"x":"` + strings.Repeat("a", 2<<20) + `"}`)
			}
		}, "protected resource metadata"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			c.setup(f)
			md, err := Discover(ctx, DefaultHTTPClient(), f.url())
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if md.Issuer != f.as.URL || md.Resource != f.url() || md.AS.TokenEndpoint != f.as.URL+"/token" {
					t.Fatalf("discovered %+v", md)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
			if len(err.Error()) > 1000 {
				t.Fatalf("error of %d bytes: not bounded", len(err.Error()))
			}
			t.Logf("refused: %v", err)
		})
	}
}

func TestClientCredentialsResourceAndRefreshBeforeExpiry(t *testing.T) {
	f := newFake(t)
	now := time.Unix(1_800_000_000, 0)
	s := NewSource(Options{ServerURL: f.url(), Grant: GrantClientCredentials, ClientID: "gw",
		ClientSecret: func() (string, error) { return "s3cret-value", nil }, Scopes: []string{"tools"},
		Now: func() time.Time { return now }})
	ctx := context.Background()
	tok, err := s.Token(ctx)
	if err != nil || tok != "access-1" {
		t.Fatalf("first token %q %v", tok, err)
	}
	if got := f.lastForm.Get("resource"); got != f.url() {
		t.Fatalf("resource = %q, want the server's URL (RFC 8707)", got)
	}
	if f.lastForm.Get("grant_type") != "client_credentials" || f.lastForm.Get("scope") != "tools" || f.lastForm.Get("client_secret") != "" {
		t.Fatalf("form %v (the secret goes in Basic, not the form)", f.lastForm)
	}
	now = now.Add(70 * time.Second) // 100 s lifetime, replaced 25 s before
	if tok, _ := s.Token(ctx); tok != "access-1" {
		t.Fatalf("at 70 s: %q, want the cached token", tok)
	}
	now = now.Add(10 * time.Second)
	if tok, _ := s.Token(ctx); tok != "access-2" {
		t.Fatalf("at 80 s: %q, want a new token", tok)
	}
	s.Invalidate("access-2") // the server answered 401
	if tok, _ := s.Token(ctx); tok != "access-3" {
		t.Fatalf("after a 401: %q, want a new token", tok)
	}
	for _, v := range []string{"s3cret-value", "access-3"} {
		if !strings.Contains(strings.Join(s.Secrets(), " "), v) {
			t.Fatalf("Secrets() misses %q", v)
		}
	}
}

func TestRevokedRefreshToken(t *testing.T) {
	f := newFake(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "oauth", "t.json")
	if err := WriteTokenFile(file, &TokenFile{RefreshToken: "refresh-old"}); err != nil {
		t.Fatal(err)
	}
	f.token = func(w http.ResponseWriter, r *http.Request) {
		f.tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		// The description is the server's free text; it must not be
		// repeated (here it quotes the token).
		fmt.Fprint(w, `{"error":"invalid_grant","error_description":"grant refresh-old is revoked <script>"}`)
	}
	lost := 0
	var s *Source
	s = NewSource(Options{ServerURL: f.url(), Grant: GrantAuthorizationCode, ClientID: "gw", TokenFile: file,
		// The bridge logs here, and the log redactor asks Secrets: it
		// must not wait for the token request that called back.
		OnLoginRequired: func(string) { lost++; _ = s.Secrets(); _ = s.LoginRequired() }})
	for i := 0; i < 3; i++ {
		done := make(chan error, 1)
		go func() { _, err := s.Token(context.Background()); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Token did not return: OnLoginRequired deadlocked on the Source")
		}
		if !errors.Is(err, ErrLoginRequired) {
			t.Fatalf("attempt %d: %v, want ErrLoginRequired", i, err)
		}
		if strings.Contains(err.Error(), "refresh-old") || strings.Contains(err.Error(), "script") {
			t.Fatalf("the error reflects the server's text: %v", err)
		}
	}
	if lost != 1 || f.tokens.Load() != 1 {
		t.Fatalf("OnLoginRequired called %d times, token endpoint %d times; want 1 and 1 (a refused token is not retried)", lost, f.tokens.Load())
	}
	if !s.LoginRequired() {
		t.Fatal("LoginRequired() = false")
	}
	// A new login (another refresh token in the file) is tried.
	f.token = func(w http.ResponseWriter, r *http.Request) {
		f.tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"access-new","token_type":"bearer","expires_in":100,"refresh_token":"refresh-rotated"}`)
	}
	if err := WriteTokenFile(file, &TokenFile{RefreshToken: "refresh-new"}); err != nil {
		t.Fatal(err)
	}
	if tok, err := s.Token(context.Background()); err != nil || tok != "access-new" || s.LoginRequired() {
		t.Fatalf("after a new login: %q %v", tok, err)
	}
	if f.lastForm.Get("refresh_token") != "refresh-new" || f.lastForm.Get("resource") != f.url() {
		t.Fatalf("refresh form %v", f.lastForm)
	}
	tf, err := ReadTokenFile(file)
	if err != nil || tf.RefreshToken != "refresh-rotated" {
		t.Fatalf("the rotated refresh token was not kept: %+v %v", tf, err)
	}
}

func TestTokenResponseBounded(t *testing.T) {
	f := newFake(t)
	f.token = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"%s","token_type":"Bearer"}`, strings.Repeat("a", 2<<20))
	}
	s := NewSource(Options{ServerURL: f.url(), Grant: GrantClientCredentials, ClientID: "gw", ClientSecret: func() (string, error) { return "x", nil }})
	if _, err := s.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Fatalf("err = %v", err)
	}
	f.token = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"abcd","token_type":"mac"}`)
	}
	if _, err := s.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "not Bearer") {
		t.Fatalf("err = %v", err)
	}
}

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.json")
	if err := WriteTokenFile(p, &TokenFile{RefreshToken: "rt-value"}); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadTokenFile(p)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "rt-value") {
		t.Fatalf("a 0644 token file: %v", err)
	}
	if _, err := ReadTokenFile(filepath.Join(dir, "none.json")); !errors.Is(err, ErrNoTokenFile) {
		t.Fatalf("missing file: %v", err)
	}
	if err := os.WriteFile(p, []byte(`{"v":1,"refresh_token":"rt-value"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTokenFile(p); err == nil || strings.Contains(err.Error(), "rt-value") {
		t.Fatalf("a broken file: %v", err)
	}
}

func TestCallback(t *testing.T) {
	md := &Metadata{Issuer: "https://as.example"}
	md.AS = &oauthex.AuthServerMeta{}
	cases := []struct {
		q        url.Values
		promised bool
		want     string
	}{
		{url.Values{"state": {"s1"}, "code": {"c"}}, false, ""},
		{url.Values{"state": {"s1"}, "code": {"c"}, "iss": {"https://as.example"}}, true, ""},
		{url.Values{"state": {"other"}, "code": {"c"}}, false, "state"},
		{url.Values{"state": {"s1"}, "code": {"c"}, "iss": {"https://evil.example"}}, false, "iss"},
		{url.Values{"state": {"s1"}, "code": {"c"}, "iss": {"https://AS.example"}}, false, "iss"},
		{url.Values{"state": {"s1"}, "code": {"c"}}, true, "missing"},
		{url.Values{"state": {"s1"}, "error": {"access_denied"}}, false, "access_denied"},
		{url.Values{"state": {"s1"}, "error": {"<b>x</b>"}}, false, "refused the login"},
		{url.Values{"state": {"s1"}}, false, "no code"},
	}
	for _, c := range cases {
		md.AS.AuthorizationResponseIssParameterSupported = c.promised
		a := callback(c.q, "s1", md)
		switch {
		case c.want == "" && (a.err != nil || a.code != "c"):
			t.Errorf("%v: %v", c.q, a.err)
		case c.want != "" && (a.err == nil || !strings.Contains(a.err.Error(), c.want) || strings.Contains(a.err.Error(), "<b>")):
			t.Errorf("%v: %v, want %q", c.q, a.err, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]Config{
		"grant is required":       {ClientID: "x"},
		"needs client_secret_env": {Grant: GrantClientCredentials, ClientID: "x"},
		"needs token_file":        {Grant: GrantAuthorizationCode, ClientID: "x"},
		"not both":                {Grant: GrantClientCredentials, ClientID: "x", ClientSecretEnv: "A", ClientSecretFile: "b"},
		"Client ID Metadata":      {Grant: GrantAuthorizationCode, ClientID: "http://gw.example/client.json", TokenFile: "t"},
		"not a scope token":       {Grant: GrantAuthorizationCode, ClientID: "x", TokenFile: "t", Scopes: []string{"a b"}},
		"issuer must be an https": {Grant: GrantClientCredentials, ClientID: "x", ClientSecretEnv: "E", Issuer: "http://sso.example"},
	}
	for want, c := range cases {
		if got := strings.Join(c.Validate(), "; "); !strings.Contains(got, want) {
			t.Errorf("%+v: %q, want %q", c, got, want)
		}
	}
	ok := Config{Grant: GrantAuthorizationCode, ClientID: "https://gw.example/oauth/client.json", TokenFile: "t", Scopes: []string{"tools"}}
	if p := ok.Validate(); len(p) != 0 {
		t.Errorf("%v", p)
	}
}

func TestTransportRetriesOnceOn401(t *testing.T) {
	f := newFake(t)
	var seen []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, 16)
		n, _ := r.Body.Read(body)
		seen = append(seen, r.Header.Get("Authorization")+" "+string(body[:n]))
		if r.Header.Get("Authorization") == "Bearer access-1" {
			w.WriteHeader(http.StatusUnauthorized) // e.g. revoked at the server
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer api.Close()
	s := NewSource(Options{ServerURL: f.url(), Grant: GrantClientCredentials, ClientID: "gw", ClientSecret: func() (string, error) { return "x", nil }})
	c := &http.Client{Transport: &Transport{Base: http.DefaultTransport, Source: s}}
	req, _ := http.NewRequest(http.MethodPost, api.URL, strings.NewReader("hello"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(seen) != 2 || seen[0] != "Bearer access-1 hello" || seen[1] != "Bearer access-2 hello" {
		t.Fatalf("status %d, requests %q: want one retry with a new token and the same body", resp.StatusCode, seen)
	}
	// A server that keeps answering 401 gets one retry, no more.
	seen = nil
	api.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusUnauthorized)
	})
	req, _ = http.NewRequest(http.MethodPost, api.URL, strings.NewReader("again"))
	if resp, err = c.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || len(seen) != 2 {
		t.Fatalf("status %d after %d requests, want 401 after 2", resp.StatusCode, len(seen))
	}
}

// A server that starts naming another authorization server cannot move
// the gateway's client secret or refresh token there.
func TestIssuerPinned(t *testing.T) {
	f := newFake(t)
	evil := newFake(t)
	s := NewSource(Options{ServerURL: f.url(), Grant: GrantClientCredentials, ClientID: "gw", ClientSecret: func() (string, error) { return "x", nil }})
	tok, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.prm = func(res, _ string) any {
		return map[string]any{"resource": res, "authorization_servers": []string{evil.as.URL}}
	}
	s.Invalidate(tok) // the server answers 401, and its metadata moved
	if _, err := s.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("err = %v, want the move refused", err)
	}
	if evil.tokens.Load() != 0 {
		t.Fatal("the client secret went to the other authorization server")
	}

	// A login's refresh token goes only to the issuer it came from.
	dir := t.TempDir()
	file := filepath.Join(dir, "t.json")
	if err := WriteTokenFile(file, &TokenFile{Issuer: f.as.URL, Resource: evil.url(), RefreshToken: "rt"}); err != nil {
		t.Fatal(err)
	}
	s2 := NewSource(Options{ServerURL: evil.url(), Grant: GrantAuthorizationCode, ClientID: "gw", TokenFile: file})
	if _, err := s2.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "refused") || evil.tokens.Load() != 0 {
		t.Fatalf("err = %v, %d token requests at the other issuer", err, evil.tokens.Load())
	}
	// A configured issuer is the only one accepted.
	s3 := NewSource(Options{ServerURL: f.url(), Issuer: "https://sso.example/realms/x", Grant: GrantClientCredentials, ClientID: "gw", ClientSecret: func() (string, error) { return "x", nil }})
	if _, err := s3.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "sso.example") {
		t.Fatalf("err = %v", err)
	}
}
