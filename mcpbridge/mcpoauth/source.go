package mcpoauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrLoginRequired is the error of a Source whose refresh token the
// authorization server refused (revoked, expired) or that has none yet:
// the endpoint stays unavailable until an operator runs `agentgw oauth
// login` again.
var ErrLoginRequired = errors.New("a new OAuth login is required")

// RefreshBefore is how long before its expiry an access token is
// replaced (a quarter of its lifetime when that is shorter).
const RefreshBefore = 60 * time.Second

// Options configure a Source.
type Options struct {
	// ServerURL is the MCP server's URL, its resource identifier.
	ServerURL string
	Grant     string
	ClientID  string
	// ClientSecret returns the client secret, read at each token
	// request; nil for a public client.
	ClientSecret func() (string, error)
	Scopes       []string
	// Issuer, when set, is the only authorization server accepted.
	Issuer string
	// TokenFile is the absolute path of token_file ("" for client
	// credentials without one).
	TokenFile string
	// HTTPClient is used for discovery and token requests (nil: a client
	// with a 30 s timeout that follows no redirect).
	HTTPClient *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// OnLoginRequired, when set, is called once each time the Source
	// enters the ErrLoginRequired state.
	OnLoginRequired func(reason string)
}

// Source hands out access tokens for one MCP server. It is safe for
// concurrent use; one token request runs at a time. LoginRequired and
// Secrets never wait for it: the gateway's log redactor asks Secrets at
// every line.
type Source struct {
	o Options

	needsIn atomic.Bool              // in the ErrLoginRequired state
	secrets atomic.Pointer[[]string] // what Secrets returns
	onLost  atomic.Pointer[func(string)]

	mu      sync.Mutex
	md      *Metadata
	access  string
	expiry  time.Time
	margin  time.Duration // replace the token this long before expiry
	refresh string        // the refresh token in use (authorization_code)
	refused string        // a refresh token the server refused; not retried
	secret  string        // last client secret read, for redaction
	lost    string        // set by loginRequired: the reason to report after unlocking
	issuer  string        // the authorization server the credentials go to, once known
}

// NewSource returns a Source. Nothing is fetched until Token.
func NewSource(o Options) *Source {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTPClient == nil {
		o.HTTPClient = clientFor(o)
	}
	s := &Source{o: o, issuer: o.Issuer}
	if o.OnLoginRequired != nil {
		s.OnLoginRequired(o.OnLoginRequired)
	}
	return s
}

// checkIssuer refuses discovered metadata that names another
// authorization server than the one the credentials belong to (want: a
// login's issuer, "" for none), and pins the first one seen. Callers
// hold mu.
func (s *Source) checkIssuer(md *Metadata, want string) error {
	for _, pin := range []string{s.issuer, want} {
		if pin != "" && md.Issuer != pin {
			return fmt.Errorf("the MCP server now names the authorization server %s, not %s whose credentials the gateway holds: refused (set [agents.mcp.oauth] issuer, or run agentgw oauth login again, if the move is real)", md.Issuer, pin)
		}
	}
	s.issuer = md.Issuer
	return nil
}

