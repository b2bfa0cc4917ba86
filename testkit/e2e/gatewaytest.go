// Package e2e runs a real agentgw for the end-to-end tests (e2e/<area>): a private
// XMPP server (Prosody by default, or ejabberd) with registered users, and
// the gateway in-process on its embedded SQLite store, with scripted agents
// whose behaviour tests control.
package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/logging"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// Password is every test user's password prefix: user alice has
// "pw-alice".
const Password = "pw-"

// Agent is a scripted agent: a manifest registered at start and a scripted
// executor behind it.
type Agent struct {
	Localpart string
	// Manifest is the manifest JSON; "" uses DefaultManifest.
	Manifest string
	// Executor runs the tools; nil uses DefaultExecutor.
	Executor *taskstest.Executor
	// NoBackend registers the manifest without an executor (a static
	// agent that cannot run tasks).
	NoBackend bool
}

// Options configure an environment.
type Options struct {
	// Ejabberd runs ejabberd instead of Prosody.
	Ejabberd bool
	// Server reuses an already started server (for example one of a
	// federated pair); the gateway attaches to its component domain.
	Server *xmppharness.Server
	Agents []Agent
	// Users are registered with password Password+name.
	Users []string
	// TOML is appended to the generated config (extra [[agents]] for MCP
	// or connector backends, [policy], [federation] ...).
	TOML string
	// Mutate adjusts the parsed config before the gateway is built.
	Mutate func(*config.Config)
	Clock  clock.Clock
	// Admins are localparts of the server domain listed in admins.
	Admins []string
	// Backends replace or add backends by endpoint bare JID (a
	// conversing test backend, say); their manifests come from Agents.
	Backends map[string]tasks.Backend
	// PostgresDSN, when set, selects [store] driver = "postgres" with this
	// DSN in the file store.dsn (dsn_file) instead of the SQLite file.
	PostgresDSN string
	// Instance is [cluster] instance; "" leaves the default.
	Instance string
	// BeforeRun, when set, sees each gateway after it is built and before
	// it runs (to add a router handler, say).
	BeforeRun func(*gateway.Gateway)
}

// Env is a running environment.
type Env struct {
	T          testing.TB
	Server     *xmppharness.Server
	Config     *config.Config
	ConfigPath string
	Dir        string
	Gateway    *gateway.Gateway
	Agents     map[string]*taskstest.Executor // by bare JID
	Domain     string                         // the component domain
	// Log holds everything the gateway logged.
	Log *SyncBuffer

	Opts   Options
	cancel context.CancelFunc
	Done   chan error
}

// SyncBuffer is a goroutine-safe log sink.
type SyncBuffer = testkit.SyncBuffer

// Start brings up the server, registers users, writes a config (Prepare)
// and starts the gateway in-process, waiting for its component handshake.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	e := Prepare(t, o)
	e.StartGateway()
	return e
}

