package cardsig

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A signed card verifies with the signer's JWKS and its PEM public key;
// any change to a signed member, a signature of another key and an
// unsigned card are refused; re-signing replaces the signature and the
// member order of the served JSON does not matter (RFC 8785).
func TestSignVerify(t *testing.T) {
	key, err := LoadOrGenerate("")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(key, "http://127.0.0.1/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	card := []byte(`{"name":"weather","description":"é ✓","skills":[{"id":"echo"}],"url":"http://x/agents/a","n":1.5e3}`)
	signed, err := s.Sign(card)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jwks := filepath.Join(dir, "jwks.json")
	os.WriteFile(jwks, s.JWKS(), 0o600)
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pemPath := filepath.Join(dir, "pub.pem")
	os.WriteFile(pemPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
	for _, p := range []string{jwks, pemPath} {
		v, err := LoadVerifier(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(signed); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		tampered := bytes.Replace(signed, []byte(`"url":"http://x/agents/a"`), []byte(`"url":"http://evil/agents/a"`), 1)
		if err := v.Verify(tampered); !errors.Is(err, ErrBadSignature) {
			t.Errorf("tampered url: %v", err)
		}
		if err := v.Verify(card); !errors.Is(err, ErrUnsigned) {
			t.Errorf("unsigned: %v", err)
		}
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	os2, _ := NewSigner(other, "")
	bySomeoneElse, _ := os2.Sign(card)
	v, _ := LoadVerifier(jwks)
	if err := v.Verify(bySomeoneElse); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another key's signature: %v", err)
	}
	again, _ := s.Sign(bySomeoneElse)
	if err := v.Verify(again); err != nil {
		t.Errorf("re-signed: %v", err)
	}
	// The payload is canonical: the same members in another order and
	// spacing give the same payload.
	p1, _ := Payload([]byte(`{"b":1,"a":[true,null],"signatures":[],"e":"","f":{"g":[]},"h":false}`))
	p2, _ := Payload([]byte(`{ "a" : [ true , null ] , "b" : 1.0, "h": false }`))
	if string(p1) != string(p2) || string(p1) != `{"a":[true],"b":1,"h":false}` {
		t.Errorf("payloads %s %s", p1, p2)
	}
}

// A JWT signed by the Signer verifies against its JWKS, and not once a
// claim is changed, the key differs or it has expired.
func TestSignVerifyJWT(t *testing.T) {
	key, _ := LoadOrGenerate("")
	s, _ := NewSigner(key, "http://front/jwks.json")
	v, err := ParseVerifier(s.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := s.SignJWT(map[string]any{"iss": "http://front", "exp": now.Add(time.Minute).Unix(), "taskId": "t1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.VerifyJWT(tok, now)
	if err != nil || c["taskId"] != "t1" {
		t.Fatalf("a good token: %v %v", c, err)
	}
	seg := strings.Split(tok, ".")
	forged, _ := json.Marshal(map[string]any{"iss": "http://front", "exp": now.Add(time.Minute).Unix(), "taskId": "t2"})
	if _, err := v.VerifyJWT(seg[0]+"."+base64.RawURLEncoding.EncodeToString(forged)+"."+seg[2], now); err == nil {
		t.Error("a changed claim verified")
	}
	if _, err := v.VerifyJWT(tok, now.Add(2*time.Minute)); err == nil {
		t.Error("an expired token verified")
	}
	other, _ := LoadOrGenerate("")
	s2, _ := NewSigner(other, "")
	tok2, _ := s2.SignJWT(map[string]any{"exp": now.Add(time.Minute).Unix()})
	if _, err := v.VerifyJWT(tok2, now); err == nil {
		t.Error("another key's token verified")
	}
}
