// Package cardsig signs and verifies A2A Agent Cards (A2A 1.0 §8.4): a
// JWS (RFC 7515, ES256) over the RFC 8785 canonical JSON of the card as
// served, without its "signatures" member, carried in the card's
// signatures[] as {protected, signature} (the flattened serialization
// without its payload). `agentgw a2a` signs its cards; [agents.a2a]
// verifies a card against pinned keys (a JWKS or a PEM public key).
package cardsig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/agentgw/agentgw/internal/ijson"
)

var b64 = base64.RawURLEncoding

// limits bound a card read for signing or verification.
var limits = ijson.Limits{MaxBytes: 4 << 20}

// Payload is the signed content of a card (A2A 1.0 §8.4.1): its JSON
// object without "signatures", with empty values left out (empty strings,
// nulls, and arrays and objects that are empty once cleaned, as the
// official SDKs clean a card before signing), RFC 8785 canonical.
func Payload(card []byte) ([]byte, error) {
	v, err := ijson.Parse(card, limits)
	if err != nil {
		return nil, errors.New("cardsig: the card is not JSON within limits")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("cardsig: the card is not a JSON object")
	}
	delete(m, "signatures")
	c, _ := clean(m)
	if c == nil {
		c = map[string]any{}
	}
	return ijson.Canonical(c)
}

// clean drops empty values; ok is false when v itself is empty.
func clean(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case string:
		return x, x != ""
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if c, ok := clean(e); ok {
				out = append(out, c)
			}
		}
		return out, len(out) > 0
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if c, ok := clean(e); ok {
				out[k] = c
			}
		}
		return out, len(out) > 0
	}
	return v, true
}

// Signer signs cards with one ES256 key.
type Signer struct {
	key *ecdsa.PrivateKey
	kid string
	jku string
}

// NewSigner signs with key; jku, when set, is the JWKS URL named in the
// protected header.
func NewSigner(key *ecdsa.PrivateKey, jku string) (*Signer, error) {
	if key == nil || key.Curve != elliptic.P256() {
		return nil, errors.New("cardsig: the signing key must be an ECDSA P-256 key (ES256)")
	}
	return &Signer{key: key, kid: Thumbprint(&key.PublicKey), jku: jku}, nil
}

// KeyID is the key's RFC 7638 thumbprint, the protected header's kid.
func (s *Signer) KeyID() string { return s.kid }

// Sign returns card with its signatures replaced by one signature of this
// key.
func (s *Signer) Sign(card []byte) ([]byte, error) {
	payload, err := Payload(card)
	if err != nil {
		return nil, err
	}
	hdr := map[string]string{"alg": "ES256", "typ": "JOSE", "kid": s.kid}
	if s.jku != "" {
		hdr["jku"] = s.jku
	}
	hb, _ := json.Marshal(hdr)
	protected := b64.EncodeToString(hb)
	sum := sha256.Sum256([]byte(protected + "." + b64.EncodeToString(payload)))
	r, sv, err := ecdsa.Sign(rand.Reader, s.key, sum[:])
	if err != nil {
		return nil, fmt.Errorf("cardsig: signing: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	sv.FillBytes(sig[32:])
	var m map[string]json.RawMessage
	if err := json.Unmarshal(card, &m); err != nil {
		return nil, errors.New("cardsig: the card is not a JSON object")
	}
	sigs, _ := json.Marshal([]map[string]string{{"protected": protected, "signature": b64.EncodeToString(sig)}})
	m["signatures"] = sigs
	return json.Marshal(m)
}

// SignJWT returns a compact JWS (RFC 7519 JWT, ES256) of claims with this
// key: the kid and jku in its header name the key in the JWKS, so a push
// notification receiver verifies it as it verifies the cards.
func (s *Signer) SignJWT(claims map[string]any) (string, error) {
	hdr := map[string]string{"alg": "ES256", "typ": "JWT", "kid": s.kid}
	if s.jku != "" {
		hdr["jku"] = s.jku
	}
	hb, _ := json.Marshal(hdr)
	cb, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("cardsig: the claims are not JSON: %w", err)
	}
	input := b64.EncodeToString(hb) + "." + b64.EncodeToString(cb)
	sum := sha256.Sum256([]byte(input))
	r, sv, err := ecdsa.Sign(rand.Reader, s.key, sum[:])
	if err != nil {
		return "", fmt.Errorf("cardsig: signing: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	sv.FillBytes(sig[32:])
	return input + "." + b64.EncodeToString(sig), nil
}

// JWKS is the public key as a JSON Web Key Set, for clients to pin.
func (s *Signer) JWKS() []byte {
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{jwk(&s.key.PublicKey, s.kid)}})
	return b
}

func jwk(pub *ecdsa.PublicKey, kid string) map[string]string {
	x, y := make([]byte, 32), make([]byte, 32)
	pub.X.FillBytes(x)
	pub.Y.FillBytes(y)
	m := map[string]string{"kty": "EC", "crv": "P-256", "x": b64.EncodeToString(x), "y": b64.EncodeToString(y), "alg": "ES256", "use": "sig"}
	if kid != "" {
		m["kid"] = kid
	}
	return m
}

// Thumbprint is the RFC 7638 JWK thumbprint of an EC public key.
func Thumbprint(pub *ecdsa.PublicKey) string {
	j := jwk(pub, "")
	// The required members in lexicographic order, no whitespace.
	s := `{"crv":"` + j["crv"] + `","kty":"EC","x":"` + j["x"] + `","y":"` + j["y"] + `"}`
	sum := sha256.Sum256([]byte(s))
	return b64.EncodeToString(sum[:])
}

// LoadOrGenerate reads a PEM private key (PKCS #8 or SEC 1) from path, or
// generates a P-256 key when path is empty. The key is never logged.
func LoadOrGenerate(path string) (*ecdsa.PrivateKey, error) {
	if path == "" {
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cardsig: reading the signing key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("cardsig: the signing key file holds no PEM block")
	}
	if k, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
		ek, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			return nil, errors.New("cardsig: the signing key is not an ECDSA key (ES256 needs P-256)")
		}
		return ek, nil
	}
	k, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		return nil, errors.New("cardsig: the signing key is neither PKCS #8 nor SEC 1 PEM")
	}
	return k, nil
}

