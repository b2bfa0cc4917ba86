package oauthrs

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"mellium.im/xmpp/jid"
)

// WellKnown is the RFC 9728 metadata path prefix.
const WellKnown = "/.well-known/oauth-protected-resource"

// Gate is the HTTP side of a resource server (MCP 2026-07-28
// authorization; RFC 9728, RFC 6750): it serves the Protected Resource
// Metadata at WellKnown and at WellKnown plus the resource's path, and lets
// through only requests whose bearer token the Verifier accepts, with the
// principal the token names (a bare JID) in the request's context. Others
// get 401 with the challenge that points at the metadata, or 403 when the
// token lacks a scope or names no principal. A refusal is logged with the
// check that failed, never the token.
type Gate struct {
	Verifier *Verifier
	// Resource is the front's public URL: the audience and the metadata's
	// "resource".
	Resource string
	// Issuer is the authorization server listed in the metadata.
	Issuer string
	// Scopes are advertised (scopes_supported, the challenge's scope); the
	// Verifier requires them.
	Scopes []string
	// OpScopes are the scopes an operation needs beside Scopes (the
	// fronts' --scope-for); the fronts check them with Allow once they
	// know the operation. They are advertised in scopes_supported too.
	OpScopes map[Op][]string
	// JIDClaim names the claim that holds the caller's bare JID (default
	// "sub"; "jid" reads the claim agentgw's test issuer sets).
	JIDClaim string
	Log      *slog.Logger
}

type principalKey struct{}

// PrincipalOf returns the principal a Gate let the request through as.
func PrincipalOf(ctx context.Context) (jid.JID, bool) {
	p, ok := ctx.Value(principalKey{}).(jid.JID)
	return p, ok
}

// MetadataURL is where the resource's metadata is: the well-known path
// inserted before the resource's path (RFC 9728 3.1).
func (g *Gate) MetadataURL() string {
	u, err := url.Parse(g.Resource)
	if err != nil {
		return g.Resource
	}
	return u.Scheme + "://" + u.Host + WellKnown + strings.TrimSuffix(u.Path, "/")
}

// Wrap returns next behind the gate.
func (g *Gate) Wrap(next http.Handler) http.Handler {
	log := g.Log
	if log == nil {
		log = slog.Default()
	}
	claim := g.JIDClaim
	if claim == "" {
		claim = "sub"
	}
	meta := MetadataHandler(ResourceMetadata{Resource: g.Resource, AuthorizationServers: []string{g.Issuer}, ScopesSupported: g.AllScopes()})
	metaURL := g.MetadataURL()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == WellKnown || strings.HasPrefix(r.URL.Path, WellKnown+"/") {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
				return
			}
			meta.ServeHTTP(w, r)
			return
		}
		tok, presented := BearerToken(r)
		if !presented && r.Header.Get("Authorization") != "" {
			presented = true // another scheme: refused like a bad token
		}
		c, err := g.Verifier.Verify(r.Context(), tok)
		if err != nil {
			// err names the failed check only (never the token). A request
			// without a token is how every client starts: not a warning.
			level := slog.LevelWarn
			if !presented {
				level = slog.LevelInfo
			}
			log.Log(r.Context(), level, "refused an HTTP request: bad access token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", err.Error())
			if errors.Is(err, ErrInsufficientScope) {
				w.Header().Set("WWW-Authenticate", InsufficientScope(metaURL, g.Scopes))
				http.Error(w, "insufficient scope", http.StatusForbidden)
				return
			}
			w.Header().Set("WWW-Authenticate", Challenge(metaURL, g.Scopes, presented))
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		p, ok := principal(c, claim)
		if !ok {
			log.Warn("refused an HTTP request: the token names no principal (a bare JID)", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "claim", claim)
			http.Error(w, "the access token names no XMPP principal", http.StatusForbidden)
			return
		}
		ctx := context.WithValue(r.Context(), principalKey{}, p)
		ctx = context.WithValue(ctx, scopesKey{}, c.Scopes)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// principal reads the bare JID of claim from c.
func principal(c *Claims, claim string) (jid.JID, bool) {
	v, _ := c.Raw[claim].(string)
	if v == "" || len(v) > 3071 {
		return jid.JID{}, false
	}
	j, err := jid.Parse(v)
	if err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
		return jid.JID{}, false
	}
	return j, true
}
