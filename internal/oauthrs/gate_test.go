package oauthrs_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/internal/oauthrs"
)

// The gate against a real issuer: the metadata at both well-known URLs;
// a good token reaches the handler with its principal; expired and not yet
// valid tokens (the clock moved) get the 401 challenge; a missing scope is
// 403 insufficient_scope; a token whose claim is not a bare JID is 403;
// nothing logged carries the token.
func TestGate(t *testing.T) {
	t.Parallel()
	is := issuer(t)
	ctx := context.Background()
	var now time.Time
	clock := func() time.Time {
		if now.IsZero() {
			return time.Now()
		}
		return now
	}
	newGate := func(scopes []string, claim string, log *bytes.Buffer) *oauthrs.Gate {
		v, err := oauthrs.New(ctx, oauthrs.Config{Issuer: is.URL, Audience: resource, Scopes: scopes, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		return &oauthrs.Gate{Verifier: v, Resource: resource, Issuer: is.URL, Scopes: scopes, JIDClaim: claim,
			Log: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	}
	var log bytes.Buffer
	g := newGate([]string{"mcp:tools"}, "jid", &log)
	if got := g.MetadataURL(); got != "http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("metadata URL %s", got)
	}
	var seen string
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := oauthrs.PrincipalOf(r.Context())
		seen = p.String()
	}))
	do := func(h http.Handler, method, path, tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		rec := do(h, http.MethodGet, p, "")
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"resource":"`+resource+`"`) || !strings.Contains(rec.Body.String(), is.URL) {
			t.Fatalf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
	if rec := do(h, http.MethodPost, "/.well-known/oauth-protected-resource", ""); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST to the metadata: %d", rec.Code)
	}
	good := token(t, is, resource)
	if rec := do(h, http.MethodPost, "/mcp", good); rec.Code != 200 || seen != "svc@example.test" {
		t.Fatalf("good token: %d, principal %q", rec.Code, seen)
	}
	for name, at := range map[string]time.Time{"expired": time.Now().Add(2 * time.Hour), "not yet valid": time.Now().Add(-time.Hour)} {
		now = at
		rec := do(h, http.MethodPost, "/mcp", good)
		now = time.Time{}
		ch := rec.Header().Get("WWW-Authenticate")
		if rec.Code != 401 || ch != `Bearer resource_metadata="`+g.MetadataURL()+`", scope="mcp:tools", error="invalid_token"` {
			t.Fatalf("%s: %d %q", name, rec.Code, ch)
		}
	}
	if rec := do(h, http.MethodPost, "/mcp", ""); rec.Code != 401 || strings.Contains(rec.Header().Get("WWW-Authenticate"), "error=") {
		t.Fatalf("no token: %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
	// A scope the issuer does not grant for this resource.
	var log2 bytes.Buffer
	scoped := newGate([]string{"mcp:tools", "mcp:admin"}, "jid", &log2).Wrap(http.NotFoundHandler())
	if rec := do(scoped, http.MethodPost, "/mcp", good); rec.Code != 403 || !strings.Contains(rec.Header().Get("WWW-Authenticate"), `error="insufficient_scope"`) {
		t.Fatalf("missing scope: %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
	// sub is the client id here, not a JID.
	var log3 bytes.Buffer
	bySub := newGate(nil, "", &log3).Wrap(http.NotFoundHandler())
	if rec := do(bySub, http.MethodPost, "/mcp", good); rec.Code != 403 {
		t.Fatalf("a token whose sub is no JID: %d", rec.Code)
	}
	all := log.String() + log2.String() + log3.String()
	if !strings.Contains(all, "expired") || !strings.Contains(all, "names no principal") {
		t.Fatalf("the refusals are not logged:\n%s", all)
	}
	for _, part := range strings.Split(good, ".") {
		if strings.Contains(all, part) {
			t.Fatalf("the log carries the token:\n%s", all)
		}
	}
}