func (e *Env) WriteConfig() {
	t := e.T
	secretPath := filepath.Join(e.Dir, "component.secret")
	if err := os.WriteFile(secretPath, []byte(e.Server.ComponentSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	storeTOML := `path = "agentgw.db"`
	if e.Opts.PostgresDSN != "" {
		if err := os.WriteFile(filepath.Join(e.Dir, "store.dsn"), []byte(e.Opts.PostgresDSN+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		storeTOML = "driver = \"postgres\"\ndsn_file = \"store.dsn\""
	}
	if e.Opts.Instance != "" {
		storeTOML += fmt.Sprintf("\n\n[cluster]\ninstance = %q", e.Opts.Instance)
	}
	var b strings.Builder
	admins := make([]string, 0, len(e.Opts.Admins))
	for _, a := range e.Opts.Admins {
		admins = append(admins, fmt.Sprintf("%q", a+"@"+e.Server.Domain))
	}
	fmt.Fprintf(&b, `[xmpp]
component_domain = %q
server = %q
secret_file = "component.secret"
local_domains = [%q]
admins = [%s]
ping_interval_seconds = 30
iq_timeout_seconds = 10

[store]
%s

[log]
level = "debug"
`, e.Domain, e.Server.ComponentAddr, e.Server.Domain, strings.Join(admins, ", "), storeTOML)
	for _, a := range e.Opts.Agents {
		ep := a.Localpart + "@" + e.Domain
		manifest := a.Manifest
		if manifest == "" {
			manifest = DefaultManifest(ep)
		}
		file := a.Localpart + ".json"
		if err := os.WriteFile(filepath.Join(e.Dir, file), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "\n[[agents]]\njid = %q\nmanifest = %q\n", ep, file)
		if !a.NoBackend {
			x := a.Executor
			if x == nil {
				x = DefaultExecutor()
			}
			e.Agents[ep] = x
		}
	}
	b.WriteString("\n" + e.Opts.TOML + "\n")
	e.ConfigPath = filepath.Join(e.Dir, "agentgw.toml")
	if err := os.WriteFile(e.ConfigPath, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// StartGateway (re)starts the in-process gateway on the same config and
// store, and waits for the component handshake.
func (e *Env) StartGateway() {
	t := e.T
	t.Helper()
	cfg, err := gateway.LoadConfig(e.ConfigPath)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if e.Opts.Mutate != nil {
		e.Opts.Mutate(cfg)
	}
	e.Config = cfg
	red := backendkit.NewRedactor(nil)
	red.Add(gateway.Secrets(cfg)...)
	log, _ := logging.New(e.Log, "text", "debug", red)
	backends := map[string]tasks.Backend{}
	for ep, x := range e.Agents {
		backends[ep] = x
	}
	for ep, b := range e.Opts.Backends {
		backends[ep] = b
	}
	ctx, cancel := context.WithCancel(context.Background())
	gw, err := gateway.New(ctx, cfg, log, &gateway.Options{Clock: e.Opts.Clock, ExtraBackends: backends, Redactor: red})
	if err != nil {
		cancel()
		t.Fatalf("gateway: %v", err)
	}
	if e.Opts.BeforeRun != nil {
		e.Opts.BeforeRun(gw)
	}
	e.Gateway = gw
	e.cancel = cancel
	e.Done = make(chan error, 1)
	go func() { e.Done <- gw.Run(ctx) }()
	select {
	case <-gw.Component.Ready():
	case err := <-e.Done:
		cancel()
		t.Fatalf("gateway stopped before the handshake: %v\n%s", err, Tail(e.Log.String(), 3000))
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("gateway handshake timed out\n%s", Tail(e.Log.String(), 3000))
	}
	t.Cleanup(e.StopGateway)
}

// StopGateway stops the gateway cleanly (idempotent).
func (e *Env) StopGateway() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	select {
	case <-e.Done:
	case <-time.After(15 * time.Second):
		var buf bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&buf, 1)
		e.T.Errorf("gateway did not stop within 15 s; goroutines:\n%s", Tail(buf.String(), 20000))
	}
	e.Gateway.Close()
	e.cancel = nil
}

// JID is user's bare JID on the server.
func (e *Env) JID(user string) string { return user + "@" + e.Server.Domain }

// Endpoint is the bare JID of an agent localpart.
func (e *Env) Endpoint(localpart string) jid.JID {
	return jid.MustParse(localpart + "@" + e.Domain)
}

// GatewayJID is the component domain as a JID.
func (e *Env) GatewayJID() jid.JID { return jid.MustParse(e.Domain) }

// Dial logs user in and returns a protocol client; it closes on cleanup.
func (e *Env) Dial(user string) *agentclient.Client {
	e.T.Helper()
	c, _ := e.DialConn(user)
	return c
}

// DialConn is Dial that also returns the raw connection.
func (e *Env) DialConn(user string) (*agentclient.Client, *xmppclient.Client) {
	e.T.Helper()
	return e.DialOn(e.Server, user)
}

// DialOn logs in user@srv.Domain on another server (for example the other
// side of a federated pair). The user must be registered there with
// password Password+user.
func (e *Env) DialOn(srv *xmppharness.Server, user string) (*agentclient.Client, *xmppclient.Client) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := xmppclient.Dial(ctx, xmppclient.Options{
		JID: user + "@" + srv.Domain, Password: Password + user, Server: srv.C2SAddr,
		TLS: &tls.Config{InsecureSkipVerify: true}, IQTimeout: 10 * time.Second, Presence: true,
	})
	if err != nil {
		e.T.Fatalf("login %s: %v", user, err)
	}
	e.T.Cleanup(func() { conn.Close() })
	c := agentclient.New(conn, slog.New(slog.NewTextHandler(TestWriter{T: e.T}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c.IQTimeout = 10 * time.Second
	return c, conn
}

type TestWriter struct{ T testing.TB }

func (w TestWriter) Write(p []byte) (int, error) {
	w.T.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// DefaultManifest is a manifest with the scripted tools DefaultExecutor
// runs: echo, slow (progress), ask (input), fail and wait (until
// cancelled).
func DefaultManifest(endpoint string) string {
	local := endpoint[:strings.IndexByte(endpoint, '@')]
	m := map[string]any{
		"manifestSpecVersion": "0",
		"agent": map[string]any{
			"jid": endpoint, "name": local, "title": strings.ToUpper(local[:1]) + local[1:] + " Agent",
			"description": "Scripted test agent " + local + ".", "version": "1.0.0",
		},
		"tools": []any{
			Tool("echo", "Echo", "Returns its arguments.", `{"type":"object","properties":{"message":{"type":"string"}},"required":["message"],"additionalProperties":false}`, false),
			Tool("slow", "Slow", "Reports progress, then returns.", `{"type":"object","properties":{"steps":{"type":"integer","minimum":1}}}`, false),
			Tool("ask", "Ask", "Asks the caller a question.", `{"type":"object"}`, true),
			Tool("fail", "Fail", "Always fails.", `{"type":"object"}`, false),
			Tool("wait", "Wait", "Runs until cancelled.", `{"type":"object"}`, false),
		},
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func Tool(name, title, desc, schema string, input bool) map[string]any {
	return map[string]any{
		"name": name, "title": title, "description": desc,
		"inputSchema": json.RawMessage(schema),
		"annotations": map[string]any{"readOnlyHint": true},
		"urn:xmpp:agent-api:0": map[string]any{
			"supportsProgress": true, "supportsCancellation": true, "supportsInput": input,
		},
	}
}

// DefaultExecutor scripts the DefaultManifest tools.
func DefaultExecutor() *taskstest.Executor {
	x := taskstest.New(tasks.Features{Progress: true, Cancel: true, Input: true})
	x.Script("echo", taskstest.Step{Echo: true})
	x.Script("slow",
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(25), Stage: "one", Message: "quarter"}},
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(50), Stage: "two", Message: "half"}},
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(75), Stage: "three", Message: "most"}},
		taskstest.Step{Complete: taskstest.Text("slow done")},
	)
	x.Script("ask",
		taskstest.Step{Input: &tasks.InputRequest{Question: "Which unit?", Schema: json.RawMessage(`{"type":"object","properties":{"unit":{"enum":["C","F"]}},"required":["unit"]}`)}},
		taskstest.Step{Echo: true},
	)
	x.Script("fail", taskstest.Step{Fail: &tasks.Failure{Code: "com.example:broken", Message: "The tool is broken.", Retryable: false}})
	x.Script("wait", taskstest.Step{AwaitCancel: true}, taskstest.Step{Cancelled: taskstest.Reason("stopped on request")})
	return x
}

// ErrCondition is agentclient.Condition re-exported for brevity in tests.
func ErrCondition(err error) string { return string(agentclient.Condition(err)) }

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds cmd/agentgw once per test process (from a cache shared
// by the test processes of one source tree) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { buildPath, buildErr = buildCached("./cmd/agentgw", "agentgw") })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Agentgw runs the agentgw binary with args and returns its combined
// output; it fails the test when the exit status differs from wantExit.
func (e *Env) Agentgw(wantExit int, args ...string) string {
	e.T.Helper()
	cmd := exec.Command(Binary(e.T), args...)
	cmd.Dir = e.Dir
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.T.Fatalf("agentgw %v: %v", args, err)
	}
	if code != wantExit {
		e.T.Fatalf("agentgw %v exited %d, want %d:\n%s", args, code, wantExit, out)
	}
	return string(out)
}

func MustJID(s string) jid.JID { return jid.MustParse(s) }
