package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeAndDoctorRefuseBadPrincipalEntries: a visible_to entry that is
// not a principal stops `agentgw serve` and fails `agentgw doctor`, with a
// message naming the agent and the entry. Before, the entry was dropped and
// the emptied list opened the endpoint to every local principal. Neither
// command gets as far as the network, so no server is needed.
func TestServeAndDoctorRefuseBadPrincipalEntries(t *testing.T) {
	t.Parallel()
	for _, entry := range []string{"ops@example.test ", "*.example.test"} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "weather.json"), []byte(weatherManifest), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(`[xmpp]
component_domain = "agents.example.test"
server = %q
secret_file = "secret"
local_domains = ["example.test"]

[store]
path = "agentgw.db"

[[agents]]
jid = "weather@agents.example.test"
manifest = "weather.json"
visible_to = [%q]
`, closedPort(t), entry)
		path := filepath.Join(dir, "agentgw.toml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`[[agents]] #1 (jid "weather@agents.example.test"): visible_to entry %q is not a bare JID or a domain`, entry)
		for _, cmd := range []string{"serve", "doctor"} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var out, errb bytes.Buffer
			code := run(ctx, []string{cmd, "--config", path}, &out, &errb)
			cancel()
			t.Logf("%s: exit %d\n%s%s", cmd, code, out.String(), errb.String())
			if code == 0 {
				t.Errorf("%s with visible_to %q: exit 0, want non-zero", cmd, entry)
			}
			if !strings.Contains(out.String()+errb.String(), want) {
				t.Errorf("%s with visible_to %q: output lacks %q", cmd, entry, want)
			}
			if _, err := os.Stat(filepath.Join(dir, "agentgw.db")); err == nil {
				t.Errorf("%s created the store despite the bad config", cmd)
			}
		}
	}
}
