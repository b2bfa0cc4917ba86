package oauthrs_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentgw/agentgw/internal/oauthrs"
	"github.com/agentgw/agentgw/testkit/oauthharness"
)

const (
	resource = "http://127.0.0.1:9/mcp"
	other    = "http://127.0.0.1:9/other"
)

var svc = oauthharness.Client{ID: "svc", Secret: "svc-secret-0123456789", GrantTypes: []string{"client_credentials"}, JID: "svc@example.test"}

func issuer(t *testing.T) *oauthharness.Issuer {
	return oauthharness.Start(t, oauthharness.Options{Clients: []oauthharness.Client{svc},
		Resources: map[string]oauthharness.Resource{resource: {Scope: "mcp:tools"}, other: {Scope: "mcp:tools"}}})
}

func token(t *testing.T, is *oauthharness.Issuer, res string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := is.ClientCredentials(ctx, svc, res, "mcp:tools")
	if err != nil {
		t.Fatalf("%v\n%s", err, is.Logs.String())
	}
	return tok.AccessToken
}

// parts splits a compact JWS and decodes its header and payload.
func parts(t *testing.T, tok string) (header, payload map[string]any, sig string) {
	t.Helper()
	p := strings.Split(tok, ".")
	dec := func(s string) map[string]any {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	return dec(p[0]), dec(p[1]), p[2]
}

func enc(m map[string]any) string {
	b, _ := json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(b)
}

// A real issuer's token for this resource passes; every hostile variant
// is refused with ErrInvalidToken, and no error quotes the token.
func TestVerifyAgainstARealIssuer(t *testing.T) {
	t.Parallel()
	is := issuer(t)
	ctx := context.Background()
	v, err := oauthrs.New(ctx, oauthrs.Config{Issuer: is.URL, Audience: resource, Scopes: []string{"mcp:tools"}})
	if err != nil {
		t.Fatalf("%v\n%s", err, is.Logs.String())
	}
	good := token(t, is, resource)
	c, err := v.Verify(ctx, good)
	if err != nil {
		t.Fatalf("a good token: %v", err)
	}
	if c.JID != "svc@example.test" || c.ClientID != "svc" || c.Expiry.IsZero() {
		t.Fatalf("claims %+v", c)
	}

	header, payload, sig := parts(t, good)
	// A second issuer with its own keys: its tokens name another issuer
	// and are signed by keys this verifier does not hold.
	stranger := token(t, issuer(t), resource)
	// HS256 keyed with the issuer's public key (the classic confusion).
	_, pub := fetchRSAKey(t, is.URL)
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(payload))
	hs.Header["kid"] = header["kid"]
	hsTok, _ := hs.SignedString(pub)
	// A key of our own, under a kid the issuer never had.
	own, _ := rsa.GenerateKey(rand.Reader, 2048)
	forged := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims(payload))
	forged.Header["kid"] = "not-a-kid"
	forgedTok, _ := forged.SignedString(own)
	edited := map[string]any{}
	for k, x := range payload {
		edited[k] = x
	}
	edited["jid"] = "admin@example.test"

	cases := map[string]struct {
		tok  string
		now  time.Time
		want string
	}{
		"none":             {tok: "", want: "no token"},
		"garbage":          {tok: "not.a.jwt", want: "malformed"},
		"expired":          {tok: good, now: time.Now().Add(2 * time.Hour), want: "expired"},
		"not yet valid":    {tok: good, now: time.Now().Add(-time.Hour), want: "not yet valid"},
		"wrong issuer":     {tok: stranger, want: ""},
		"wrong audience":   {tok: token(t, is, other), want: "wrong audience"},
		"alg none":         {tok: enc(map[string]any{"alg": "none", "typ": "at+jwt"}) + "." + enc(payload) + ".", want: ""},
		"HS256 public key": {tok: hsTok, want: ""},
		"unknown kid":      {tok: forgedTok, want: ""},
		"edited claims":    {tok: enc(header) + "." + enc(edited) + "." + sig, want: "bad signature"},
		"oversized":        {tok: strings.Repeat("a", 20000), want: "too long"},
	}
	for name, tc := range cases {
		vv := v
		if !tc.now.IsZero() {
			vv, err = oauthrs.New(ctx, oauthrs.Config{Issuer: is.URL, Audience: resource, Now: func() time.Time { return tc.now }})
			if err != nil {
				t.Fatal(err)
			}
		}
		_, err := vv.Verify(ctx, tc.tok)
		if !errors.Is(err, oauthrs.ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", name, err)
			continue
		}
		if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
		if tc.tok != "" && len(tc.tok) > 20 && strings.Contains(err.Error(), tc.tok[len(tc.tok)-20:]) {
			t.Errorf("%s: the error quotes the token", name)
		}
		t.Logf("%s: %v", name, err)
	}

	// A required scope the token lacks.
	strict, err := oauthrs.New(ctx, oauthrs.Config{Issuer: is.URL, Audience: resource, Scopes: []string{"mcp:admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Verify(ctx, good); err == nil || !strings.Contains(err.Error(), "missing scope mcp:admin") {
		t.Errorf("missing scope: %v", err)
	}
}

// fetchRSAKey reads the issuer's RS256 key and returns it with its PEM.
func fetchRSAKey(t *testing.T, iss string) (*rsa.PublicKey, []byte) {
	t.Helper()
	resp, err := http.Get(iss + "/jwks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct{ Kty, N, E string } `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	for _, k := range set.Keys {
		if k.Kty != "RSA" {
			continue
		}
		n, _ := base64.RawURLEncoding.DecodeString(k.N)
		e, _ := base64.RawURLEncoding.DecodeString(k.E)
		pub := &rsa.PublicKey{E: int(new(big.Int).SetBytes(e).Int64())}
		pub.N = new(big.Int).SetBytes(n)
		der, _ := x509.MarshalPKIXPublicKey(pub)
		return pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	t.Fatal("the issuer has no RSA key")
	return nil, nil
}

// Discovery refuses an issuer whose metadata sends the keys to another
// host, and metadata that names another issuer.
func TestDiscoveryRefusals(t *testing.T) {
	t.Parallel()
	var meta map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(meta)
	}))
	defer srv.Close()
	ctx := context.Background()
	meta = map[string]any{"issuer": srv.URL, "jwks_uri": "http://127.0.0.2:1/jwks"}
	if _, err := oauthrs.New(ctx, oauthrs.Config{Issuer: srv.URL, Audience: resource}); err == nil || !strings.Contains(err.Error(), "jwks_uri is not on the issuer's own origin") {
		t.Errorf("JWKS on another host: %v", err)
	}
	meta = map[string]any{"issuer": "http://127.0.0.1:1", "jwks_uri": srv.URL + "/jwks"}
	if _, err := oauthrs.New(ctx, oauthrs.Config{Issuer: srv.URL, Audience: resource}); err == nil || !strings.Contains(err.Error(), "another issuer") {
		t.Errorf("metadata of another issuer: %v", err)
	}
	if _, err := oauthrs.New(ctx, oauthrs.Config{Issuer: "http://issuer.example", Audience: resource}); err == nil {
		t.Error("a plain-http issuer off loopback was accepted")
	}
}

// The challenge a 401 carries points at the resource metadata.
func TestChallenge(t *testing.T) {
	t.Parallel()
	got := oauthrs.Challenge("https://gw.example/.well-known/oauth-protected-resource", []string{"mcp:tools"}, true)
	want := `Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource", scope="mcp:tools", error="invalid_token"`
	if got != want {
		t.Errorf("challenge %q, want %q", got, want)
	}
}
