package gatewaytest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// systemPython is Debian's interpreter, which has python3-slixmpp (the
// python3 on PATH may be a pyenv build without Debian's packages).
const systemPython = "/usr/bin/python3"

// needSlixmpp skips outside CI and fails under CI=true when slixmpp is not
// importable.
func needSlixmpp(t *testing.T) {
	t.Helper()
	out, err := exec.Command(systemPython, "-c", "import slixmpp").CombinedOutput()
	if err == nil {
		return
	}
	msg := "python3-slixmpp is not available to " + systemPython + ": " + strings.TrimSpace(string(out))
	testkit.Unavailable(t, "%s (run scripts/install-deps.sh)", msg)
}

// slixmppScript returns the path of testdata/slixmpp/name.
func slixmppScript(t *testing.T, name string) string {
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

// runSlixmpp runs a script as user against e and returns its check lines.
// A non-zero exit fails the test with the whole output.
func runSlixmpp(t *testing.T, e *Env, script, user string, args ...string) []map[string]any {
	t.Helper()
	stdout, stderr, err := execSlixmpp(t, e, script, user, args...)
	if err != nil {
		t.Fatalf("%s %s failed: %v\nstdout:\n%s\nstderr:\n%s\ngateway log tail:\n%s",
			script, strings.Join(args, " "), err, stdout, stderr, tail(e.Log.String(), 4000))
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

// execSlixmpp runs a script as user against e.
func execSlixmpp(t *testing.T, e *Env, script, user string, args ...string) (stdout []byte, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	full := append([]string{slixmppScript(t, script),
		"--jid", e.JID(user), "--password", Password + user,
		"--server", e.Server.C2SAddr, "--gateway", e.Domain, "--ca", e.Server.CAFile,
	}, args...)
	cmd := exec.CommandContext(ctx, systemPython, full...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	stdout, err = cmd.Output()
	return stdout, errb.String(), err
}

// requireChecks fails unless every named check was reported.
func requireChecks(t *testing.T, checks []map[string]any, names ...string) {
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

func endpointList(e *Env, locals ...string) string {
	var out []string
	for _, l := range locals {
		out = append(out, e.Endpoint(l).String())
	}
	return strings.Join(out, ",")
}

func TestSlixmppDiscovery(t *testing.T) {
	needSlixmpp(t)
	e := Start(t, Options{Agents: fiveAgents(), Users: []string{"alice"}})
	checks := runSlixmpp(t, e, "discovery.py", "alice",
		"--endpoints", endpointList(e, "weather", "calendar", "alpha", "zulu", "mail"),
		"--search", "WEATH", "--search-expect", e.Endpoint("weather").String())
	requireChecks(t, checks, "gateway-info", "directory-node-info", "directory-rsm", "endpoint-info",
		"manifest", "tool-nodes", "schemas", "schema-stale-hash", "search-form", "search-form-submit", "search-legacy")
	n := 0
	for _, c := range checks {
		if c["check"] == "schemas" {
			n++
		}
	}
	if n != 5 {
		t.Fatalf("schemas checked for %d endpoints, want 5", n)
	}

	// The same user becomes a remote principal once its domain is no
	// longer local: an existing endpoint must then answer exactly like a
	// nonexistent one.
	m, ok := e.Gateway.Registry.Active(e.Endpoint("weather").String())
	if !ok {
		t.Fatal("weather has no active manifest")
	}
	e.StopGateway()
	e.opts.Mutate = func(c *config.Config) { c.XMPP.LocalDomains = []string{"elsewhere.test"} }
	e.StartGateway()
	checks = runSlixmpp(t, e, "discovery.py", "alice", "--mode", "hidden",
		"--hidden", e.Endpoint("weather").String(), "--missing", e.Endpoint("nobody").String(),
		"--version", m.Version, "--hash", m.Hash)
	requireChecks(t, checks, "hidden-disco-info", "hidden-manifest", "hidden-schema", "hidden-tool-collection",
		"hidden-directory", "hidden-search")
}

// flowAgent is weather with an extra tool "flow": progress, then an input
// request, then echo.
func flowAgent(e *Env) Agent {
	x := DefaultExecutor()
	x.Script("flow",
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(50), Stage: "prepare", Message: "halfway"}},
		taskstest.Step{Input: &tasks.InputRequest{Question: "Which unit?", Schema: json.RawMessage(`{"type":"object","properties":{"unit":{"enum":["C","F"]}},"required":["unit"]}`)}},
		taskstest.Step{Echo: true},
	)
	return Agent{Localpart: "weather", Executor: x, Manifest: manifestWithTools("weather@"+e.Domain,
		tool("flow", "Flow", "Progress, input, then echo.", `{"type":"object","properties":{"message":{"type":"string"}}}`, true))}
}

// manifestWithTools is DefaultManifest with extra tools appended.
func manifestWithTools(endpoint string, extra ...map[string]any) string {
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

// startFlowEnv starts the server first, so that flowAgent's manifest can
// name the component domain, then the environment with it.
func startFlowEnv(t *testing.T, o Options) *Env {
	t.Helper()
	if o.Server == nil {
		o.Server = startServer(t, o.Ejabberd)
	}
	probe := &Env{Domain: o.Server.ComponentDomain}
	o.Agents = append([]Agent{flowAgent(probe)}, o.Agents...)
	return Start(t, o)
}

func TestSlixmppTasks(t *testing.T) {
	needSlixmpp(t)
	e := startFlowEnv(t, Options{Users: []string{"alice"}})
	checks := runSlixmpp(t, e, "tasks.py", "alice", "--endpoint", e.Endpoint("weather").String())
	requireChecks(t, checks, "pin", "invoke-progress-input-completed", "cancel", "cancel-after-terminal",
		"failed", "deadline-expired", "recovery-errors")
	// The scripted backend saw each task once: the replayed invoke did not
	// run twice.
	x := e.Agents[e.Endpoint("weather").String()]
	flows := 0
	for _, c := range x.Calls() {
		if c.Tool == "flow" {
			flows++
		}
	}
	if flows != 1 {
		t.Fatalf("flow executed %d times, want 1", flows)
	}
}

// startServer starts Prosody, or ejabberd when ejabberd is set (both stop
// on cleanup), so that a test can name the component domain before Start.
func startServer(t *testing.T, ejabberd bool) *xmppharness.Server {
	t.Helper()
	if ejabberd {
		return xmppharness.StartEjabberd(t, xmppharness.EjabberdOptions{})
	}
	return xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
}

// TestSlixmppScriptsFail proves the scripts can fail: a wrong expectation
// and a wrong password each exit non-zero with a clear message.
func TestSlixmppScriptsFail(t *testing.T) {
	needSlixmpp(t)
	e := Start(t, Options{Agents: []Agent{{Localpart: "alpha"}, {Localpart: "zulu"}}, Users: []string{"alice"}})
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"missing endpoint", "RSM count", []string{"--endpoints", endpointList(e, "alpha")}},
		{"wrong search", "search", []string{"--endpoints", endpointList(e, "alpha", "zulu"), "--search", "alp", "--search-expect", e.Endpoint("zulu").String()}},
		{"bad password", "authentication failed", []string{"--password", "wrong", "--endpoints", endpointList(e, "alpha", "zulu")}},
	} {
		stdout, stderr, err := execSlixmpp(t, e, "discovery.py", "alice", tc.args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%s: exit %v, want 1\nstdout:\n%s\nstderr:\n%s", tc.name, err, stdout, stderr)
		}
		if !strings.Contains(stderr, tc.want) || !strings.Contains(string(stdout), `"ok": false`) {
			t.Fatalf("%s: output lacks %q:\nstdout:\n%s\nstderr:\n%s", tc.name, tc.want, stdout, stderr)
		}
	}
}
