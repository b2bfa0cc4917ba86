package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/oanbridge/oantest"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/porttest"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
	"mellium.im/xmpp/jid"
)

// Helpers that several e2e/<area> packages share: slixmpp runs, the
// reference connector, secret-audit places, self-registration hosts.

// a2aAgent runs testdata/a2a/agent.mjs (an A2A server from the official
// JS SDK) and returns its base URL and a counter of its executions.
type a2aAgent struct {
	URL  string
	Mu   sync.Mutex
	exec map[string]int // skill → executions
	// traceparents are the W3C trace contexts received on /rpc.
	Traceparents []string
}

func (a *a2aAgent) Count(skill string) int {
	a.Mu.Lock()
	defer a.Mu.Unlock()
	return a.exec[skill]
}

func StartA2AAgent(t *testing.T, opts string) *a2aAgent {
	t.Helper()
	return StartA2AScript(t, "agent.mjs", opts)
}

// StartA2AScript runs testdata/a2a/<script> as the A2A peer.
func StartA2AScript(t *testing.T, script, opts string) *a2aAgent {
	t.Helper()
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(root, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil || serr != nil {
		testkit.Unavailable(t, "node or @a2a-js/sdk missing (npm ci at the module root)")
	}
	cmd := exec.Command(node, filepath.Join(root, "testdata", "a2a", script), opts)
	cmd.Dir = root
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	a := &a2aAgent{exec: map[string]int{}}
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "listening":
				port <- f[1]
			case len(f) == 2 && f[0] == "traceparent":
				a.Mu.Lock()
				a.Traceparents = append(a.Traceparents, f[1])
				a.Mu.Unlock()
			case len(f) >= 2 && f[0] == "exec":
				a.Mu.Lock()
				a.exec[f[1]]++
				a.Mu.Unlock()
			}
		}
	}()
	select {
	case p := <-port:
		a.URL = "http://127.0.0.1:" + p
	case <-time.After(30 * time.Second):
		t.Fatal("the A2A agent did not start")
	}
	return a
}

func A2ATOML(domain, cardURL string) string {
	return fmt.Sprintf("[[agents]]\njid = %q\n[agents.a2a]\nurl = %q\n", "remote@"+domain, cardURL)
}

var (
	refOnce sync.Once
	refPath string
	refErr  error
)

// refConnectorBinary builds the reference ACC connector once (cached
// like Binary).
func refConnectorBinary(t testing.TB) string {
	t.Helper()
	refOnce.Do(func() { refPath, refErr = buildCached("./accbridge/acctest/cmd/refconnector", "refconnector") })
	if refErr != nil {
		t.Fatal(refErr)
	}
	return refPath
}

// RefProc is the reference connector running as its own process.
type RefProc struct {
	cmd  *exec.Cmd
	Out  *SyncBuffer
	done chan struct{}
}

