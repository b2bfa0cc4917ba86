// Package oauthrs verifies OAuth 2.1 bearer access tokens for agentgw's
// HTTP fronts acting as resource servers (MCP 2026-07-28 authorization,
// RFC 9728): it discovers the issuer's metadata (RFC 8414, or OpenID
// Connect discovery) and JWKS, and accepts a JWT access token only when
// its signature verifies with one of the issuer's keys under an
// asymmetric algorithm, and its issuer, audience (the front's resource
// URL, RFC 8707), expiry, not-before and issue time (with a small skew)
// and required scopes hold.
//
// Metadata and keys are fetched over HTTPS, or HTTP on a loopback
// address only, from the issuer's own origin; keys are cached and fetched
// again (at most every MinRefetch) when a token names an unknown key, so
// a rotation is picked up. No error or log line carries a token.
package oauthrs

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Algorithms are the signature algorithms accepted: asymmetric only, so
// neither "none" nor an HMAC keyed with a public key can pass.
var Algorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// MinRefetch bounds how often an unknown key makes the JWKS be fetched
// again.
const MinRefetch = 30 * time.Second

// maxDocument bounds a metadata or JWKS document.
const maxDocument = 1 << 20

// ErrInvalidToken is the error of every refused token; its text names the
// check that failed, never the token.
var ErrInvalidToken = errors.New("invalid access token")

// ErrInsufficientScope is wrapped (with ErrInvalidToken) by the error of a
// valid token that lacks a required scope: a 403, not a 401 (RFC 6750 3.1).
var ErrInsufficientScope = errors.New("insufficient scope")

// Config is what a resource server accepts.
type Config struct {
	// Issuer is the authorization server's issuer identifier, exactly.
	Issuer string
	// Audience is this resource server's URL (the resource indicator).
	Audience string
	// Scopes are required in every token (space-separated "scope" claim,
	// or "scp").
	Scopes []string
	// Skew is the clock skew allowed on exp, nbf and iat (default 60 s).
	Skew time.Duration
	// HTTPClient fetches metadata and keys (default: 10 s timeout, no
	// redirects to another origin).
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Claims are the verified token's claims the gateway uses.
type Claims struct {
	Subject string
	// JID is the "jid" claim: the XMPP principal the token names, if the
	// issuer puts one in.
	JID      string
	ClientID string
	Scopes   []string
	Expiry   time.Time
	// Raw are all the verified claims, for a principal read from another
	// claim (Gate.JIDClaim).
	Raw map[string]any
}

// Verifier verifies tokens of one issuer for one resource.
type Verifier struct {
	cfg     Config
	jwksURI string

	mu      sync.Mutex
	keys    map[string]crypto.PublicKey
	fetched time.Time
}

// New discovers the issuer's metadata and fetches its keys.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if cfg.Skew == 0 {
		cfg.Skew = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Audience == "" {
		return nil, errors.New("oauthrs: the resource URL (audience) is required")
	}
	iss, err := url.Parse(cfg.Issuer)
	if err != nil || !secureOrigin(iss) || iss.RawQuery != "" || iss.Fragment != "" {
		return nil, errors.New("oauthrs: the issuer must be an https URL (http only on a loopback address) without query or fragment")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if !sameOrigin(req.URL, iss) {
				return errors.New("redirect to another origin")
			}
			return nil
		}}
	}
	v := &Verifier{cfg: cfg}
	meta, err := v.metadata(ctx, iss)
	if err != nil {
		return nil, err
	}
	ju, err := url.Parse(meta.JWKSURI)
	if err != nil || !sameOrigin(ju, iss) {
		return nil, errors.New("oauthrs: the issuer's jwks_uri is not on the issuer's own origin")
	}
	v.jwksURI = ju.String()
	if err := v.refresh(ctx, true); err != nil {
		return nil, err
	}
	return v, nil
}

type metadata struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// metadata reads RFC 8414 metadata, or OpenID Connect discovery, and
// checks that it names the configured issuer.
func (v *Verifier) metadata(ctx context.Context, iss *url.URL) (*metadata, error) {
	path := strings.TrimSuffix(iss.Path, "/")
	candidates := []string{
		iss.Scheme + "://" + iss.Host + "/.well-known/oauth-authorization-server" + path,
		strings.TrimSuffix(iss.String(), "/") + "/.well-known/openid-configuration",
	}
	var last error
	for _, u := range candidates {
		var m metadata
		if err := v.getJSON(ctx, u, &m); err != nil {
			last = err
			continue
		}
		if m.Issuer != v.cfg.Issuer {
			return nil, errors.New("oauthrs: the metadata names another issuer")
		}
		return &m, nil
	}
	return nil, fmt.Errorf("oauthrs: no authorization server metadata: %w", last)
}

func (v *Verifier) getJSON(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return err
	}
	if len(body) > maxDocument {
		return fmt.Errorf("%s: document over %d bytes", u, maxDocument)
	}
	return json.Unmarshal(body, out)
}

