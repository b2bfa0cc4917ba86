package oauthrs

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"mellium.im/xmpp/jid"
)

// --scope-for parsing: known operations only, valid scope tokens, a
// clear error otherwise.
func TestParseScopeFor(t *testing.T) {
	t.Parallel()
	op, sc, err := ParseScopeFor("invoke=agents.invoke, agents.write,agents.invoke")
	if err != nil || op != OpInvoke || !slices.Equal(sc, []string{"agents.invoke", "agents.write"}) {
		t.Fatalf("got %q %q %v", op, sc, err)
	}
	for in, want := range map[string]string{
		"invoke":                           "want OP=SCOPE",
		"write=x":                          `unknown operation "write": OP is one of read, invoke, steer`,
		"steer=":                           "steer: no scope given",
		`read=a"b`:                         "not a valid scope token",
		"read=" + strings.Repeat("x", 300): "not a valid scope token",
	} {
		if _, _, err := ParseScopeFor(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: err %v, want %q", in, err, want)
		}
	}
}

// The scopes an operation needs, the metadata's list, and the 403
// challenge a token without them gets (logged without the token).
func TestGateAllow(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	g := &Gate{Resource: "http://127.0.0.1:9/mcp", Issuer: "http://127.0.0.1:8", Scopes: []string{"mcp"},
		OpScopes: map[Op][]string{OpInvoke: {"agents.invoke"}, OpSteer: {"agents.steer", "agents.invoke"}},
		Log:      slog.New(slog.NewTextHandler(&log, nil))}
	if got := g.Required(OpRead); !slices.Equal(got, []string{"mcp"}) {
		t.Fatalf("read needs %q", got)
	}
	if got := g.Required(OpRead, OpSteer, OpInvoke); !slices.Equal(got, []string{"mcp", "agents.steer", "agents.invoke"}) {
		t.Fatalf("a batch needs %q", got)
	}
	if got := g.AllScopes(); !slices.Equal(got, []string{"mcp", "agents.invoke", "agents.steer"}) {
		t.Fatalf("scopes_supported %q", got)
	}
	if !g.HasOpScopes() || (&Gate{}).HasOpScopes() {
		t.Fatal("HasOpScopes")
	}
	allow := func(scopes []string, ops ...Op) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Authorization", "Bearer SECRET-TOKEN")
		ctx := context.WithValue(r.Context(), scopesKey{}, scopes)
		ctx = context.WithValue(ctx, principalKey{}, jid.MustParse("alice@example.test"))
		w := httptest.NewRecorder()
		if g.Allow(w, r.WithContext(ctx), ops...) {
			w.Code = 0
		}
		return w
	}
	if w := allow([]string{"mcp"}, OpRead); w.Code != 0 {
		t.Fatalf("read refused: %d", w.Code)
	}
	if w := allow([]string{"mcp", "agents.invoke"}, OpRead, OpInvoke); w.Code != 0 {
		t.Fatalf("invoke refused: %d", w.Code)
	}
	w := allow([]string{"mcp"}, OpInvoke)
	want := `Bearer error="insufficient_scope", scope="mcp agents.invoke", resource_metadata="http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp"`
	if w.Code != http.StatusForbidden || w.Header().Get("WWW-Authenticate") != want {
		t.Fatalf("invoke without the scope: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	// A batch with a steer: every scope of the strictest, in one challenge.
	w = allow([]string{"mcp", "agents.invoke"}, OpRead, OpSteer)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Header().Get("WWW-Authenticate"), `scope="mcp agents.steer agents.invoke"`) {
		t.Fatalf("steer without the scope: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	// No token at all in context (not through Wrap): refused, not let by.
	if w := allow(nil, OpInvoke); w.Code != http.StatusForbidden {
		t.Fatalf("no scopes: %d", w.Code)
	}
	if s := log.String(); strings.Contains(s, "SECRET-TOKEN") || !strings.Contains(s, "missing=agents.invoke") || !strings.Contains(s, "op=invoke") {
		t.Fatalf("log: %s", s)
	}
}