// Verifier checks cards against pinned public keys.
type Verifier struct {
	keys map[string]*ecdsa.PublicKey // by kid (the thumbprint when the JWK has none)
}

// LoadVerifier reads pinned keys: a JWKS file (.keys[] of EC P-256 JWKs)
// or a PEM public key.
func LoadVerifier(path string) (*Verifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cardsig: reading the pinned key: %w", err)
	}
	return ParseVerifier(b)
}

// ParseVerifier is LoadVerifier of the key file's bytes (a JWKS or a PEM
// public key), e.g. a JWKS fetched from the signer's jwks.json.
func ParseVerifier(b []byte) (*Verifier, error) {
	v := &Verifier{keys: map[string]*ecdsa.PublicKey{}}
	if blk, _ := pem.Decode(b); blk != nil {
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		ek, ok := k.(*ecdsa.PublicKey)
		if err != nil || !ok || ek.Curve != elliptic.P256() {
			return nil, errors.New("cardsig: the pinned PEM key is not an ECDSA P-256 public key")
		}
		v.keys[Thumbprint(ek)] = ek
		return v, nil
	}
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil || len(set.Keys) == 0 {
		return nil, errors.New("cardsig: the pinned key file is neither a PEM public key nor a JWKS")
	}
	for _, k := range set.Keys {
		if k["kty"] != "EC" || k["crv"] != "P-256" {
			continue
		}
		x, err1 := b64.DecodeString(k["x"])
		y, err2 := b64.DecodeString(k["y"])
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			continue
		}
		pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
		if !pub.Curve.IsOnCurve(pub.X, pub.Y) {
			continue
		}
		kid := k["kid"]
		if kid == "" {
			kid = Thumbprint(pub)
		}
		v.keys[kid] = pub
	}
	if len(v.keys) == 0 {
		return nil, errors.New("cardsig: the JWKS holds no EC P-256 key")
	}
	return v, nil
}

// ErrBadJWT is VerifyJWT's error; its text names no part of the token.
var ErrBadJWT = errors.New("the JWT does not verify with the pinned keys")

// VerifyJWT checks a compact ES256 JWT against the pinned keys (by the
// kid of its header) and returns its claims. It checks the signature and
// exp only; the caller checks the other claims.
func (v *Verifier) VerifyJWT(token string, now time.Time) (map[string]any, error) {
	seg := strings.Split(token, ".")
	if len(seg) != 3 || len(token) > 16<<10 {
		return nil, ErrBadJWT
	}
	hb, err1 := b64.DecodeString(seg[0])
	cb, err2 := b64.DecodeString(seg[1])
	sig, err3 := b64.DecodeString(seg[2])
	if err1 != nil || err2 != nil || err3 != nil || len(sig) != 64 {
		return nil, ErrBadJWT
	}
	var hdr struct{ Alg, Kid string }
	if json.Unmarshal(hb, &hdr) != nil || hdr.Alg != "ES256" {
		return nil, ErrBadJWT
	}
	pub := v.keys[hdr.Kid]
	if pub == nil {
		return nil, ErrBadJWT
	}
	sum := sha256.Sum256([]byte(seg[0] + "." + seg[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return nil, ErrBadJWT
	}
	var claims map[string]any
	if json.Unmarshal(cb, &claims) != nil {
		return nil, ErrBadJWT
	}
	if exp, ok := claims["exp"].(float64); !ok || now.Unix() > int64(exp) {
		return nil, ErrBadJWT
	}
	return claims, nil
}

// Errors of Verify; their texts name no part of the card.
var (
	ErrUnsigned     = errors.New("the agent card is not signed")
	ErrBadSignature = errors.New("the agent card's signature does not verify with the pinned key")
)

// Verify succeeds when one of the card's signatures is an ES256 signature
// of a pinned key over the card's payload.
func (v *Verifier) Verify(card []byte) error {
	var c struct {
		Signatures []struct {
			Protected string `json:"protected"`
			Signature string `json:"signature"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(card, &c); err != nil {
		return ErrBadSignature
	}
	if len(c.Signatures) == 0 {
		return ErrUnsigned
	}
	payload, err := Payload(card)
	if err != nil {
		return ErrBadSignature
	}
	for _, s := range c.Signatures {
		hb, err := b64.DecodeString(s.Protected)
		if err != nil {
			continue
		}
		var hdr struct {
			Alg string `json:"alg"`
			Kid string `json:"kid"`
		}
		if json.Unmarshal(hb, &hdr) != nil || hdr.Alg != "ES256" {
			continue
		}
		sig, err := b64.DecodeString(s.Signature)
		if err != nil || len(sig) != 64 {
			continue
		}
		sum := sha256.Sum256([]byte(s.Protected + "." + b64.EncodeToString(payload)))
		r, sv := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		for kid, pub := range v.keys {
			if hdr.Kid != "" && hdr.Kid != kid {
				continue
			}
			if ecdsa.Verify(pub, sum[:], r, sv) {
				return nil
			}
		}
	}
	return ErrBadSignature
}
