package secrets

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// TestSecretsAuditA2ACardKey: the private key `agentgw a2a` signs its
// agent cards with (--card-key-file) appears nowhere it serves or logs —
// not in its stderr, the card list, the cards of either version or the
// JWKS — in any of its encodings (the PEM file, its base64 DER, the JWK
// "d"); the public key is in the JWKS (the recording saw the flow).
func TestSecretsAuditA2ACardKey(t *testing.T) {
	t.Parallel()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	pemText := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	d := make([]byte, 32)
	key.D.FillBytes(d)
	x := make([]byte, 32)
	key.X.FillBytes(x)
	secretForms := map[string]string{
		"PEM body":   strings.Split(string(pemText), "\n")[1],
		"DER base64": base64.StdEncoding.EncodeToString(der)[:40],
		"JWK d":      base64.RawURLEncoding.EncodeToString(d),
		"d std b64":  base64.StdEncoding.EncodeToString(d)[:40],
		"d hex-ish":  strings.ToLower(key.D.Text(16))[:32],
	}
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice"}})
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "card.pem")
	if err := os.WriteFile(keyFile, pemText, 0o600); err != nil {
		t.Fatal(err)
	}
	const bearer = "card-key-audit-bearer"
	s := e.Server
	cmd := exec.Command(e2e.Binary(t), "a2a", "--jid", e.JID("alice"), "--password-env", "CK_PW", "--server", s.C2SAddr, "--ca-file", s.CAFile,
		"--gateway", e.Domain, "--http", "127.0.0.1:0", "--bearer-env", "CK_BEARER", "--refresh", "1s", "--card-key-file", keyFile)
	cmd.Env = append(os.Environ(), "CK_PW="+e2e.Password+"alice", "CK_BEARER="+bearer)
	stderrPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.StopOnCleanup(t, cmd, "agentgw a2a")
	var mu sync.Mutex
	var stderr bytes.Buffer
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderrPipe)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			stderr.WriteString(line + "\n")
			mu.Unlock()
			if i := strings.Index(line, "serving A2A on "); i >= 0 {
				urls <- strings.TrimSuffix(strings.Fields(line[i+len("serving A2A on "):])[0], "/agents")
			}
		}
	}()
	var base string
	select {
	case base = <-urls:
	case <-time.After(60 * time.Second):
		t.Fatal("agentgw a2a did not start")
	}
	get := func(path, version string) []byte {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		if version != "" {
			req.Header.Set("A2A-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	weather := "weather@" + e.Domain
	var served bytes.Buffer
	testkit.WaitFor(t, 30*time.Second, "the weather card", func() bool {
		return bytes.Contains(get("/agents", ""), []byte(weather))
	})
	served.Write(get("/agents", ""))
	served.Write(get("/agents/"+weather+"/.well-known/agent-card.json", ""))
	served.Write(get("/agents/"+weather+"/.well-known/agent-card.json", "1.0"))
	jwks := get("/jwks.json", "")
	served.Write(jwks)
	if !bytes.Contains(jwks, []byte(base64.RawURLEncoding.EncodeToString(x))) {
		t.Errorf("the JWKS does not hold the public key: %s", jwks)
	}
	if !bytes.Contains(served.Bytes(), []byte(`"signatures"`)) {
		t.Errorf("the cards are not signed")
	}
	mu.Lock()
	logText := stderr.String()
	mu.Unlock()
	if !strings.Contains(logText, "cards signed (ES256") {
		t.Errorf("stderr does not say the cards are signed:\n%s", logText)
	}
	for form, v := range secretForms {
		for place, text := range map[string]string{"stderr": logText, "served": served.String()} {
			if strings.Contains(text, v) {
				t.Errorf("the card signing key (%s) appears in %s", form, place)
			}
		}
	}
}
