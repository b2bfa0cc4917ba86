package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// weatherManifest is the spec's tool-less vector manifest.
const weatherManifest = `{"agent":{"jid":"weather@agents.example.test","name":"weather","version":"1.4.0"},"manifestSpecVersion":"0","tools":[]}`

// doctorEnv is one config directory for doctor runs.
type doctorEnv struct {
	dir    string
	srv    *xmppharness.Server
	secret string // what the config's secret file holds
}

func newDoctorEnv(t *testing.T, srv *xmppharness.Server) *doctorEnv {
	t.Helper()
	e := &doctorEnv{dir: t.TempDir(), srv: srv, secret: srv.ComponentSecret}
	if err := os.WriteFile(filepath.Join(e.dir, "weather.json"), []byte(weatherManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// write writes agentgw.toml with the [xmpp] and [store] tables and the
// given [[agents]] TOML, and the secret file.
func (e *doctorEnv) write(t *testing.T, agents string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, "secret"), []byte(e.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`[xmpp]
component_domain = %q
server = %q
secret_file = "secret"
local_domains = [%q]

[store]
path = "agentgw.db"

%s`, e.srv.ComponentDomain, e.srv.ComponentAddr, e.srv.Domain, agents)
	path := filepath.Join(e.dir, "agentgw.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runDoctorCmd(t *testing.T, path string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code = run(ctx, []string{"doctor", "--config", path, "--timeout", "5s", "--mcp-timeout", "60s"}, &out, &errb)
	t.Logf("exit %d\n%s%s", code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// expectLines compares output line by line; "{*}" in a wanted line matches
// any text (round-trip times, OS error wording).
func expectLines(t *testing.T, got string, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if len(lines) != len(want) {
		t.Errorf("got %d lines, want %d:\n%s", len(lines), len(want), got)
		return
	}
	for i, w := range want {
		re := "^" + strings.ReplaceAll(regexp.QuoteMeta(w), regexp.QuoteMeta("{*}"), ".*") + "$"
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d:\n got: %s\nwant: %s", i+1, lines[i], w)
		}
	}
}

// everythingCommand is the stdio command of the real MCP reference server
// installed by npm at the module root.
func everythingCommand(t *testing.T) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(entry); err != nil || serr != nil {
		testkit.Unavailable(t, "server-everything or node missing (npm install at the module root): %v %v", err, serr)
	}
	return []string{node, entry, "stdio"}
}

func tomlList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestDoctor runs `agentgw doctor` against a real Prosody in each situation
// an operator meets, and checks each situation's distinct line.
func TestDoctor(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	dom := srv.ComponentDomain
	addr := srv.ComponentAddr
	head := func(e *doctorEnv, agents int) []string {
		return []string{
			fmt.Sprintf("ok   config: %s/agentgw.toml is valid (%d agents)", e.dir, agents),
			fmt.Sprintf("ok   component secret: read from file %s/secret", e.dir),
			fmt.Sprintf("ok   xmpp server: %s accepts connections", addr),
		}
	}
	linked := func(e *doctorEnv) []string {
		return []string{
			fmt.Sprintf("ok   xmpp handshake: %s accepted the component secret for %s", addr, dom),
			fmt.Sprintf("ok   xmpp ping: %s answered in {*}", srv.Domain),
			fmt.Sprintf("ok   store: %s/agentgw.db does not exist yet; serve creates it (the directory is writable)", e.dir),
		}
	}
	noSecretLeak := func(t *testing.T, outs ...string) {
		t.Helper()
		for _, o := range outs {
			if strings.Contains(o, srv.ComponentSecret) {
				t.Errorf("output holds the component secret:\n%s", o)
			}
		}
	}

	t.Run("all good", func(t *testing.T) {
		e := newDoctorEnv(t, srv)
		path := e.write(t, fmt.Sprintf(`[[agents]]
jid = "weather@%[1]s"
manifest = "weather.json"

[[agents]]
jid = "everything@%[1]s"
[agents.mcp]
command = %[2]s
`, dom, tomlList(everythingCommand(t))))
		// An existing store is opened and checked.
		db, err := sqlite.Open(context.Background(), filepath.Join(e.dir, "agentgw.db"))
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		code, out, errOut := runDoctorCmd(t, path)
		if code != 0 {
			t.Errorf("exit %d, want 0; stderr: %s", code, errOut)
		}
		want := append(head(e, 2), linked(e)[:2]...)
		want = append(want,
			fmt.Sprintf("ok   store: %s/agentgw.db opens and passes quick_check", e.dir),
			fmt.Sprintf("ok   agent weather@%s: manifest %s/weather.json is valid (version 1.4.0, 0 tools)", dom, e.dir),
			fmt.Sprintf("ok   agent everything@%s: MCP server answered initialize in {*}", dom),
		)
		expectLines(t, out, want...)
		if errOut != "" {
			t.Errorf("stderr: %q", errOut)
		}
		noSecretLeak(t, out, errOut)
	})

	t.Run("wrong secret", func(t *testing.T) {
		e := newDoctorEnv(t, srv)
		e.secret = "not-the-" + srv.ComponentSecret[:4] + "-secret"
		path := e.write(t, "")
		code, out, errOut := runDoctorCmd(t, path)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		want := head(e, 0)
		want = append(want,
			fmt.Sprintf("FAIL xmpp handshake: the server rejected the component secret for %s: check secret_env/secret_file against the server's component secret", dom),
			"skip xmpp ping: no component session",
			linked(e)[2],
		)
		expectLines(t, out, want...)
		if errOut != "agentgw doctor: 1 of 6 checks failed\n" {
			t.Errorf("stderr = %q", errOut)
		}
		if strings.Contains(out, e.secret) {
			t.Error("output holds the configured secret")
		}
	})

	t.Run("another session", func(t *testing.T) {
		d, _ := jid.Parse(dom)
		other := component.New(component.Config{Addr: addr, Secret: srv.ComponentSecret, Logger: slog.New(slog.DiscardHandler)},
			component.NewRouter(d, nil, slog.New(slog.DiscardHandler)))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- other.Run(ctx) }()
		defer func() { cancel(); <-done }()
		select {
		case <-other.Ready():
		case err := <-done:
			t.Fatalf("first session: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("first session did not connect")
		}
		e := newDoctorEnv(t, srv)
		code, out, _ := runDoctorCmd(t, e.write(t, ""))
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		want := head(e, 0)
		want = append(want,
			fmt.Sprintf("FAIL xmpp handshake: another component session is connected for %[1]s: a gateway (or something else) is already connected as %[1]s; stop it before running doctor", dom),
			"skip xmpp ping: no component session",
			linked(e)[2],
		)
		expectLines(t, out, want...)
	})

	t.Run("undeclared domain", func(t *testing.T) {
		e := newDoctorEnv(t, srv)
		path := e.write(t, "")
		cfg, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg = bytes.Replace(cfg, []byte(fmt.Sprintf("component_domain = %q", dom)), []byte(`component_domain = "undeclared.example.test"`), 1)
		if err := os.WriteFile(path, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, _ := runDoctorCmd(t, path)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		want := head(e, 0)
		want = append(want,
			fmt.Sprintf(`FAIL xmpp handshake: the server at %s does not accept undeclared.example.test as an external component: declare it (Prosody: Component "undeclared.example.test"; ejabberd: a host of the ejabberd_service listener; Openfire: the subdomain on Server > Server Settings > External Components) or fix [xmpp] component_domain`, addr),
			"skip xmpp ping: no component session",
			linked(e)[2],
		)
		expectLines(t, out, want...)
	})

	t.Run("dead MCP command", func(t *testing.T) {
		e := newDoctorEnv(t, srv)
		path := e.write(t, fmt.Sprintf(`[[agents]]
jid = "dead@%[1]s"
[agents.mcp]
command = ["/bin/false"]

[[agents]]
jid = "missing@%[1]s"
[agents.mcp]
command = ["agentgw-no-such-mcp-server", "--stdio"]
`, dom))
		code, out, errOut := runDoctorCmd(t, path)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		want := append(head(e, 2), linked(e)...)
		want = append(want,
			fmt.Sprintf(`FAIL agent dead@%s: the MCP server command exited or closed its output before answering initialize ({*}) — run "false" by hand to see its error`, dom),
			fmt.Sprintf(`FAIL agent missing@%s: MCP server command "agentgw-no-such-mcp-server" is not found in PATH — install it or give its full path in [agents.mcp] command (serve's PATH may differ, e.g. under systemd)`, dom),
		)
		expectLines(t, out, want...)
		if errOut != "agentgw doctor: 2 of 8 checks failed\n" {
			t.Errorf("stderr = %q", errOut)
		}
	})

	t.Run("connector", func(t *testing.T) {
		const key = "connector-system-key-0123456789"
		conn, err := connectortest.Start(connectortest.Options{APIKey: key})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		dead := closedPort(t)
		e := newDoctorEnv(t, srv)
		if err := os.WriteFile(filepath.Join(e.dir, "key"), []byte(key), 0o600); err != nil {
			t.Fatal(err)
		}
		path := e.write(t, fmt.Sprintf(`[[agents]]
jid = "gone@%[1]s"
[agents.connector]
base_url = "http://%[2]s"
api_key_file = "key"

[[agents]]
jid = "im@%[1]s"
[agents.connector]
base_url = %[3]q
api_key_file = "key"
`, dom, dead, conn.URL()))
		code, out, errOut := runDoctorCmd(t, path)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		want := append(head(e, 2), linked(e)...)
		want = append(want,
			fmt.Sprintf("FAIL agent gone@%s: nothing listens on %s — is the connector running? check [agents.connector] base_url", dom, dead),
			// Reachable and valid, but no channel has been authenticated.
			fmt.Sprintf("FAIL agent im@%s: connector at %s is not healthy: channel: no authenticated binding — authenticate its channel: agentgw connector auth --config %s --flow FLOW_ID im@%s", dom, conn.URL(), path, dom),
		)
		expectLines(t, out, want...)
		for _, o := range []string{out, errOut} {
			if strings.Contains(o, key) {
				t.Errorf("output holds the connector key:\n%s", o)
			}
		}
	})

	t.Run("bad config", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "agentgw.toml")
		if err := os.WriteFile(path, []byte("[xmpp]\ncomponent_domain = \"agents.example.test\"\nsecret_env = \"X\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runDoctorCmd(t, path)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		expectLines(t, out, fmt.Sprintf("FAIL config: %s: [xmpp] server is required (host:port of the server's component listener)", path))
		if errOut != "agentgw doctor: 1 of 1 checks failed\n" {
			t.Errorf("stderr = %q", errOut)
		}
	})

	// Last: it stops the shared server.
	t.Run("stopped server", func(t *testing.T) {
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		e := newDoctorEnv(t, srv)
		code, out, errOut := runDoctorCmd(t, e.write(t, ""))
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		expectLines(t, out,
			fmt.Sprintf("ok   config: %s/agentgw.toml is valid (0 agents)", e.dir),
			fmt.Sprintf("ok   component secret: read from file %s/secret", e.dir),
			fmt.Sprintf("FAIL xmpp server: nothing listens on %s — is the server running and is its component port configured?", addr),
			"skip xmpp handshake: the server is not reachable",
			"skip xmpp ping: no component session",
			linked(e)[2],
		)
		if errOut != "agentgw doctor: 1 of 6 checks failed\n" {
			t.Errorf("stderr = %q", errOut)
		}
	})
}

// TestDoctorEjabberd checks the XMPP lines against ejabberd: a good link
// and a wrong secret.
func TestDoctorEjabberd(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartEjabberd(t, xmppharness.EjabberdOptions{})
	e := newDoctorEnv(t, srv)
	path := e.write(t, "")
	code, out, _ := runDoctorCmd(t, path)
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	expectLines(t, out,
		fmt.Sprintf("ok   config: %s/agentgw.toml is valid (0 agents)", e.dir),
		fmt.Sprintf("ok   component secret: read from file %s/secret", e.dir),
		fmt.Sprintf("ok   xmpp server: %s accepts connections", srv.ComponentAddr),
		fmt.Sprintf("ok   xmpp handshake: %s accepted the component secret for %s", srv.ComponentAddr, srv.ComponentDomain),
		fmt.Sprintf("ok   xmpp ping: %s answered in {*}", srv.Domain),
		fmt.Sprintf("ok   store: %s/agentgw.db does not exist yet; serve creates it (the directory is writable)", e.dir),
	)

	e.secret = "wrong-secret-for-ejabberd"
	path = e.write(t, "")
	code, out, _ = runDoctorCmd(t, path)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if want := fmt.Sprintf("FAIL xmpp handshake: the server rejected the component secret for %s: check secret_env/secret_file against the server's component secret\n", srv.ComponentDomain); !strings.Contains(out, want) {
		t.Errorf("no wrong-secret line in:\n%s", out)
	}
}

// TestDoctorSilentPort: something accepts TCP on the configured port but
// never speaks XMPP (a wrong port, a stuck server); and an unset secret
// variable. Neither needs a real server.
func TestDoctorSilentPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the test ends
		}
	}()
	dir := t.TempDir()
	path := filepath.Join(dir, "agentgw.toml")
	write := func(secretLine string) {
		cfg := fmt.Sprintf("[xmpp]\ncomponent_domain = \"agents.example.test\"\nserver = %q\n%s\n[store]\npath = \"agentgw.db\"\n", ln.Addr().String(), secretLine)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	doctor := func() (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"doctor", "--timeout", "1s", "--config", path}, &out, &errb)
		t.Logf("exit %d\n%s%s", code, out.String(), errb.String())
		return code, out.String()
	}

	t.Setenv("AGENTGW_DOCTOR_TEST_SECRET", "some-component-secret")
	write(`secret_env = "AGENTGW_DOCTOR_TEST_SECRET"`)
	code, out := doctor()
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	expectLines(t, out,
		fmt.Sprintf("ok   config: %s is valid (0 agents)", path),
		"ok   component secret: read from environment variable AGENTGW_DOCTOR_TEST_SECRET",
		fmt.Sprintf("ok   xmpp server: %s accepts connections", ln.Addr()),
		fmt.Sprintf("FAIL xmpp handshake: %[1]s accepted the connection but the handshake for agents.example.test did not complete within 1s (no answer) — is %[1]s the server's component port (not its client port)?", ln.Addr()),
		"skip xmpp ping: no component session",
		fmt.Sprintf("ok   store: %s/agentgw.db does not exist yet; serve creates it (the directory is writable)", dir),
	)

	write(`secret_env = "AGENTGW_DOCTOR_TEST_UNSET"`)
	code, out = doctor()
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	expectLines(t, out,
		fmt.Sprintf("ok   config: %s is valid (0 agents)", path),
		"FAIL component secret: environment variable AGENTGW_DOCTOR_TEST_UNSET is not set or empty — set it to the secret the server has for agents.example.test",
		fmt.Sprintf("ok   xmpp server: %s accepts connections", ln.Addr()),
		"skip xmpp handshake: the component secret is not readable",
		"skip xmpp ping: no component session",
		fmt.Sprintf("ok   store: %s/agentgw.db does not exist yet; serve creates it (the directory is writable)", dir),
	)
}
