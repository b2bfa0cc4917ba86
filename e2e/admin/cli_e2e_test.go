package admin

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// cliTaskCount is the number of tasks in the gateway's store.
func cliTaskCount(t *testing.T, e *e2e.Env) int {
	t.Helper()
	var n int
	if err := e.Gateway.DB.Read.QueryRow(`SELECT count(*) FROM tasks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCLIE2E runs the caller commands of the real agentgw binary as alice
// against the in-process gateway through Prosody.
func TestCLIE2E(t *testing.T) {
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}, {Localpart: "zulu"}}, Users: []string{"alice"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Setenv("AGENTGW_PASSWORD", e2e.Password+"alice")
	weather := "weather@" + e.Domain
	login := []string{"--jid", e.JID("alice"), "--server", e.Server.C2SAddr, "--insecure-skip-verify"}
	run := func(want int, args ...string) string {
		t.Helper()
		return e.Agentgw(want, append(args, login...)...)
	}
	mustContain := func(what, out string, subs ...string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(out, s) {
				t.Fatalf("%s: output lacks %q:\n%s", what, s, out)
			}
		}
	}

	// agents, with the gateway named and discovered.
	out := run(0, "agents", "--gateway", e.Domain)
	mustContain("agents", out, "AGENT", weather, "zulu@"+e.Domain, e.Domain)
	t.Logf("agents --gateway:\n%s", out)
	if out, code := cliRun(e, append([]string{"agents"}, login...)...); code == 0 && strings.Contains(out, weather) {
		t.Logf("agents without --gateway discovered the gateway on the server")
	} else {
		t.Logf("agents without --gateway (exit %d) did not list the agents:\n%s", code, out)
	}
	out = run(0, "agents", "--gateway", e.Domain, "--json")
	var rows []struct{ Gateway, JID, Name string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("agents --json = %v %q", err, out)
	}

	// tools: the manifest, verified against its hash.
	active, _ := e.Gateway.Registry.Active(weather)
	out = run(0, "tools", weather)
	mustContain("tools", out, "(verified)", "version 1.0.0", active.Hash, "echo", "slow", "ask", "fail", "wait")
	t.Logf("tools:\n%s", out)

	// call slow: progress lines, then completed.
	out = run(0, "call", weather, "slow", "--args", `{}`)
	mustContain("call slow", out, "accepted: task ", "progress:  25% [one] quarter", "progress:  50% [two] half", "progress:  75% [three] most", "completed:", "slow done")
	t.Logf("call slow:\n%s", out)

	// call ask: the input prompt is answered from --answer.
	out = run(0, "call", weather, "ask", "--args", `{}`, "--answer", `{"unit":"C"}`)
	mustContain("call ask", out, "input requested: Which unit?", `answer> {"unit":"C"}`, "completed:")
	t.Logf("call ask:\n%s", out)

	// call fail: exit 1 with the failure code.
	out = run(1, "call", weather, "fail", "--args", `{}`)
	mustContain("call fail", out, "failed: com.example:broken: The tool is broken.")

	// task state|result|cancel on a wait task started with agentclient.
	c := e.Dial("alice")
	p, err := c.Pin(ctx, e.Endpoint("weather"), "wait")
	if err != nil {
		t.Fatal(err)
	}
	acc, err := c.Invoke(ctx, e.Endpoint("weather"), &agentclient.InvokeRequest{Tool: "wait", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the wait task to run", func() bool {
		st, err := c.State(ctx, e.Endpoint("weather"), acc.TaskID)
		return err == nil && st.State == "running"
	})
	out = run(0, "task", "state", weather, acc.TaskID)
	mustContain("task state", out, "task        "+acc.TaskID, "state       running at revision 1", "result      available=false")
	var js struct {
		TaskID, State   string
		Revision        int64
		ResultAvailable bool
	}
	if out := run(0, "task", "state", "--json", weather, acc.TaskID); json.Unmarshal([]byte(out), &js) != nil ||
		js.TaskID != acc.TaskID || js.State != "running" || js.Revision != 1 || js.ResultAvailable {
		t.Fatalf("task state --json: %+v from %q", js, out)
	}
	out = run(1, "task", "result", weather, acc.TaskID)
	mustContain("task result before the end", out, "has not settled yet")
	var ja struct{ AcceptedRevision int64 }
	if out := run(0, "task", "cancel", "--json", "--reason", "enough", weather, acc.TaskID); json.Unmarshal([]byte(out), &ja) != nil || ja.AcceptedRevision != 2 {
		t.Fatalf("task cancel --json: %+v from %q", ja, out)
	}
	var state string
	testkit.WaitFor(t, 30*time.Second, "task state to show cancelled", func() bool {
		state = run(0, "task", "state", weather, acc.TaskID)
		return strings.Contains(state, "state       cancelled")
	})
	mustContain("task state after cancel", state, "result      available=true")
	out = run(0, "task", "result", weather, acc.TaskID)
	mustContain("task result after cancel", out, "state cancelled at revision", "cancelled")
	var jr struct {
		State    string
		Revision int64
		Payload  json.RawMessage
	}
	if out := run(0, "task", "result", "--json", weather, acc.TaskID); json.Unmarshal([]byte(out), &jr) != nil ||
		jr.State != "cancelled" || jr.Revision < 2 || !json.Valid(jr.Payload) || len(jr.Payload) == 0 {
		t.Fatalf("task result --json: %+v from %q", jr, out)
	}
	t.Logf("task state after cancel:\n%s\ntask result:\n%s", state, out)
	out = run(1, "task", "state", weather, "task-doesnotexist0000000000000000")
	mustContain("task state of an unknown task", out, "item-not-found")

	// Arguments that violate the schema: exit 2, clear message, nothing
	// sent.
	before, calls := cliTaskCount(t, e), len(e.Agents[weather].Calls())
	out = run(2, "call", weather, "echo", "--args", `{"nope":1}`)
	mustContain("schema violation", out, "agentgw call: ")
	if strings.Contains(out, "accepted") {
		t.Fatalf("schema violation was sent:\n%s", out)
	}
	t.Logf("schema violation: %s", strings.TrimSpace(out))
	out = run(2, "call", weather, "echo", "--args", `{"message":`)
	mustContain("invalid JSON", out, "--args is not valid JSON", "--help")
	if after, callsAfter := cliTaskCount(t, e), len(e.Agents[weather].Calls()); after != before || callsAfter != calls {
		t.Fatalf("rejected calls created tasks: %d -> %d tasks, %d -> %d executions", before, after, calls, callsAfter)
	}

	// Bad flags and arguments: exit 2 with usage.
	for _, args := range [][]string{
		{"call", "--bogus", weather, "echo"},
		{"call", weather},
		{"call", "not a jid", "echo"},
		{"agents", "--page-size", "many"},
		{"agents", "extra"},
		{"tools"},
		{"task", "state", weather},
		{"task", "bogus", weather, "x"},
		{"task", "input", weather, acc.TaskID},
	} {
		out := run(2, args...)
		if !strings.Contains(out, "Usage: agentgw") && !strings.Contains(out, "for usage") {
			t.Errorf("agentgw %v: no usage:\n%s", args, out)
		}
	}
	if out := e.Agentgw(2, "nosuchcommand"); !strings.Contains(out, "unknown command") || !strings.Contains(out, "Usage: agentgw") {
		t.Errorf("unknown command:\n%s", out)
	}
	// A missing --jid is a usage error too.
	if out := e.Agentgw(2, "agents", "--gateway", e.Domain); !strings.Contains(out, "--jid is required") {
		t.Errorf("agents without --jid:\n%s", out)
	}

	// --help of every command prints its usage and exits 0.
	usage := regexp.MustCompile(`Usage: agentgw \S+`)
	for _, cmd := range []string{"serve", "admin", "trust", "connector", "doctor", "agents", "tools", "call", "task", "mcp", "version"} {
		out := e.Agentgw(0, cmd, "--help")
		if !usage.MatchString(out) {
			t.Errorf("agentgw %s --help:\n%s", cmd, out)
		}
	}
	if out := e.Agentgw(0, "--help"); !strings.Contains(out, "Caller commands") {
		t.Errorf("agentgw --help:\n%s", out)
	}
	if out := e.Agentgw(0, "help", "call"); !strings.Contains(out, "Usage: agentgw call") {
		t.Errorf("agentgw help call:\n%s", out)
	}
}

// cliRun runs the binary and returns its output and exit code without
// judging the code.
func cliRun(e *e2e.Env, args ...string) (string, int) {
	e.T.Helper()
	cmd := exec.Command(e2e.Binary(e.T), args...)
	cmd.Dir = e.Dir
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		e.T.Fatalf("agentgw %v: %v", args, err)
	}
	return string(out), 0
}
