package acc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

const plACCConnector = "reference ACC connector: everything it received"

// pemBody is the base64 body of a PEM file (what a leak would carry).
func pemBody(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestACCSecretsAudit is the secrets audit (TestSecretsAudit) for the
// agent-control-center listener: the connector's JWT, its client key and
// the gateway's server, CA and JWT signing keys appear in no CLI output,
// gateway log, stanza, manifest, result or store file, even when the
// connector echoes its own token and key into events and its result.
func TestACCSecretsAudit(t *testing.T) {
	t.Parallel()
	rec := &e2e.SecRecorder{}
	e2e.Binary(t)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{Debug: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	password := e2e.SecRandom("XmppPassword")
	if err := srv.Register(ctx, "alice", password); err != nil {
		t.Fatal(err)
	}
	e := e2e.Prepare(t, e2e.Options{Server: srv, TOML: e2e.AccTOML(e2e.FreePort(t), srv.ComponentDomain)})
	dir := filepath.Join(e.Dir, "farm-conn")
	for _, args := range [][]string{
		{"acc", "init", "--config", e.ConfigPath},
		{"acc", "enroll", "--config", e.ConfigPath, "--name", "farm", "--out", dir},
		{"acc", "list", "--config", e.ConfigPath},
		{"acc", "enroll", "--help"},
	} {
		out, _ := e2e.SecRun(t, e.Dir, nil, args...)
		rec.Add(e2e.PlCLIConnector, []byte(out))
	}
	tok, _ := os.ReadFile(filepath.Join(dir, "token.jwt"))
	token := strings.TrimSpace(string(tok))
	parts := strings.Split(token, ".")
	secrets := []struct{ name, value string }{
		{"connector JWT", token},
		{"JWT signature", parts[2]},
		{"connector client key", pemBody(t, filepath.Join(dir, "client.key"))},
		{"server key", pemBody(t, filepath.Join(e.Dir, "acc/server.key"))},
		{"CA key", pemBody(t, filepath.Join(e.Dir, "acc/ca.key"))},
		{"JWT signing key", pemBody(t, filepath.Join(e.Dir, "acc/jwt.key"))},
	}
	gw := e.Serve("gw")
	conn := e2e.StartRefConnector(t, dir, "--heartbeat", "500ms")
	gw.WaitLog("acc: published agent version", 30*time.Second)

	xc, err := xmppclient.Dial(ctx, xmppclient.Options{
		JID: "alice@" + srv.Domain, Password: password, Server: srv.C2SAddr,
		TLS: &tls.Config{InsecureSkipVerify: true}, IQTimeout: 15 * time.Second, Presence: true,
		OnPresence: func(p *xmltree.Element) { rec.Add(e2e.PlStanzasIn, []byte(p.String())) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xc.Close() })
	c := agentclient.New(e2e.SecConn{C: xc, Rec: rec}, slog.New(slog.NewTextHandler(e2e.TestWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c.IQTimeout = 15 * time.Second
	ep := e2e.MustJID("hermes@" + srv.ComponentDomain)
	e2e.WaitPinned(t, ctx, c, ep, "run")
	for _, g := range []string{"echo hello acc", "events", "leak-token", "error 5001", "approve high rm -rf /"} {
		args, _ := json.Marshal(map[string]string{"goal": g})
		out, err := c.Call(ctx, ep, "run", args, agentclient.CallOptions{
			OnInput: func(ctx context.Context, req agentclient.InputRequest) (json.RawMessage, error) {
				return json.RawMessage(`{"decision":"approve"}`), nil
			},
		})
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		rec.Add(e2e.PlStanzasIn, out.Payload)
		if g == "leak-token" && !strings.Contains(string(out.Payload), "[redacted") {
			t.Errorf("the leaking run's result shows no redaction: %s", out.Payload)
		}
	}
	// A bad token attempt is logged without the token.
	e.Agentgw(0, "acc", "revoke", "--config", e.ConfigPath, "farm")
	testkit.WaitFor(t, 10*time.Second, "refused reconnect", func() bool { return strings.Contains(gw.Log(), "acc connection refused") })
	gw.Stop()
	conn.Kill()
	rec.Add(e2e.PlGatewayLog, []byte(gw.Log()))
	rec.Add(plACCConnector, []byte(conn.Out.String()))
	for place, f := range map[string]string{e2e.PlDB: "agentgw.db", e2e.PlWAL: "agentgw.db-wal"} {
		if b, err := os.ReadFile(filepath.Join(e.Dir, f)); err == nil {
			rec.Add(place, b)
		}
	}
	if b, err := os.ReadFile(srv.LogPath()); err == nil {
		rec.Add(e2e.PlProsodyLog, b)
	}
	for place, marker := range map[string]string{
		e2e.PlGatewayLog:   "acc connector registered",
		e2e.PlCLIConnector: "enrolled",
		e2e.PlStanzasIn:    "hello acc",
		plACCConnector:     "create_run",
		e2e.PlProsodyLog:   "Received[c2s]",
	} {
		if !strings.Contains(rec.Text(place), marker) {
			t.Errorf("%s: does not contain %q; the recording misses the flows", place, marker)
		}
	}
	var tbl strings.Builder
	for _, place := range []string{e2e.PlGatewayLog, e2e.PlCLIConnector, e2e.PlStanzasIn, e2e.PlStanzasOut, e2e.PlProsodyLog, e2e.PlDB, e2e.PlWAL, plACCConnector} {
		text := rec.Text(place)
		fmt.Fprintf(&tbl, "| %s | %d |", place, len(text))
		for _, s := range secrets {
			n := strings.Count(text, s.value)
			// The connector may see its own token (it sent it) only in what
			// it printed of its own messages; it prints none of them.
			if n > 0 {
				t.Errorf("%s: %s appears %d times", place, s.name, n)
			}
			fmt.Fprintf(&tbl, " %d |", n)
		}
		tbl.WriteString("\n")
	}
	t.Logf("secret occurrences (place × %d secrets):\n%s", len(secrets), tbl.String())
}
