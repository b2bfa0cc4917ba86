package secrets

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// TestSecretsAuditPostgresDSN extends the secrets audit to the PostgreSQL
// store: the DSN (a libpq URL with the database password) is a secret.
// A private PostgreSQL requires the password (scram-sha-256) and logs
// every connection and statement; the gateway serves tasks on it, and the
// operator commands run against it with the right DSN, a wrong password
// and a DSN that does not parse. Neither the password, the wrong password
// nor the whole DSN may appear in any output, log, metric, the server's
// log or the database's contents.
func TestSecretsAuditPostgresDSN(t *testing.T) {
	t.Parallel()
	pw, wrongPW := e2e.SecRandom("PgPassword"), e2e.SecRandom("WrongPgPassword")
	pg := pgharness.Start(t, pgharness.Options{Password: pw, LogAll: true})
	dsn := pg.NewDatabase(t)
	if !strings.Contains(dsn, pw) {
		t.Fatal("the harness DSN does not carry the password")
	}
	secrets := []struct{ name, value string }{
		{"DSN password", pw},
		{"wrong DSN password", wrongPW},
		{"DSN", dsn},
	}
	rec := &e2e.SecRecorder{}
	e2e.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	metricsAddr := e2e.FreeAddr(t)
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"}, PostgresDSN: dsn,
		TOML: e2e.EverythingTOML(t, "everything", srv.ComponentDomain) + fmt.Sprintf("\n[metrics]\nlisten = %q\n", metricsAddr)})
	cfgText, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	// Configs with a wrong password and with a DSN that does not parse.
	variant := func(name, dsnText string) string {
		if err := os.WriteFile(filepath.Join(e.Dir, name+".dsn"), []byte(dsnText+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(e.Dir, name+".toml")
		body := strings.Replace(string(cfgText), `dsn_file = "store.dsn"`, fmt.Sprintf("dsn_file = %q", name+".dsn"), 1)
		if body == string(cfgText) {
			t.Fatal("the config has no dsn_file line")
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wrongCfg := variant("wrong", strings.Replace(dsn, pw, wrongPW, 1))
	brokenCfg := variant("broken", strings.Replace(dsn, pg.Addr, "127.0.0.1:notaport", 1))

	const (
		plServe       = "serve: output and log"
		plServeWrong  = "serve, wrong DSN password: output"
		plServeBroken = "serve, unparsable DSN: output"
		plDoc         = "doctor --verbose: output"
		plDocWrong    = "doctor --verbose, wrong DSN password: output"
		plDocBroken   = "doctor --verbose, unparsable DSN: output"
		plTrust       = "CLI trust grant/list: output"
		plAdmin       = "CLI admin status: output"
		plMetricsPG   = "/metrics"
		plStanzas     = "XMPP client: task results"
		plPGLog       = "PostgreSQL server log (all statements)"
		plPGDump      = "pg_dump of the database"
	)
	order := []string{plServe, plServeWrong, plServeBroken, plDoc, plDocWrong, plDocBroken, plTrust, plAdmin, plMetricsPG, plStanzas, plPGLog, plPGDump}

	for place, args := range map[string][]string{
		plServeWrong:  {"serve", "--config", wrongCfg},
		plServeBroken: {"serve", "--config", brokenCfg},
		plDocWrong:    {"doctor", "--config", wrongCfg, "--verbose"},
		plDocBroken:   {"doctor", "--config", brokenCfg, "--verbose"},
	} {
		out, code := e2e.SecRun(t, e.Dir, nil, args...)
		rec.Add(place, []byte(out))
		if code == 0 {
			t.Errorf("agentgw %v succeeded:\n%s", args, out)
		}
	}
	for _, args := range [][]string{
		{"trust", "grant", "--config", e.ConfigPath, "--visibility", "remote.example"},
		{"trust", "list", "--config", e.ConfigPath},
	} {
		out, code := e2e.SecRun(t, e.Dir, nil, args...)
		rec.Add(plTrust, []byte(out))
		if code != 0 {
			t.Errorf("agentgw %v exited %d:\n%s", args, code, out)
		}
	}
	out, code := e2e.SecRun(t, e.Dir, nil, "doctor", "--config", e.ConfigPath, "--verbose")
	rec.Add(plDoc, []byte(out))
	if !strings.Contains(out, "ok   store: postgres") {
		t.Errorf("doctor (exit %d) has no postgres store line:\n%s", code, out)
	}

	gw := e.Serve("gw")
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	ep := e.Endpoint("everything")
	e2e.WaitPinned(t, ctx, c, ep, "echo")
	res, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"hello pg audit"}`), agentclient.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec.Add(plStanzas, res.Payload)
	out, code = e2e.SecRun(t, e.Dir, nil, "admin", "status", "--config", e.ConfigPath, ep.String())
	rec.Add(plAdmin, []byte(out))
	if code != 0 {
		t.Errorf("admin list exited %d:\n%s", code, out)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	rec.Add(plMetricsPG, b)
	gw.Stop()
	rec.Add(plServe, []byte(gw.Log()))
	rec.Add(plPGLog, []byte(pg.LogTail()))
	if b, err := os.ReadFile(filepath.Join(pg.Dir, "postgres.log")); err == nil {
		rec.Add(plPGLog, b)
	}
	bin, err := pgharness.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dump, err := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--data-only", dsn).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	// bytea columns dump as hex: the hex of every value is searched too.
	rec.Add(plPGDump, dump)
	hexed := func(v string) string { return hex.EncodeToString([]byte(v)) }

	// Each place saw what it should: a zero count is evidence only then.
	for place, marker := range map[string]string{
		plServe:       "store_driver=postgres",
		plServeWrong:  "password authentication failed",
		plServeBroken: "does not parse",
		plDoc:         "ok   store: postgres",
		plDocWrong:    "password authentication failed",
		plDocBroken:   "does not parse",
		plTrust:       "remote.example",
		plAdmin:       "active",
		plMetricsPG:   "agentgw_",
		plStanzas:     "hello pg audit",
		plPGLog:       "connection authorized",
		plPGDump:      hexed("hello pg audit"),
	} {
		if !strings.Contains(rec.Text(place), marker) {
			t.Errorf("%s: does not contain %q; the recording misses the flows:\n%s", place, marker, e2e.Tail(rec.Text(place), 1500))
		}
	}
	var tbl strings.Builder
	tbl.WriteString("| place | bytes |")
	for _, s := range secrets {
		fmt.Fprintf(&tbl, " %s |", s.name)
	}
	tbl.WriteString("\n|---|---|" + strings.Repeat("---|", len(secrets)) + "\n")
	for _, place := range order {
		text := rec.Text(place)
		fmt.Fprintf(&tbl, "| %s | %d |", place, len(text))
		for _, s := range secrets {
			n := strings.Count(text, s.value)
			if place == plPGDump {
				n += strings.Count(text, hexed(s.value))
			}
			mark := ""
			if n > 0 {
				t.Errorf("%s: %s appears %d times", place, s.name, n)
				mark = " LEAK"
			}
			fmt.Fprintf(&tbl, " %d%s |", n, mark)
		}
		tbl.WriteString("\n")
	}
	t.Logf("secret occurrences (place × secret):\n%s", tbl.String())
}
