package mcpoauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// LoginOptions configure Login.
type LoginOptions struct {
	Options
	// Listen is the loopback address of the redirect listener
	// ("127.0.0.1:0": any free port). The redirect URI is
	// http://<Listen>/callback; register it (or the loopback rule of RFC
	// 8252 §7.3) with the authorization server.
	Listen string
	// Out hears the authorization URL to open in a browser.
	Out io.Writer
}

// Login runs the authorization code grant with PKCE once: discovery, the
// authorization URL (printed to Out, with the resource indicator, S256
// challenge and state), the loopback redirect (state and, per RFC 9207,
// iss checked), the code exchange, and the refresh token written to
// TokenFile (mode 0600, atomically). It returns when the file is written,
// the browser step failed, or ctx ends.
func Login(ctx context.Context, o LoginOptions) error {
	if o.Grant != GrantAuthorizationCode {
		return errors.New(`login is for grant = "authorization_code"`)
	}
	if o.TokenFile == "" {
		return errors.New("token_file is not configured")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTPClient == nil {
		o.HTTPClient = clientFor(o.Options)
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil || !isLoopback(host) || host == "localhost" {
		return errors.New("the redirect listener must be on a loopback IP address (127.0.0.1:PORT or [::1]:PORT)")
	}
	c := client{ID: o.ClientID}
	if o.ClientSecret != nil {
		if c.Secret, err = o.ClientSecret(); err != nil {
			return fmt.Errorf("client secret: %w", err)
		}
	}
	md, err := Discover(ctx, o.HTTPClient, o.ServerURL)
	if err != nil {
		return fmt.Errorf("OAuth discovery: %w", err)
	}
	if o.Issuer != "" && md.Issuer != o.Issuer {
		return fmt.Errorf("the MCP server names the authorization server %s, not the configured issuer %s: refused", md.Issuer, o.Issuer)
	}
	if md.AS.AuthorizationEndpoint == "" {
		return errors.New("the authorization server metadata names no authorization_endpoint")
	}
	if !slices.Contains(md.AS.CodeChallengeMethodsSupported, "S256") {
		return errors.New("the authorization server does not support PKCE with S256")
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("redirect listener on %s: %v", o.Listen, errors.Unwrap(err))
	}
	defer ln.Close()
	redirect := "http://" + ln.Addr().String() + "/callback"

	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	state := rand.Text()
	scopes := o.Scopes
	if len(scopes) == 0 {
		scopes = md.Scopes
	}
	consent := false
	if slices.Contains(md.AS.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		// MCP: a client MAY ask for offline_access when the server
		// lists it; the gateway needs the refresh token. OpenID
		// Connect grants it only with prompt=consent.
		scopes = append(slices.Clone(scopes), "offline_access")
		consent = true
	}
	q := url.Values{
		"response_type": {"code"}, "client_id": {o.ClientID}, "redirect_uri": {redirect},
		"state": {state}, "resource": {md.Resource},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
	if len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	if consent || slices.Contains(scopes, "offline_access") {
		q.Set("prompt", "consent")
	}
	authURL, err := url.Parse(md.AS.AuthorizationEndpoint)
	if err != nil {
		return errors.New("authorization_endpoint is not a URL")
	}
	aq := authURL.Query()
	for k, v := range q {
		aq[k] = v
	}
	authURL.RawQuery = aq.Encode()

	type answer struct {
		code string
		err  error
	}
	got := make(chan answer, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/callback", func(w http.ResponseWriter, r *http.Request) {
		a := callback(r.URL.Query(), state, md)
		select {
		case got <- a:
		default:
			http.Error(w, "this login is already answered", http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if a.err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintln(w, "agentgw: the login failed; see the terminal.")
			return
		}
		fmt.Fprintln(w, "agentgw: login complete. You can close this window.")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	fmt.Fprintf(o.Out, "Open this URL in a browser and log in:\n\n  %s\n\nWaiting for the redirect to %s ...\n", authURL, redirect)
	var a answer
	select {
	case <-ctx.Done():
		return fmt.Errorf("no login before the wait ended: %w", ctx.Err())
	case a = <-got:
	}
	if a.err != nil {
		return a.err
	}
	t, err := tokenRequest(ctx, o.HTTPClient, md, c, url.Values{
		"grant_type": {"authorization_code"}, "code": {a.code}, "redirect_uri": {redirect},
		"code_verifier": {verifier}, "resource": {md.Resource},
	}, o.Now())
	if err != nil {
		return fmt.Errorf("exchanging the authorization code: %w", err)
	}
	if t.Refresh == "" {
		return errors.New("the authorization server issued no refresh token, so the gateway could not keep the login (allow the refresh_token grant for the client, or add offline_access to scopes)")
	}
	tf := &TokenFile{Issuer: md.Issuer, Resource: md.Resource, ClientID: o.ClientID, RefreshToken: t.Refresh, Saved: o.Now().UTC()}
	return WriteTokenFile(o.TokenFile, tf)
}

// callback checks the authorization response: state, iss (RFC 9207
// §2.4, MCP's table), then error or code. An error response's text is
// the server's; only its code is kept.

func callback(q url.Values, state string, md *Metadata) (a struct {
	code string
	err  error
}) {
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
		a.err = errors.New("the redirect's state does not match this login (a stale or forged redirect)")
		return a
	}
	iss, has := q["iss"]
	switch {
	case has && (len(iss) != 1 || iss[0] != md.Issuer):
		a.err = errors.New("the redirect's iss is not the authorization server's issuer (RFC 9207): refused")
		return a
	case !has && md.AS.AuthorizationResponseIssParameterSupported:
		a.err = errors.New("the authorization server promises iss in its redirect, and it is missing (RFC 9207): refused")
		return a
	}
	if e := q.Get("error"); e != "" {
		if code := errorCode(e); code != "" {
			a.err = fmt.Errorf("the authorization server refused the login: %s", code)
		} else {
			a.err = errors.New("the authorization server refused the login")
		}
		return a
	}
	if a.code = q.Get("code"); a.code == "" {
		a.err = errors.New("the redirect carries no code")
	}
	return a
}
