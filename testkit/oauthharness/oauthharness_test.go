package oauthharness_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit/oauthharness"
)

const resource = "http://127.0.0.1:9/mcp"

// claims decodes a JWT's payload without verifying it (the verifier's
// tests verify).
func claims(t *testing.T, jwt string) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWS compact token: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The harness's issuer grants resource-bound JWTs with the jid claim by
// client credentials and by a login with PKCE, refreshes, and revokes.
func TestIssuer(t *testing.T) {
	t.Parallel()
	svc := oauthharness.Client{ID: "svc", Secret: "svc-secret-0123456789", GrantTypes: []string{"client_credentials"}, JID: "svc@example.test"}
	app := oauthharness.Client{ID: "app", AuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"}, RedirectURIs: []string{"http://127.0.0.1:1/callback"}}
	is := oauthharness.Start(t, oauthharness.Options{Clients: []oauthharness.Client{svc, app},
		Resources: map[string]oauthharness.Resource{resource: {Scope: "mcp:tools"}}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	tok, err := is.ClientCredentials(ctx, svc, resource, "mcp:tools")
	if err != nil {
		t.Fatalf("%v\n%s", err, is.Logs.String())
	}
	c := claims(t, tok.AccessToken)
	if c["aud"] != resource || c["iss"] != is.URL || c["jid"] != "svc@example.test" || c["scope"] != "mcp:tools" {
		t.Fatalf("client credentials token claims %v", c)
	}

	tok, err = is.Login(ctx, app, "alice@example.test", resource, "openid offline_access mcp:tools")
	if err != nil {
		t.Fatalf("%v\n%s", err, is.Logs.String())
	}
	c = claims(t, tok.AccessToken)
	if c["aud"] != resource || c["sub"] != "alice@example.test" || c["jid"] != "alice@example.test" || tok.RefreshToken == "" {
		t.Fatalf("login token claims %v (refresh %t)", c, tok.RefreshToken != "")
	}
	again, err := is.Refresh(ctx, app, tok.RefreshToken, resource)
	if err != nil || again.AccessToken == "" || again.RefreshToken == tok.RefreshToken {
		t.Fatalf("refresh: %v (rotated %t)", err, again != nil && again.RefreshToken != tok.RefreshToken)
	}
	if err := is.Revoke(ctx, app, again.RefreshToken); err != nil {
		t.Fatal(err)
	}
	if _, err := is.Refresh(ctx, app, again.RefreshToken, resource); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("a revoked refresh token: %v", err)
	}
}
