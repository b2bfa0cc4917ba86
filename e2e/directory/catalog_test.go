package directory

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// lineReader streams a subprocess's stdout as JSON lines.
type lineReader struct {
	name  string
	lines chan stamped
	raw   chan string
}

// stamped is one line with the time it was read.
type stamped struct {
	m  map[string]any
	at time.Time
}

func startLines(t *testing.T, name string, cmd *exec.Cmd) *lineReader {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lr := &lineReader{name: name, lines: make(chan stamped, 64), raw: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lr.lines <- stamped{m, time.Now()}
			} else {
				lr.raw <- sc.Text()
			}
		}
		close(lr.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, e2e.Tail(stderr.String(), 4000))
		}
	})
	return lr
}

// next returns the next line with key, failing on a check failure, a
// fatal line, the end of output or the timeout.
func (lr *lineReader) next(t *testing.T, key string, timeout time.Duration) (map[string]any, time.Time) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-lr.lines:
			m := l.m
			if !ok {
				t.Fatalf("%s ended before a %q line", lr.name, key)
			}
			if m["ok"] == false || m["fatal"] != nil {
				t.Fatalf("%s failed: %v", lr.name, m)
			}
			if _, ok := m[key]; ok || m["check"] == key {
				return m, l.at
			}
		case <-deadline:
			t.Fatalf("%s: no %q line within %s", lr.name, key, timeout)
		}
	}
}

// versionManifest is DefaultManifest at version 1.0.<i> with one more tool
// per round, so the tool list hosts see changes.
func versionManifest(t *testing.T, endpoint string, i int) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(e2e.DefaultManifest(endpoint)), &m); err != nil {
		t.Fatal(err)
	}
	m["agent"].(map[string]any)["version"] = fmt.Sprintf("1.0.%d", i)
	tools := m["tools"].([]any)
	for k := 1; k <= i; k++ {
		tools = append(tools, e2e.Tool(fmt.Sprintf("extra%d", k), "Extra", "Added in a later version.", `{"type":"object"}`, false))
	}
	m["tools"] = tools
	b, _ := json.Marshal(m)
	return b
}

// TestCatalogPush activates new versions of an endpoint while a slixmpp
// client (presence subscription + the catalog PubSub node) and an MCP host
// (the TypeScript SDK client) on `agentgw mcp --refresh 0` (no polling at
// all) listen. Each activation must reach both: new caps whose ver slixmpp
// recomputes from the disco answer, a PubSub item with the new version, and
// notifications/tools/list_changed with the new tool listed. The latency
// from Activate returning to each notification is reported (the bound
// asserted is a generous 10 s; the figures are the measurement).
func TestCatalogPush(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testkit.Unavailable(t, "node not installed")
	}
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		testkit.Unavailable(t, "@modelcontextprotocol/sdk missing; run npm ci")
	}
	const rounds = 5
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice", "bob"}})
	ep := e.Endpoint("weather").String()
	bin := e2e.Binary(t)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	py := exec.CommandContext(ctx, e2e.SystemPython, e2e.SlixmppScript(t, "catalog.py"),
		"--jid", e.JID("bob"), "--password", e2e.Password+"bob", "--server", e.Server.C2SAddr,
		"--gateway", e.Domain, "--ca", e.Server.CAFile, "--endpoint", ep, "--rounds", fmt.Sprint(rounds))
	py.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	slix := startLines(t, "catalog.py", py)

	plan, _ := json.Marshal(map[string]any{
		"command": bin,
		"args": []string{"mcp", "--jid", e.JID("alice"), "--password-env", "AGENTGW_TEST_PASSWORD",
			"--server", e.Server.C2SAddr, "--ca-file", e.Server.CAFile, "--refresh", "0"},
		"env":    map[string]string{"AGENTGW_TEST_PASSWORD": e2e.Password + "alice"},
		"rounds": rounds,
	})
	js := exec.CommandContext(ctx, node, filepath.Join(root, "testdata", "mcpfront", "listchanged.mjs"), string(plan))
	js.Dir = root
	host := startLines(t, "listchanged.mjs", js)

	ready, _ := host.next(t, "ready", 90*time.Second)
	if tools, _ := ready["tools"].([]any); len(tools) == 0 {
		t.Fatalf("the MCP host sees no tools: %v", ready)
	}
	slix.next(t, "ready", 90*time.Second)

	var mcpLat, pushLat []time.Duration
	for i := 1; i <= rounds; i++ {
		m, err := e.Gateway.Registry.Register(ctx, versionManifest(t, ep, i))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Gateway.Registry.Activate(ctx, m.Endpoint, m.Version, m.Hash); err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		_, changedAt := host.next(t, "changed", 10*time.Second)
		listed, _ := host.next(t, "listed", 10*time.Second)
		var names []string
		for _, n := range listed["tools"].([]any) {
			names = append(names, n.(string))
		}
		if !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, fmt.Sprintf("extra%d", i)) }) {
			t.Fatalf("round %d: the host's tools after list_changed lack extra%d: %v", i, i, names)
		}
		r, roundAt := slix.next(t, "round", 10*time.Second)
		if r["version"] != m.Version {
			t.Fatalf("round %d: catalog item for version %v, want %s", i, r["version"], m.Version)
		}
		mcpLat = append(mcpLat, changedAt.Sub(at))
		pushLat = append(pushLat, roundAt.Sub(at))
	}
	report := func(name string, d []time.Duration) string {
		s := slices.Clone(d)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return fmt.Sprintf("%s: median %v, max %v over %d activations", name, s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
	}
	t.Logf("activation → notifications/tools/list_changed at the MCP host (agentgw mcp, polling off): %s", report("list_changed", mcpLat))
	t.Logf("activation → caps presence + PubSub item at slixmpp: %s", report("xmpp push", pushLat))
}