// refresh fetches the JWKS, unless it was fetched within MinRefetch and
// force is false.
func (v *Verifier) refresh(ctx context.Context, force bool) error {
	v.mu.Lock()
	if !force && v.cfg.Now().Sub(v.fetched) < MinRefetch {
		v.mu.Unlock()
		return nil
	}
	v.fetched = v.cfg.Now()
	v.mu.Unlock()
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := v.getJSON(ctx, v.jwksURI, &set); err != nil {
		return fmt.Errorf("oauthrs: jwks: %w", err)
	}
	keys := map[string]crypto.PublicKey{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if pub, err := k.public(); err == nil {
			keys[k.Kid] = pub
		}
	}
	v.mu.Lock()
	v.keys = keys
	v.mu.Unlock()
	return nil
}

func (v *Verifier) key(ctx context.Context, kid string) (crypto.PublicKey, error) {
	v.mu.Lock()
	k, ok := v.keys[kid]
	v.mu.Unlock()
	if ok {
		return k, nil
	}
	// Perhaps rotated: fetch again, within the refetch bound.
	if err := v.refresh(ctx, false); err != nil {
		return nil, err
	}
	v.mu.Lock()
	k, ok = v.keys[kid]
	v.mu.Unlock()
	if !ok {
		return nil, errors.New("unknown key")
	}
	return k, nil
}

// Verify checks token and returns its claims, or an error wrapping
// ErrInvalidToken that says which check failed.
func (v *Verifier) Verify(ctx context.Context, token string) (*Claims, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: no token", ErrInvalidToken)
	}
	if len(token) > 16<<10 {
		return nil, fmt.Errorf("%w: token too long", ErrInvalidToken)
	}
	var mc jwt.MapClaims
	p := jwt.NewParser(jwt.WithValidMethods(Algorithms), jwt.WithIssuer(v.cfg.Issuer), jwt.WithAudience(v.cfg.Audience),
		jwt.WithLeeway(v.cfg.Skew), jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(v.cfg.Now))
	_, err := p.ParseWithClaims(token, &mc, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.key(ctx, kid)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidToken, reason(err))
	}
	c := &Claims{Raw: mc}
	c.Subject, _ = mc["sub"].(string)
	c.JID, _ = mc["jid"].(string)
	c.ClientID, _ = mc["client_id"].(string)
	if s, ok := mc["scope"].(string); ok {
		c.Scopes = strings.Fields(s)
	} else if l, ok := mc["scp"].([]any); ok {
		for _, x := range l {
			if s, ok := x.(string); ok {
				c.Scopes = append(c.Scopes, s)
			}
		}
	}
	if exp, err := mc.GetExpirationTime(); err == nil && exp != nil {
		c.Expiry = exp.Time
	}
	for _, need := range v.cfg.Scopes {
		if !slices.Contains(c.Scopes, need) {
			return nil, fmt.Errorf("%w: %w: missing scope %s", ErrInvalidToken, ErrInsufficientScope, need)
		}
	}
	return c, nil
}

// reason names the failed check without quoting the token.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "bad signature or algorithm"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "unverifiable (unknown key or algorithm)"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "not yet valid"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "a required claim is missing"
	}
	return "refused"
}

// Challenge is the WWW-Authenticate value of a 401 (RFC 6750, RFC 9728
// section 5.1): where the resource's metadata is, the scope needed, and
// error="invalid_token" when a token was presented.
func Challenge(resourceMetadata string, scopes []string, presented bool) string {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="` + resourceMetadata + `"`)
	if len(scopes) > 0 {
		b.WriteString(`, scope="` + strings.Join(scopes, " ") + `"`)
	}
	if presented {
		b.WriteString(`, error="invalid_token"`)
	}
	return b.String()
}

// ResourceMetadata is the RFC 9728 Protected Resource Metadata document.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
}

// MetadataHandler serves m at /.well-known/oauth-protected-resource.
func MetadataHandler(m ResourceMetadata) http.Handler {
	if m.BearerMethodsSupported == nil {
		m.BearerMethodsSupported = []string{"header"}
	}
	body, _ := json.Marshal(m)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Write(body)
	})
}

// BearerToken returns the token of an "Authorization: Bearer" header.
func BearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

func secureOrigin(u *url.URL) bool {
	if u.Scheme == "https" && u.Host != "" {
		return true
	}
	if u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func sameOrigin(a, b *url.URL) bool {
	return secureOrigin(a) && a.Scheme == b.Scheme && strings.EqualFold(a.Host, b.Host)
}

// jwk is one JSON Web Key (RFC 7517), public parts.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func (k jwk) public() (crypto.PublicKey, error) {
	b := func(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
	switch k.Kty {
	case "RSA":
		n, err := b(k.N)
		if err != nil {
			return nil, err
		}
		e, err := b(k.E)
		if err != nil || len(e) > 4 {
			return nil, errors.New("bad exponent")
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < 2048 {
			return nil, errors.New("RSA key under 2048 bits")
		}
		return pub, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, errors.New("unknown curve")
		}
		x, err := b(k.X)
		if err != nil {
			return nil, err
		}
		y, err := b(k.Y)
		if err != nil {
			return nil, err
		}
		size := (curve.Params().BitSize + 7) / 8
		if len(x) != size || len(y) != size {
			return nil, errors.New("bad EC point size")
		}
		raw := append([]byte{4}, append(x, y...)...)
		return ecdsa.ParseUncompressedPublicKey(curve, raw)
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, errors.New("unknown curve")
		}
		x, err := b(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 key")
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, errors.New("unknown key type")
}
