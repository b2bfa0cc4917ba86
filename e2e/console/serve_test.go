package console

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// serveConsole runs `agentgw serve` (the real binary and its wiring) on
// Prosody with [console] on a free loopback port, logins by token file and
// by XMPP account (checked at Prosody), over TLS with a generated
// self-signed certificate when tls is set. It returns the console's base
// URL, an HTTP client that trusts the certificate, the token and the env.
func serveConsole(t *testing.T, withTLS bool) (string, *http.Client, string, *e2e.Env) {
	t.Helper()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	addr := e2e.FreeAddr(t)
	extra := ""
	if withTLS {
		extra = "tls_cert = \"console.crt\"\ntls_key = \"console.key\"\n"
	}
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"ops", "alice"}, Admins: []string{"ops"},
		Agents: []e2e.Agent{{Localpart: "static", NoBackend: true}}, TOML: fmt.Sprintf(`
[console]
listen = %q
token_file = "console.token"
login_server = %q
login_ca_file = %q
%s`, addr, srv.C2SAddr, srv.CAFile, extra)})
	dir := filepath.Dir(e.ConfigPath)
	token := "console-serve-token-" + strings.Repeat("7", 32)
	if err := os.WriteFile(filepath.Join(dir, "console.token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	scheme := "http"
	if withTLS {
		scheme = "https"
		pool := x509.NewCertPool()
		pool.AddCert(writeSelfSigned(t, dir))
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	jar, _ := cookiejar.New(nil)
	hc.Jar = jar
	gw := e.Serve("gw")
	base := scheme + "://" + addr
	gw.WaitLog("console listening", 30*time.Second)
	if !strings.Contains(gw.Log(), "url="+base+"/") {
		t.Errorf("the log does not name the console's URL %s:\n%s", base, e2e.Tail(gw.Log(), 2000))
	}
	return base, hc, token, e
}

// writeSelfSigned writes console.crt and console.key (P-256, for 127.0.0.1)
// into dir and returns the certificate.
func writeSelfSigned(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "agentgw console test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	if err := os.WriteFile(filepath.Join(dir, "console.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// loginAt logs in at base with form (jid+password or token) and returns
// the response.
func loginAt(t *testing.T, hc *http.Client, base string, form url.Values) *http.Response {
	t.Helper()
	resp, err := hc.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no login form (%d):\n%s", resp.StatusCode, page)
	}
	form.Set("csrf", string(m[1]))
	resp, err = hc.PostForm(base+"/login", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func sessionCookie(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func getPage(t *testing.T, hc *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConsoleServeHTTP: `agentgw serve` with [console] serves the console
// (the binary's own wiring, not the test's): an admin logs in with the XMPP
// account's password, checked at Prosody, and reads the agents; a
// non-admin cannot; the token from token_file logs in; the session cookie
// is HttpOnly and SameSite=Strict, not Secure.
func TestConsoleServeHTTP(t *testing.T) {
	t.Parallel()
	base, hc, token, e := serveConsole(t, false)
	if resp := loginAt(t, hc, base, url.Values{"jid": {e.JID("alice")}, "password": {e2e.Password + "alice"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("non-admin alice: %d, want 401", resp.StatusCode)
	}
	resp := loginAt(t, hc, base, url.Values{"jid": {e.JID("ops")}, "password": {e2e.Password + "ops"}})
	c := sessionCookie(resp, "agentgw_console")
	if resp.StatusCode != http.StatusSeeOther || c == nil {
		t.Fatalf("ops login: %d, cookies %v", resp.StatusCode, resp.Header["Set-Cookie"])
	}
	if !c.HttpOnly || c.Secure || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie over HTTP: %+v", c)
	}
	code, page := getPage(t, hc, base+"/agents")
	if code != http.StatusOK || !strings.Contains(page, e.Endpoint("static").String()) || !strings.Contains(page, e.JID("ops")) {
		t.Errorf("agents page %d:\n%s", code, page)
	}
	hc2 := &http.Client{Timeout: 30 * time.Second, CheckRedirect: hc.CheckRedirect}
	hc2.Jar, _ = cookiejar.New(nil)
	if resp := loginAt(t, hc2, base, url.Values{"token": {token}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("token login: %d", resp.StatusCode)
	}
}

// TestConsoleServeHTTPS: with tls_cert and tls_key, `agentgw serve` serves
// the console over HTTPS end to end (a generated self-signed certificate
// the client trusts): the login works, the session cookie is
// __Host-agentgw_console, Secure, HttpOnly, SameSite=Strict, the pages
// carry HSTS, and plain HTTP on that port gets no page.
func TestConsoleServeHTTPS(t *testing.T) {
	t.Parallel()
	base, hc, _, e := serveConsole(t, true)
	resp := loginAt(t, hc, base, url.Values{"jid": {e.JID("ops")}, "password": {e2e.Password + "ops"}})
	c := sessionCookie(resp, "__Host-agentgw_console")
	if resp.StatusCode != http.StatusSeeOther || c == nil {
		t.Fatalf("ops login over HTTPS: %d, cookies %v", resp.StatusCode, resp.Header["Set-Cookie"])
	}
	if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Domain != "" {
		t.Errorf("session cookie over HTTPS: %+v", c)
	}
	r, err := hc.Get(base + "/agents")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || r.TLS == nil || !strings.Contains(string(page), e.Endpoint("static").String()) {
		t.Errorf("agents page over HTTPS: %d, TLS %v", r.StatusCode, r.TLS != nil)
	}
	if !strings.HasPrefix(r.Header.Get("Strict-Transport-Security"), "max-age=") {
		t.Errorf("no HSTS over HTTPS: %v", r.Header)
	}
	// Plain HTTP to the TLS port: no console page.
	plain := strings.Replace(base, "https://", "http://", 1)
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(plain + "/login"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(b), "csrf") {
			t.Errorf("plain HTTP on the TLS port got the login page: %d", resp.StatusCode)
		}
	}
	// A client that does not trust the certificate is refused.
	if _, err := (&http.Client{Timeout: 10 * time.Second}).Get(base + "/login"); err == nil {
		t.Error("an untrusting client reached the console")
	}
}
