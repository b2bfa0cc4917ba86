package a2a

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/a2abridge/cardsig"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// [agents.a2a] card_key_file pins the key an agent's card must be signed
// with. A card the JS SDK 1.3.0 signed (generateAgentCardSignature, ES256
// over its canonical JSON) verifies and the endpoint is published; the same
// card changed after signing, or signed by another key than the pinned one,
// is refused with a clear log line and never published.
func TestA2ABackendSignedCards(t *testing.T) {
	t.Parallel()
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherSigner, _ := cardsig.NewSigner(other, "")
	for name, c := range map[string]struct {
		opts      string
		pinOther  bool
		published bool
	}{
		"good":      {`{"v10":true,"sign":true}`, false, true},
		"tampered":  {`{"v10":true,"sign":true,"tamper":true}`, false, false},
		"other-key": {`{"v10":true,"sign":true}`, true, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			agent := e2e.StartA2AAgent(t, c.opts)
			var jwk string
			testkit.WaitFor(t, 30*time.Second, "the agent's public key", func() bool {
				agent.Mu.Lock()
				defer agent.Mu.Unlock()
				jwk = agent.JWK
				return jwk != ""
			})
			keyFile := filepath.Join(t.TempDir(), "agent.jwks")
			jwks := `{"keys":[` + jwk + `]}`
			if c.pinOther {
				jwks = string(otherSigner.JWKS())
			}
			if err := os.WriteFile(keyFile, []byte(jwks), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
			toml := e2e.A2ATOML(srv.ComponentDomain, agent.URL+"/.well-known/agent-card.json") + "card_key_file = " + `"` + keyFile + `"` + "\n"
			e := e2e.Start(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: toml})
			c2 := e.Dial("alice")
			manifest := func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err := c2.GetManifest(ctx, e.Endpoint("remote"), "")
				return err == nil
			}
			if c.published {
				testkit.WaitFor(t, 30*time.Second, "the endpoint of the verified card", manifest)
				return
			}
			testkit.WaitFor(t, 30*time.Second, "the refusal in the log", func() bool {
				return strings.Contains(e.Log.String(), "signature does not verify with the pinned key")
			})
			if manifest() {
				t.Errorf("a manifest was published from a card whose signature fails")
			}
		})
	}
}
