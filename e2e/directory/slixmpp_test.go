package directory

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit/e2e"
)

func endpointList(e *e2e.Env, locals ...string) string {
	var out []string
	for _, l := range locals {
		out = append(out, e.Endpoint(l).String())
	}
	return strings.Join(out, ",")
}

func TestSlixmppDiscovery(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	e := e2e.Start(t, e2e.Options{Agents: e2e.FiveAgents(), Users: []string{"alice"}})
	checks := e2e.RunSlixmpp(t, e, "discovery.py", "alice",
		"--endpoints", endpointList(e, "weather", "calendar", "alpha", "zulu", "mail"),
		"--search", "WEATH", "--search-expect", e.Endpoint("weather").String())
	e2e.RequireChecks(t, checks, "gateway-info", "directory-node-info", "directory-rsm", "endpoint-info",
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
	e.Opts.Mutate = func(c *config.Config) { c.XMPP.LocalDomains = []string{"elsewhere.test"} }
	e.StartGateway()
	checks = e2e.RunSlixmpp(t, e, "discovery.py", "alice", "--mode", "hidden",
		"--hidden", e.Endpoint("weather").String(), "--missing", e.Endpoint("nobody").String(),
		"--version", m.Version, "--hash", m.Hash)
	e2e.RequireChecks(t, checks, "hidden-disco-info", "hidden-manifest", "hidden-schema", "hidden-tool-collection",
		"hidden-directory", "hidden-search")
}

// flowAgent is weather with an extra tool "flow": progress, then an input
// request, then echo.
func flowAgent(e *e2e.Env) e2e.Agent {
	x := e2e.DefaultExecutor()
	x.Script("flow",
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(50), Stage: "prepare", Message: "halfway"}},
		taskstest.Step{Input: &tasks.InputRequest{Question: "Which unit?", Schema: json.RawMessage(`{"type":"object","properties":{"unit":{"enum":["C","F"]}},"required":["unit"]}`)}},
		taskstest.Step{Echo: true},
	)
	return e2e.Agent{Localpart: "weather", Executor: x, Manifest: e2e.ManifestWithTools("weather@"+e.Domain,
		e2e.Tool("flow", "Flow", "Progress, input, then echo.", `{"type":"object","properties":{"message":{"type":"string"}}}`, true))}
}

// startFlowEnv starts the server first, so that flowAgent's manifest can
// name the component domain, then the environment with it.
func startFlowEnv(t *testing.T, o e2e.Options) *e2e.Env {
	t.Helper()
	if o.Server == nil {
		o.Server = e2e.StartServer(t, o.Ejabberd)
	}
	probe := &e2e.Env{Domain: o.Server.ComponentDomain}
	o.Agents = append([]e2e.Agent{flowAgent(probe)}, o.Agents...)
	return e2e.Start(t, o)
}

func TestSlixmppTasks(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	e := startFlowEnv(t, e2e.Options{Users: []string{"alice"}})
	checks := e2e.RunSlixmpp(t, e, "tasks.py", "alice", "--endpoint", e.Endpoint("weather").String())
	e2e.RequireChecks(t, checks, "pin", "invoke-progress-input-completed", "cancel", "cancel-after-terminal",
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

// TestSlixmppScriptsFail proves the scripts can fail: a wrong expectation
// and a wrong password each exit non-zero with a clear message.
func TestSlixmppScriptsFail(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "alpha"}, {Localpart: "zulu"}}, Users: []string{"alice"}})
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"missing endpoint", "RSM count", []string{"--endpoints", endpointList(e, "alpha")}},
		{"wrong search", "search", []string{"--endpoints", endpointList(e, "alpha", "zulu"), "--search", "alp", "--search-expect", e.Endpoint("zulu").String()}},
		{"bad password", "authentication failed", []string{"--password", "wrong", "--endpoints", endpointList(e, "alpha", "zulu")}},
	} {
		stdout, stderr, err := e2e.ExecSlixmpp(t, e, "discovery.py", "alice", tc.args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%s: exit %v, want 1\nstdout:\n%s\nstderr:\n%s", tc.name, err, stdout, stderr)
		}
		if !strings.Contains(stderr, tc.want) || !strings.Contains(string(stdout), `"ok": false`) {
			t.Fatalf("%s: output lacks %q:\nstdout:\n%s\nstderr:\n%s", tc.name, tc.want, stdout, stderr)
		}
	}
}
