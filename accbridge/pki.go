package accbridge

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Files are the listener's key material (DESIGN.md [acc]).
type Files struct {
	Cert, Key     string // server certificate and key
	CA, CAKey     string // connector CA (signs the server and client certificates)
	JWTKey        string // ECDSA P-256 key that signs connector tokens
	Hostnames     []string
	EnrollDays    int
	URL           string // wss://…/v1/connector, written to connector.json
	ServerCertTTL time.Duration
}

// Token claims pinned by the verifier.
const (
	tokenIssuer   = "agentgw-acc"
	tokenAudience = "agentgw-acc-connector"
	tokenAlg      = "ES256"
)

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func readPEM(path, typ string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != typ {
		return nil, fmt.Errorf("%s is not a PEM %s", path, typ)
	}
	return b.Bytes, nil
}

// ReadKey reads an ECDSA private key (PKCS #8 PEM). Errors name the file
// only.
func ReadKey(path string) (*ecdsa.PrivateKey, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: not a PKCS #8 key", path)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", path)
	}
	return ek, nil
}

// ReadCert reads one PEM certificate.
func ReadCert(path string) (*x509.Certificate, error) {
	der, err := readPEM(path, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// Init creates whichever of the CA, the server certificate and the JWT key
// is missing, and returns the files it wrote. Existing files are kept: a
// new CA would invalidate every enrolled connector.
func Init(f Files) ([]string, error) {
	var wrote []string
	if exists(f.CA) != exists(f.CAKey) {
		return nil, fmt.Errorf("only one of %s and %s exists; restore the other or remove both", f.CA, f.CAKey)
	}
	if !exists(f.CA) {
		k, err := newKey()
		if err != nil {
			return nil, err
		}
		tpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: "agentgw connector CA"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0),
			IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
		if err != nil {
			return nil, err
		}
		if err := writeKey(f.CAKey, k); err != nil {
			return nil, err
		}
		if err := writePEM(f.CA, "CERTIFICATE", der, 0o644); err != nil {
			return nil, err
		}
		wrote = append(wrote, f.CA, f.CAKey)
	}
	if !exists(f.Cert) || !exists(f.Key) {
		ca, caKey, err := loadCA(f)
		if err != nil {
			return nil, err
		}
		k, err := newKey()
		if err != nil {
			return nil, err
		}
		ttl := f.ServerCertTTL
		if ttl <= 0 {
			ttl = 2 * 365 * 24 * time.Hour
		}
		tpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: "agentgw control center"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(ttl),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		for _, h := range f.Hostnames {
			if ip := net.ParseIP(h); ip != nil {
				tpl.IPAddresses = append(tpl.IPAddresses, ip)
			} else {
				tpl.DNSNames = append(tpl.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &k.PublicKey, caKey)
		if err != nil {
			return nil, err
		}
		os.Remove(f.Cert)
		os.Remove(f.Key)
		if err := writeKey(f.Key, k); err != nil {
			return nil, err
		}
		if err := writePEM(f.Cert, "CERTIFICATE", der, 0o644); err != nil {
			return nil, err
		}
		wrote = append(wrote, f.Cert, f.Key)
	}
	if !exists(f.JWTKey) {
		k, err := newKey()
		if err != nil {
			return nil, err
		}
		if err := writeKey(f.JWTKey, k); err != nil {
			return nil, err
		}
		wrote = append(wrote, f.JWTKey)
	}
	return wrote, nil
}

func loadCA(f Files) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	ca, err := ReadCert(f.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("connector CA: %w (run `agentgw acc init`)", err)
	}
	k, err := ReadKey(f.CAKey)
	if err != nil {
		return nil, nil, fmt.Errorf("connector CA key: %w", err)
	}
	return ca, k, nil
}

// Enrollment is what enroll produced.
type Enrollment struct {
	ConnectorID string
	CertSHA256  string
	Files       []string
}

// Fingerprint is the hex SHA-256 of a certificate's DER, as stored.
func Fingerprint(der []byte) string {
	s := sha256.Sum256(der)
	return hex.EncodeToString(s[:])
}

func thumbprint(der []byte) string {
	s := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(s[:])
}

// NewConnectorID returns a random UUID (version 4), the seed's id format.
func NewConnectorID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Enroll writes a connector's files into dir: ca.crt, client.crt,
// client.key, token.jwt and connector.json (DESIGN.md). The token is
// bound to the client certificate (RFC 8705 cnf x5t#S256). The caller
// records the connector in the store; nothing secret is returned.
func Enroll(f Files, name, dir string) (*Enrollment, error) {
	ca, caKey, err := loadCA(f)
	if err != nil {
		return nil, err
	}
	jwtKey, err := ReadKey(f.JWTKey)
	if err != nil {
		return nil, fmt.Errorf("JWT key: %w (run `agentgw acc init`)", err)
	}
	for _, n := range []string{"client.crt", "client.key", "token.jwt", "connector.json"} {
		if exists(filepath.Join(dir, n)) {
			return nil, fmt.Errorf("%s already exists; use an empty directory", filepath.Join(dir, n))
		}
	}
	id := NewConnectorID()
	k, err := newKey()
	if err != nil {
		return nil, err
	}
	days := f.EnrollDays
	if days <= 0 {
		days = 365
	}
	notAfter := time.Now().AddDate(0, 0, days)
	tpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: id, OrganizationalUnit: []string{name}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &k.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	tok, err := SignToken(jwtKey, id, der, time.Now(), notAfter)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	out := &Enrollment{ConnectorID: id, CertSHA256: Fingerprint(der)}
	write := func(n string, data []byte, mode os.FileMode) error {
		p := filepath.Join(dir, n)
		out.Files = append(out.Files, p)
		return os.WriteFile(p, data, mode)
	}
	if err := write("ca.crt", caPEM, 0o644); err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, "client.crt"), "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	out.Files = append(out.Files, filepath.Join(dir, "client.crt"))
	if err := writeKey(filepath.Join(dir, "client.key"), k); err != nil {
		return nil, err
	}
	out.Files = append(out.Files, filepath.Join(dir, "client.key"))
	if err := write("token.jwt", []byte(tok+"\n"), 0o600); err != nil {
		return nil, err
	}
	cj, _ := json.MarshalIndent(map[string]string{"connector_id": id, "url": f.URL}, "", "  ")
	if err := write("connector.json", append(cj, '\n'), 0o644); err != nil {
		return nil, err
	}
	return out, nil
}

type tokenClaims struct {
	jwt.RegisteredClaims
	Cnf struct {
		X5tS256 string `json:"x5t#S256"`
	} `json:"cnf"`
}

// SignToken signs a connector token for id bound to the certificate der.
func SignToken(k *ecdsa.PrivateKey, id string, der []byte, now, exp time.Time) (string, error) {
	var c tokenClaims
	c.Issuer, c.Subject, c.Audience = tokenIssuer, id, jwt.ClaimStrings{tokenAudience}
	c.IssuedAt, c.NotBefore, c.ExpiresAt = jwt.NewNumericDate(now), jwt.NewNumericDate(now.Add(-time.Minute)), jwt.NewNumericDate(exp)
	c.ID = NewConnectorID()
	c.Cnf.X5tS256 = thumbprint(der)
	return jwt.NewWithClaims(jwt.SigningMethodES256, c).SignedString(k)
}

// Authentication failures. Their text is safe to log; none includes the
// token.
var (
	ErrNoToken      = errors.New("no bearer token")
	ErrBadToken     = errors.New("token rejected")
	ErrUnbound      = errors.New("token is bound to another certificate")
	ErrUnknown      = errors.New("connector is not enrolled")
	ErrRevoked      = errors.New("connector is revoked")
	ErrCertMismatch = errors.New("client certificate is not the enrolled one")
)

// maxTokenBytes bounds a bearer token before parsing.
const maxTokenBytes = 4096

// verifyToken checks the token's signature with the pinned algorithm
// (ES256 only: alg none, HS256 with the public key and any other alg are
// refused), issuer, audience, expiry (required) and the certificate
// binding, and returns the connector id (sub).
func verifyToken(pub *ecdsa.PublicKey, token string, certDER []byte, now time.Time) (string, error) {
	if token == "" {
		return "", ErrNoToken
	}
	if len(token) > maxTokenBytes {
		return "", fmt.Errorf("%w: too long", ErrBadToken)
	}
	var c tokenClaims
	_, err := jwt.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{tokenAlg}), jwt.WithAudience(tokenAudience), jwt.WithIssuer(tokenIssuer),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithLeeway(30*time.Second))
	if err != nil {
		return "", fmt.Errorf("%w: %s", ErrBadToken, tokenReason(err))
	}
	if c.Subject == "" {
		return "", fmt.Errorf("%w: no subject", ErrBadToken)
	}
	if c.Cnf.X5tS256 == "" || c.Cnf.X5tS256 != thumbprint(certDER) {
		return "", ErrUnbound
	}
	return c.Subject, nil
}

// tokenReason names why jwt refused a token in our words (its own texts
// may quote claims).
func tokenReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "bad signature or algorithm"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "expired"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "missing expiry"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "not valid yet"
	}
	return "invalid"
}
