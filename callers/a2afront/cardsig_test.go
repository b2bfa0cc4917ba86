package a2afront_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentgw/agentgw/a2abridge/cardsig"
)

// The front signs its cards: the 1.0 card verifies with the JS SDK 1.3.0's
// verifyAgentCardSignature against the front's /jwks.json, and the union
// card (0.3 fields too) with agentgw's verifier; a changed card fails both.
func TestA2AFrontSignedCards(t *testing.T) {
	t.Parallel()
	x := start(t, false)
	weather := "weather@" + x.env.Domain
	res := x.runProto(t, "0.3", nil,
		map[string]any{"op": "verifycard", "jid": weather},
		map[string]any{"op": "verifycard", "jid": weather, "tamper": true},
	)
	if v := res[0].Verified; v == nil || !*v || res[0].Signatures != 1 {
		t.Errorf("the JS SDK did not verify the 1.0 card: %+v", res[0])
	}
	if v := res[1].Verified; v == nil || *v {
		t.Errorf("the JS SDK verified a tampered card: %+v", res[1])
	}

	get := func(path string) []byte {
		req, _ := http.NewRequest("GET", x.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, get("/jwks.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := cardsig.LoadVerifier(jwks)
	if err != nil {
		t.Fatal(err)
	}
	union := get("/agents/" + weather + "/.well-known/agent-card.json")
	if err := v.Verify(union); err != nil {
		t.Errorf("the union card: %v", err)
	}
	tampered := bytes.Replace(union, []byte(`"protocolVersion":"0.3.0"`), []byte(`"protocolVersion":"0.2.0"`), 1)
	if bytes.Equal(tampered, union) {
		t.Fatalf("no protocolVersion in %s", union)
	}
	if err := v.Verify(tampered); !errors.Is(err, cardsig.ErrBadSignature) {
		t.Errorf("a changed 0.3 field still verifies: %v", err)
	}
}
