package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/testkit/pgharness"
)

// TestOperatorCommandsPostgres: with [store] driver = "postgres",
// `agentgw acc enroll|list|revoke`, doctor's ACC check and `agentgw admin
// ban|self-registered|unban` read and write the PostgreSQL database (they
// refused the driver before); no SQLite file appears.
func TestOperatorCommandsPostgres(t *testing.T) {
	pg := pgharness.Start(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "agentgw.toml")
	cfg := fmt.Sprintf(`[xmpp]
component_domain = "agents.example.test"
server = "127.0.0.1:1"
secret_env = "AGENTGW_STORES_PG_SECRET"
[store]
driver = "postgres"
dsn_env = "AGENTGW_STORES_PG_DSN"
[cluster]
instance = "gw-ops"
[acc]
listen = "127.0.0.1:0"

[[agents]]
jid = "hermes@agents.example.test"
[agents.acc]
connector = "farm"
agent_id = "agent-1"
`)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTGW_STORES_PG_SECRET", "some-component-secret")
	t.Setenv("AGENTGW_STORES_PG_DSN", pg.NewDatabase(t))
	agentgw := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		// --config right after the subcommand: flags go before positional
		// arguments.
		n := 2
		if args[0] == "doctor" {
			n = 1
		}
		args = append(append(append([]string{}, args[:n]...), "--config", path), args[n:]...)
		if rc := run(context.Background(), args, &out, &errb); rc != want {
			t.Fatalf("agentgw %s: exit %d, want %d\n%s%s", strings.Join(args, " "), rc, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	acc := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "agent hermes@") {
				return l
			}
		}
		return ""
	}

	agentgw(0, "acc", "init")
	if got := acc(agentgw(1, "doctor", "--timeout", "2s")); !strings.Contains(got, `connector "farm" is not enrolled`) {
		t.Fatalf("doctor before enroll: %s", got)
	}
	id := strings.TrimSpace(agentgw(0, "acc", "enroll", "--name", "farm", "--out", filepath.Join(dir, "farm")))
	if len(id) != 36 {
		t.Fatalf("acc enroll printed %q", id)
	}
	if out := agentgw(0, "acc", "list"); !strings.Contains(out, "farm\t"+id+"\tenrolled") {
		t.Fatalf("acc list: %s", out)
	}
	if got := acc(agentgw(1, "doctor", "--timeout", "2s")); !strings.HasPrefix(got, "ok") || !strings.Contains(got, id) {
		t.Fatalf("doctor after enroll: %s", got)
	}
	agentgw(0, "acc", "revoke", "farm")
	if got := acc(agentgw(1, "doctor", "--timeout", "2s")); !strings.Contains(got, "was revoked") {
		t.Fatalf("doctor after revoke: %s", got)
	}

	const bot = "bot@example.test"
	agentgw(0, "admin", "ban", "--reason", "spam", bot)
	if out := agentgw(0, "admin", "self-registered"); !strings.Contains(out, bot) || !strings.Contains(out, "yes: spam") {
		t.Fatalf("admin self-registered after the ban:\n%s", out)
	}
	agentgw(0, "admin", "unban", bot)
	agentgw(1, "admin", "unban", bot)
	if out := agentgw(0, "admin", "self-registered"); strings.Contains(out, bot) {
		t.Fatalf("admin self-registered after the unban:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "agentgw.db")); err == nil {
		t.Fatal("a SQLite store was created beside a postgres config")
	}
}
