package oauthrs_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentgw/agentgw/internal/oauthrs"
)

// rotatingIssuer serves RFC 8414 metadata and a JWKS whose keys the test
// replaces, counting the JWKS fetches.
type rotatingIssuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []map[string]string
	fetches atomic.Int32
}

func newRotatingIssuer(t *testing.T) *rotatingIssuer {
	ri := &rotatingIssuer{}
	ri.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			json.NewEncoder(w).Encode(map[string]string{"issuer": ri.srv.URL, "jwks_uri": ri.srv.URL + "/jwks"})
		case "/jwks":
			ri.fetches.Add(1)
			ri.mu.Lock()
			defer ri.mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"keys": ri.keys})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ri.srv.Close)
	return ri
}

func (ri *rotatingIssuer) serve(keys ...*signingKey) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	ri.keys = nil
	for _, k := range keys {
		pub := k.key.PublicKey
		ri.keys = append(ri.keys, map[string]string{"kty": "EC", "crv": "P-256", "kid": k.kid, "use": "sig",
			"x": base64.RawURLEncoding.EncodeToString(pub.X.FillBytes(make([]byte, 32))),
			"y": base64.RawURLEncoding.EncodeToString(pub.Y.FillBytes(make([]byte, 32)))})
	}
}

type signingKey struct {
	kid string
	key *ecdsa.PrivateKey
}

func newSigningKey(t *testing.T, kid string) *signingKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signingKey{kid: kid, key: k}
}

func (ri *rotatingIssuer) token(t *testing.T, k *signingKey, now time.Time) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss": ri.srv.URL, "aud": resource, "sub": "alice", "jid": "alice@example.test",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A rotated signing key is picked up by fetching the JWKS again when a
// token names an unknown kid, at most once per MinRefetch however many
// such tokens arrive; a retired key stops verifying once the JWKS is
// fetched again.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	ri := newRotatingIssuer(t)
	a, b := newSigningKey(t, "key-a"), newSigningKey(t, "key-b")
	ri.serve(a)
	var clock atomic.Int64
	start := time.Now()
	clock.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	ctx := context.Background()
	v, err := oauthrs.New(ctx, oauthrs.Config{Issuer: ri.srv.URL, Audience: resource, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, ri.token(t, a, now())); err != nil {
		t.Fatalf("a token of the current key: %v", err)
	}
	if n := ri.fetches.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times at start, want 1", n)
	}

	// The issuer rotates to key B: the first token of B comes within
	// MinRefetch of the start, so a flood of unknown kids fetches nothing.
	ri.serve(b)
	clock.Add(int64(10 * time.Second))
	for range 50 {
		if _, err := v.Verify(ctx, ri.token(t, b, now())); !errors.Is(err, oauthrs.ErrInvalidToken) {
			t.Fatalf("a token of a key not yet fetched: %v, want invalid", err)
		}
	}
	if n := ri.fetches.Load(); n != 1 {
		t.Fatalf("50 unknown-kid tokens within MinRefetch fetched the JWKS %d more times, want 0", n-1)
	}

	// Past MinRefetch, one unknown kid fetches the JWKS again and B verifies.
	clock.Add(int64(oauthrs.MinRefetch))
	c, err := v.Verify(ctx, ri.token(t, b, now()))
	if err != nil {
		t.Fatalf("a token of the rotated key after MinRefetch: %v", err)
	}
	if c.JID != "alice@example.test" {
		t.Fatalf("claims %+v", c)
	}
	if n := ri.fetches.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times after the rotation, want 2", n)
	}
	// Key A was retired with that fetch.
	if _, err := v.Verify(ctx, ri.token(t, a, now())); !errors.Is(err, oauthrs.ErrInvalidToken) {
		t.Fatalf("a token of the retired key: %v, want invalid", err)
	}
	if n := ri.fetches.Load(); n != 2 {
		t.Fatalf("the retired key's token fetched the JWKS within MinRefetch (%d fetches)", n)
	}
}
