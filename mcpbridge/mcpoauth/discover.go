package mcpoauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Metadata is what discovery found for one MCP server.
type Metadata struct {
	// Resource is the server's resource identifier (RFC 8707), checked
	// to be the configured URL.
	Resource string
	// Issuer is the authorization server's issuer identifier, checked
	// against its metadata.
	Issuer string
	// AS is the authorization server's metadata.
	AS *oauthex.AuthServerMeta
	// Scopes are the scopes to ask for when none are configured: the
	// 401's scope, else the resource's scopes_supported.
	Scopes []string
}

// Discover finds the authorization server of the MCP server at
// serverURL: it sends one request without a token and reads the 401's
// WWW-Authenticate resource_metadata (else the RFC 9728 well-known URLs
// below the server's origin), fetches the Protected Resource Metadata
// (which must name serverURL as its resource), then the first listed
// authorization server's metadata (RFC 8414 or OpenID Connect discovery,
// which must name that issuer). Every document is fetched over HTTPS, or
// HTTP on a loopback address, and read to at most 1 MiB. The
// authorization server may live on another host (MCP: "hosted with the
// resource server or a separate entity").
func Discover(ctx context.Context, c *http.Client, serverURL string) (*Metadata, error) {
	if err := secureURL(serverURL); err != nil {
		return nil, fmt.Errorf("MCP server url: %w", err)
	}
	prmURL, challengeScopes, err := probe(ctx, c, serverURL)
	if err != nil {
		return nil, err
	}
	var prm *oauthex.ProtectedResourceMetadata
	if prmURL != "" {
		if err := secureURL(prmURL); err != nil {
			return nil, fmt.Errorf("resource_metadata in the 401: %w", err)
		}
		if prm, err = oauthex.GetProtectedResourceMetadata(ctx, prmURL, serverURL, c); err != nil {
			return nil, fmt.Errorf("protected resource metadata: %s", bounded(err.Error()))
		}
	} else {
		var errs []string
		for _, u := range wellKnownPRM(serverURL) {
			if prm, err = oauthex.GetProtectedResourceMetadata(ctx, u, serverURL, c); err == nil {
				break
			}
			errs = append(errs, bounded(err.Error()))
		}
		if prm == nil {
			return nil, fmt.Errorf("the MCP server names no resource_metadata in its 401 and serves none at the well-known URLs (%s)", strings.Join(errs, "; "))
		}
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, errors.New("the protected resource metadata lists no authorization_servers")
	}
	issuer := prm.AuthorizationServers[0]
	if err := secureURL(issuer); err != nil {
		return nil, fmt.Errorf("authorization server: %w", err)
	}
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, c)
	if err != nil {
		return nil, fmt.Errorf("authorization server metadata: %s", bounded(err.Error()))
	}
	if asm == nil {
		return nil, fmt.Errorf("the authorization server %s serves no RFC 8414 or OpenID Connect metadata", issuer)
	}
	if asm.TokenEndpoint == "" {
		return nil, errors.New("the authorization server metadata names no token_endpoint")
	}
	if err := secureURL(asm.TokenEndpoint); err != nil {
		return nil, fmt.Errorf("token_endpoint: %w", err)
	}
	if asm.AuthorizationEndpoint != "" {
		if err := secureURL(asm.AuthorizationEndpoint); err != nil {
			return nil, fmt.Errorf("authorization_endpoint: %w", err)
		}
	}
	scopes := challengeScopes
	if len(scopes) == 0 {
		scopes = prm.ScopesSupported
	}
	return &Metadata{Resource: prm.Resource, Issuer: asm.Issuer, AS: asm, Scopes: scopes}, nil
}

// probe sends one unauthenticated request and reads the challenge of a
// 401. A server that does not answer 401 yields no resource_metadata.
func probe(ctx context.Context, c *http.Client, serverURL string) (prmURL string, scopes []string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return "", nil, fmt.Errorf("cannot reach the MCP server: %s", bounded(err.Error()))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return "", nil, nil
	}
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return "", nil, nil
	}
	for _, ch := range cs {
		if ch.Scheme != "bearer" {
			continue
		}
		if s := ch.Params["scope"]; s != "" {
			scopes = strings.Fields(s)
		}
		if u := ch.Params["resource_metadata"]; u != "" {
			return u, scopes, nil
		}
	}
	return "", scopes, nil
}

// wellKnownPRM are RFC 9728 §3.1's metadata URLs for a resource: with the
// path inserted, then at the origin's root.
func wellKnownPRM(serverURL string) []string {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil
	}
	var out []string
	if p := strings.Trim(u.Path, "/"); p != "" {
		out = append(out, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/.well-known/oauth-protected-resource/" + p}).String())
	}
	return append(out, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/.well-known/oauth-protected-resource"}).String())
}

// secureURL accepts an https URL, or an http URL on a loopback address.
func secureURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("not an absolute URL")
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%s is neither https nor http on a loopback address", redactURL(u))
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// redactURL drops a URL's user info and query, which may carry values.
func redactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// bounded keeps an error text from another party short.
func bounded(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