func StartRefConnector(t testing.TB, dir string, args ...string) *RefProc {
	t.Helper()
	p := &RefProc{Out: &SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(refConnectorBinary(t), append([]string{"--dir", dir}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.Out, p.Out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	err := p.cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Kill)
	return p
}

func (p *RefProc) Kill() {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// Got counts the messages of typ (for runID, if set) the connector printed.
func (p *RefProc) Got(typ, runID string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(p.Out.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["got"] == typ && (runID == "" || m["run_id"] == runID) {
			n++
		}
	}
	return n
}

func (p *RefProc) RunIDs(typ string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(p.Out.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["got"] == typ {
			if id, ok := m["run_id"].(string); ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// FreePort picks a port that the gateway binds later (porttest: outside
// the ephemeral range, so no client socket takes it meanwhile).
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := porttest.Free("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func AccTOML(port int, domain string) string {
	return fmt.Sprintf(`
[acc]
listen = "127.0.0.1:%d"
heartbeat_seconds = 1
reconnect_grace_seconds = 4
cancel_timeout_seconds = 2
busy_retry_seconds = 1
approval_timeout_seconds = 3

[[agents]]
jid = "hermes@%s"
[agents.acc]
connector = "farm"
agent_id = "agent-1"
`, port, domain)
}

// Frames are the messages the reference connector printed, in order.
func (p *RefProc) Frames() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.Out.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["got"] != nil {
			out = append(out, m)
		}
	}
	return out
}

// RunFrames are the frames for runID, in order, as "type" or
// "type:reason" for an approval denial and "error:CODE" for errors.
func (p *RefProc) RunFrames(runID string) []string {
	var out []string
	for _, m := range p.Frames() {
		if m["run_id"] != runID {
			continue
		}
		s, _ := m["got"].(string)
		switch s {
		case "approval_denied":
			r, _ := m["reason"].(string)
			d, _ := m["denied_by"].(string)
			s += ":" + r + ":by=" + d
		case "error":
			c, _ := m["code"].(float64)
			s += fmt.Sprintf(":%d", int(c))
		}
		out = append(out, s)
	}
	return out
}

const (
	ConnectorKey = "conn-key-SECRET-5f1c9a77"
	FormToken    = "form-token-SECRET-93ab12"
)

const CrashTool = "trigger-long-running-operation"

// WaitPinned polls until the endpoint is discoverable with tool in its
// active manifest (an MCP backend publishes it once the server is up).
func WaitPinned(t *testing.T, ctx context.Context, c *agentclient.Client, ep jid.JID, tool string) *agentclient.Pinned {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		p, err := c.Pin(ctx, ep, tool)
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became discoverable with %s: %v", ep, tool, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DfRates lifts the per-requester rate limits, which polling tests would
// otherwise hit.
const DfRates = `
[federation]
invoke_per_second = 100000
invoke_burst = 100000
input_per_second = 100000
input_burst = 100000
discovery_per_second = 100000
discovery_burst = 100000
schema_per_second = 100000
schema_burst = 100000
`

func FiveAgents() []Agent {
	var out []Agent
	for _, l := range []string{"weather", "calendar", "alpha", "zulu", "mail"} {
		out = append(out, Agent{Localpart: l})
	}
	return out
}

// AccEverything returns node and server-everything's entry point; like
// EverythingTOML it skips (fails under CI) when either is missing.
func AccEverything(t *testing.T) (node, entry string) {
	t.Helper()
	EverythingTOML(t, "probe", "agents.example.test") // skip or fail when missing
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	return node, filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// AccStart starts Prosody, the in-process gateway with the TOML that toml
// builds for the component domain, and logs alice in. It waits until the
// endpoint's manifest is published.
func AccStart(t *testing.T, localpart string, toml func(domain string) string) (*Env, *agentclient.Client, *xmppclient.Client, jid.JID) {
	t.Helper()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := Start(t, Options{Server: srv, Users: []string{"alice"}, TOML: toml(srv.ComponentDomain)})
	c, conn := e.DialConn("alice")
	ep := e.Endpoint(localpart)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var lastErr error
	defer func() {
		if t.Failed() {
			t.Logf("last manifest error: %v\ngateway log tail:\n%s", lastErr, Tail(e.Log.String(), 4000))
		}
	}()
	testkit.WaitFor(t, 90*time.Second, localpart+"'s published manifest", func() bool {
		_, lastErr = c.GetManifest(ctx, ep, "")
		return lastErr == nil
	})
	return e, c, conn, ep
}

// FreeAddr picks an address that the gateway binds later (porttest).
func FreeAddr(t *testing.T) string {
	addr, err := porttest.Addr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func StartOAN(t *testing.T) *oantest.Server {
	t.Helper()
	s, err := oantest.Start()
	if errors.Is(err, oantest.ErrNoNode) {
		testkit.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// PgDSNPassword is put into the DSN of the PostgreSQL end-to-end tests:
// the harness trusts loopback clients, so it is accepted and ignored, and
// the tests check that it never appears in the gateway's log.
const PgDSNPassword = "pg-e2e-Pa55word-x9"

// secPlaces are where TestSecretsAudit looks, in table order.
const (
	PlGatewayLog    = "gateway log (serve, debug)"
	PlServeWrong    = "serve, wrong secret: output"
	PlDoctor        = "doctor --verbose: output"
	PlDoctorWrong   = "doctor --verbose, wrong secret: output"
	PlCLIConnector  = "CLI connector flows/auth: output"
	PlCLICaller     = "CLI agents/tools/call/task -v: output"
	PlFrontStderr   = "CLI mcp front -v: stderr"
	PlFrontTraffic  = "CLI mcp front: JSON-RPC traffic"
	PlStanzasIn     = "XMPP client: stanzas received"
	PlStanzasOut    = "XMPP client: stanzas sent"
	PlProsodyLog    = "Prosody log (debug)"
	PlComponentWire = "component stream on the wire"
	PlDB            = "SQLite agentgw.db"
	PlWAL           = "SQLite agentgw.db-wal"
	PlSHM           = "SQLite agentgw.db-shm"
	PlMetrics       = "/metrics"
	PlMCPAuth       = "MCP server: Authorization header"
	PlMCPHeaders    = "MCP server: other headers"
	PlMCPReq        = "MCP server: request bodies"
	PlMCPResp       = "MCP server: response bodies"
	PlMCPLeak       = "MCP server: leak_header responses"
	PlConnAuth      = "connector: Authorization header"
	PlConnHeaders   = "connector: other headers"
	PlConnHTTP      = "connector: HTTP bodies (card, health)"
	PlConnWSOut     = "connector ws: frames to the connector"
	PlConnAuthStart = "connector ws: auth.start frames"
	PlConnWSIn      = "connector ws: frames from the connector"
	PlConnLeak      = "connector ws: leak_key ack"
	PlCLIOAN        = "CLI oan pair: output"
	PlOANStorage    = "OAN storage host: Authorization headers"
	PlOANRequests   = "OAN server: request paths and bodies"
)

// SecRecorder accumulates what each place saw.
type SecRecorder struct {
	mu     sync.Mutex
	places map[string]*bytes.Buffer
	Open   sync.WaitGroup // hijacked WebSocket connections not yet filed
}

func (r *SecRecorder) Add(place string, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.places == nil {
		r.places = map[string]*bytes.Buffer{}
	}
	buf := r.places[place]
	if buf == nil {
		buf = &bytes.Buffer{}
		r.places[place] = buf
	}
	buf.Write(b)
	buf.WriteByte('\n')
}

func (r *SecRecorder) Text(place string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.places[place]; b != nil {
		return b.String()
	}
	return ""
}

func SecRandom(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// SecRun runs the agentgw binary in dir and returns its combined output
// and exit status; it never waits more than 90 s.
func SecRun(t *testing.T, dir string, stdin io.Reader, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Dir, cmd.Stdin = dir, stdin
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agentgw %v: %v", args, err)
	}
	return string(out), 0
}

// SecConn records every stanza the caller sends and receives.
type SecConn struct {
	C   *xmppclient.Client
	Rec *SecRecorder
}

func (s SecConn) SendIQ(ctx context.Context, iq *xmltree.Element) (*xmltree.Element, error) {
	s.Rec.Add(PlStanzasOut, []byte(iq.String()))
	reply, err := s.C.SendIQ(ctx, iq)
	if reply != nil {
		s.Rec.Add(PlStanzasIn, []byte(reply.String()))
	}
	return reply, err
}

func (s SecConn) OnMessage(f func(*xmltree.Element)) {
	s.C.OnMessage(func(m *xmltree.Element) {
		s.Rec.Add(PlStanzasIn, []byte(m.String()))
		f(m)
	})
}

func (s SecConn) JID() jid.JID { return s.C.JID() }

// HostPasswordEnv carries the hosted account's password to `agentgw host`.
const HostPasswordEnv = "AGENTGW_HOST_TEST_PASSWORD"

// EverythingCommand is server-everything's stdio command line (skips like
// EverythingTOML when node or the package is missing).
func EverythingCommand(t testing.TB) string {
	t.Helper()
	toml := EverythingTOML(t, "x", "example.test")
	i := strings.Index(toml, "command = [")
	parts := strings.Split(strings.Trim(toml[i+len("command = ["):strings.Index(toml[i:], "]")+i], " "), ", ")
	for k := range parts {
		parts[k] = strings.Trim(parts[k], `"`)
	}
	return strings.Join(parts, " ")
}

// StartHost runs `agentgw host` for user@server-domain backed by
// server-everything (--mcp-command, or with backendArgs the flags given),
// and waits until it logged waitFor.
func StartHost(t testing.TB, e *Env, name, user string, waitFor string, backendArgs ...string) *Proc {
	t.Helper()
	if len(backendArgs) == 0 {
		backendArgs = []string{"--mcp-command", EverythingCommand(t)}
	}
	p := NewProc(t, filepath.Join(e.Dir, name+".log"))
	out, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Binary(t), "host", "--jid", e.JID(user), "--password-env", HostPasswordEnv,
		"--server", e.Server.C2SAddr, "--gateway", e.Domain, "--ca-file", e.Server.CAFile,
		"--store", filepath.Join(e.Dir, user+"-host.db"), "--log-level", "debug")
	cmd.Args = append(cmd.Args, backendArgs...)
	cmd.Dir = e.Dir
	cmd.Env = append(os.Environ(), HostPasswordEnv+"="+Password+user)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	err = cmd.Start()
	runtime.UnlockOSThread()
	out.Close()
	if err != nil {
		t.Fatalf("start agentgw host: %v", err)
	}
	p.Cmd = cmd
	p.Reap()
	t.Cleanup(func() { p.Stop() })
	p.WaitLog(waitFor, 90*time.Second)
	return p
}

func SelfRegEnv(t testing.TB, o Options) *Env {
	o.Mutate = func(c *config.Config) { c.XMPP.SelfRegisterDomains = c.XMPP.LocalDomains }
	return Start(t, o)
}

// SystemPython is Debian's interpreter, which has python3-slixmpp (the
// python3 on PATH may be a pyenv build without Debian's packages).
const SystemPython = "/usr/bin/python3"

// NeedSlixmpp skips outside CI and fails under CI=true when slixmpp is not
// importable.
func NeedSlixmpp(t *testing.T) {
	t.Helper()
	out, err := exec.Command(SystemPython, "-c", "import slixmpp").CombinedOutput()
	if err == nil {
		return
	}
	msg := "python3-slixmpp is not available to " + SystemPython + ": " + strings.TrimSpace(string(out))
	testkit.Unavailable(t, "%s (run scripts/install-deps.sh)", msg)
}

// SlixmppScript returns the path of testdata/slixmpp/name.
func SlixmppScript(t *testing.T, name string) string {
	t.Helper()
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "testdata", "slixmpp", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// RunSlixmpp runs a script as user against e and returns its check lines.
// A non-zero exit fails the test with the whole output.
func RunSlixmpp(t *testing.T, e *Env, script, user string, args ...string) []map[string]any {
	t.Helper()
	stdout, stderr, err := ExecSlixmpp(t, e, script, user, args...)
	if err != nil {
		t.Fatalf("%s %s failed: %v\nstdout:\n%s\nstderr:\n%s\ngateway log tail:\n%s",
			script, strings.Join(args, " "), err, stdout, stderr, Tail(e.Log.String(), 4000))
	}
	var checks []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(stdout)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s printed a line that is not JSON: %q", script, sc.Text())
		}
		if m["ok"] != true {
			t.Fatalf("%s reported a failed check with exit 0: %s", script, sc.Text())
		}
		checks = append(checks, m)
	}
	t.Logf("%s: %d checks passed\n%s", script, len(checks), stdout)
	return checks
}

// ExecSlixmpp runs a script as user against e.
func ExecSlixmpp(t *testing.T, e *Env, script, user string, args ...string) (stdout []byte, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	full := append([]string{SlixmppScript(t, script),
		"--jid", e.JID(user), "--password", Password + user,
		"--server", e.Server.C2SAddr, "--gateway", e.Domain, "--ca", e.Server.CAFile,
	}, args...)
	cmd := exec.CommandContext(ctx, SystemPython, full...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	stdout, err = cmd.Output()
	return stdout, errb.String(), err
}

// RequireChecks fails unless every named check was reported.
func RequireChecks(t *testing.T, checks []map[string]any, names ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range checks {
		seen[c["check"].(string)] = true
	}
	for _, n := range names {
		if !seen[n] {
			t.Errorf("check %q was not reported", n)
		}
	}
}

// ManifestWithTools is DefaultManifest with extra tools appended.
func ManifestWithTools(endpoint string, extra ...map[string]any) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(DefaultManifest(endpoint)), &m); err != nil {
		panic(err)
	}
	ts := m["tools"].([]any)
	for _, x := range extra {
		ts = append(ts, x)
	}
	m["tools"] = ts
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// StartServer starts Prosody, or ejabberd when ejabberd is set (both stop
// on cleanup), so that a test can name the component domain before Start.
func StartServer(t *testing.T, ejabberd bool) *xmppharness.Server {
	t.Helper()
	if ejabberd {
		return xmppharness.StartEjabberd(t, xmppharness.EjabberdOptions{})
	}
	return xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
}

// TaskEnv is an environment with one endpoint, weather, whose executor
// scripts the default tools plus extra ones the test defines.
type TaskEnv struct {
	*Env
	Ep      jid.JID
	X       *taskstest.Executor
	Version string
	Hash    string
	Ctx     context.Context
}

// StartTaskEnvConfig is startTaskEnv with the parsed config adjusted by
// mutate (nil for none).
func StartTaskEnvConfig(t *testing.T, users []string, mutate func(*config.Config), script func(x *taskstest.Executor), extra ...map[string]any) *TaskEnv {
	t.Helper()
	x := DefaultExecutor()
	if script != nil {
		script(x)
	}
	srv := StartServer(t, false)
	ep := "weather@" + srv.ComponentDomain
	e := Start(t, Options{Server: srv, Users: users, Mutate: mutate, Agents: []Agent{{Localpart: "weather", Executor: x, Manifest: ManifestWithTools(ep, extra...)}}})
	m, ok := e.Gateway.Registry.Active(ep)
	if !ok {
		t.Fatal("weather has no active manifest")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return &TaskEnv{Env: e, Ep: e.Endpoint("weather"), X: x, Version: m.Version, Hash: m.Hash, Ctx: ctx}
}

func (te *TaskEnv) Invoke(t *testing.T, c *agentclient.Client, tool, args string) *agentclient.Accepted {
	t.Helper()
	acc, err := c.Invoke(te.Ctx, te.Ep, &agentclient.InvokeRequest{Tool: tool, Version: te.Version, ManifestHash: te.Hash, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("invoke %s: %v", tool, err)
	}
	return acc
}

// WaitState polls task-state until the task is in state.
func (te *TaskEnv) WaitState(t *testing.T, c *agentclient.Client, taskID, state string) *agentclient.TaskState {
	t.Helper()
	var st *agentclient.TaskState
	testkit.WaitFor(t, 30*time.Second, "task "+taskID+" to be "+state, func() bool {
		var err error
		st, err = c.State(te.Ctx, te.Ep, taskID)
		if err != nil {
			t.Fatalf("task-state: %v", err)
		}
		return string(st.State) == state
	})
	return st
}