// clientFor is DefaultHTTPClient, whose metadata fetches go through the
// go-sdk's guard against private (RFC 1918, link-local) addresses, except
// when the operator named a private address: a server url on one, or an
// issuer (then the pinned issuer is the only authorization server the
// credentials can go to).
func clientFor(o Options) *http.Client {
	c := DefaultHTTPClient()
	if o.Issuer != "" || privateHost(o.ServerURL) {
		c.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	return c
}

func privateHost(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(u.Hostname())
	return err == nil && (ip.IsPrivate() || ip.IsLinkLocalUnicast())
}

// DefaultHTTPClient times out after 30 s and follows no redirect: a
// metadata or token endpoint that redirects is refused rather than
// followed with credentials.
func DefaultHTTPClient() *http.Client {
	return &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Token returns an access token that is valid for at least RefreshBefore
// more (as far as its expires_in says), getting a new one when needed.
func (s *Source) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	now := s.o.Now()
	if s.access != "" && (s.expiry.IsZero() || now.Add(s.margin).Before(s.expiry)) {
		defer s.mu.Unlock()
		return s.access, nil
	}
	tok, err := s.fetch(ctx, now)
	s.publishSecrets()
	lost := s.lost
	s.lost = ""
	s.mu.Unlock()
	// Outside the lock: the callback logs, and the log redactor asks
	// Secrets.
	if f := s.onLost.Load(); lost != "" && f != nil {
		(*f)(lost)
	}
	return tok, err
}

// publishSecrets snapshots the values Secrets returns. Callers hold mu.
func (s *Source) publishSecrets() {
	var out []string
	for _, v := range []string{s.secret, s.access, s.refresh, s.refused} {
		if v != "" {
			out = append(out, v)
		}
	}
	s.secrets.Store(&out)
}

// OnLoginRequired sets the function called once each time the Source
// enters the ErrLoginRequired state (it replaces Options.OnLoginRequired).
func (s *Source) OnLoginRequired(f func(reason string)) {
	if f == nil {
		s.onLost.Store(nil)
		return
	}
	s.onLost.Store(&f)
}

// Invalidate drops token if it is the one in use: the server answered
// 401 to it, so the next Token gets a new one.
func (s *Source) Invalidate(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.access == token {
		s.access, s.expiry = "", time.Time{}
		// The server may have moved its authorization server.
		s.md = nil
	}
}

// LoginRequired reports whether the Source is in the ErrLoginRequired
// state (it leaves it when the token file holds another refresh token).
func (s *Source) LoginRequired() bool { return s.needsIn.Load() }

// Secrets returns the values to redact: the client secret and the tokens
// in use.
func (s *Source) Secrets() []string {
	if p := s.secrets.Load(); p != nil {
		return *p
	}
	return nil
}

// fetch gets a new access token. Callers hold mu.
func (s *Source) fetch(ctx context.Context, now time.Time) (string, error) {
	s.access, s.expiry = "", time.Time{}
	c, err := s.client()
	if err != nil {
		return "", err
	}
	var rt, loginIssuer, loginResource string
	if s.o.Grant == GrantAuthorizationCode {
		tf, err := ReadTokenFile(s.o.TokenFile)
		if errors.Is(err, ErrNoTokenFile) {
			return "", s.loginRequired(fmt.Sprintf("token_file %s does not exist yet", s.o.TokenFile))
		}
		if err != nil {
			return "", err
		}
		rt, loginIssuer, loginResource = tf.RefreshToken, tf.Issuer, tf.Resource
		if rt == s.refused {
			return "", s.loginRequired("")
		}
		s.refresh = rt
	}
	if s.md == nil {
		md, err := Discover(ctx, s.o.HTTPClient, s.o.ServerURL)
		if err != nil {
			return "", fmt.Errorf("OAuth discovery: %w", err)
		}
		s.md = md
	}
	if err := s.checkIssuer(s.md, loginIssuer); err != nil {
		s.md = nil
		return "", fmt.Errorf("OAuth discovery: %w", err)
	}
	if loginResource != "" && loginResource != s.md.Resource {
		return "", fmt.Errorf("token_file %s holds a login for %s, not this server: run agentgw oauth login again", s.o.TokenFile, loginResource)
	}
	form := url.Values{"resource": {s.md.Resource}}
	switch s.o.Grant {
	case GrantClientCredentials:
		form.Set("grant_type", "client_credentials")
		if sc := s.scopes(); sc != "" {
			form.Set("scope", sc)
		}
	default:
		form.Set("grant_type", "refresh_token")
		form.Set("refresh_token", rt)
	}
	t, err := tokenRequest(ctx, s.o.HTTPClient, s.md, c, form, now)
	var te *TokenError
	if errors.As(err, &te) && te.Code == "invalid_grant" && s.o.Grant == GrantAuthorizationCode {
		s.refused = rt
		return "", s.loginRequired("the authorization server refused the refresh token (invalid_grant: revoked or expired)")
	}
	if err != nil {
		return "", err
	}
	s.needsIn.Store(false)
	if s.o.Grant == GrantAuthorizationCode && t.Refresh != "" && t.Refresh != rt {
		// Rotation: the old refresh token is spent; keep the new one
		// before using the access token, so a crash cannot lose it.
		tf := &TokenFile{Issuer: s.md.Issuer, Resource: s.md.Resource, ClientID: s.o.ClientID, RefreshToken: t.Refresh, Saved: now.UTC()}
		if err := WriteTokenFile(s.o.TokenFile, tf); err != nil {
			return "", fmt.Errorf("keeping the rotated refresh token: %w", err)
		}
		s.refresh = t.Refresh
	}
	s.access, s.expiry, s.margin = t.Access, t.Expiry, RefreshBefore
	if !t.Expiry.IsZero() {
		s.margin = min(RefreshBefore, t.Expiry.Sub(now)/4)
	}
	return s.access, nil
}

func (s *Source) loginRequired(reason string) error {
	first := !s.needsIn.Swap(true)
	if reason == "" {
		reason = "the authorization server refused the refresh token"
	}
	if first {
		s.lost = reason
	}
	return fmt.Errorf("%w: %s", ErrLoginRequired, reason)
}

func (s *Source) client() (client, error) {
	c := client{ID: s.o.ClientID}
	if s.o.ClientSecret != nil {
		v, err := s.o.ClientSecret()
		if err != nil {
			return c, fmt.Errorf("client secret: %w", err)
		}
		c.Secret, s.secret = v, v
	}
	return c, nil
}

// scopes are the configured scopes, else the discovered ones.
func (s *Source) scopes() string {
	if len(s.o.Scopes) > 0 {
		return strings.Join(s.o.Scopes, " ")
	}
	if s.md != nil {
		return strings.Join(s.md.Scopes, " ")
	}
	return ""
}
