package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// TestConnectorAgentThroughProsody drives an xAgent connector agent end to
// end: an XMPP client, Prosody, the gateway, and the reference connector.
func TestConnectorAgentThroughProsody(t *testing.T) {
	srv, err := connectortest.Start(connectortest.Options{APIKey: e2e.ConnectorKey, FormToken: e2e.FormToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("AGENTGW_TEST_CONNECTOR_KEY", e2e.ConnectorKey)
	t.Setenv("AGENTGW_TEST_FORM_TOKEN", e2e.FormToken)

	e := e2e.Start(t, e2e.Options{Users: []string{"alice"}, TOML: fmt.Sprintf(`
[[agents]]
jid = "im@%s"
[agents.connector]
base_url = %q
api_key_env = "AGENTGW_TEST_CONNECTOR_KEY"
`, "agents.example.test", srv.URL())})
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep := e.Endpoint("im")
	var events []string
	record := func(out *agentclient.Outcome) {
		if out != nil {
			events = append(events, string(out.Payload))
		}
	}

	// Before authentication the connector's tools are not offered.
	toolsNow := func() []string {
		m, err := c.GetManifest(ctx, ep, "")
		if err != nil {
			return nil
		}
		var names []string
		for _, tl := range m.Doc.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	time.Sleep(500 * time.Millisecond)
	if n := toolsNow(); len(n) != 0 {
		t.Fatalf("tools offered before authentication: %v", n)
	}

	out := e.Agentgw(0, "connector", "auth", "--config", e.ConfigPath, "--flow", "token_form",
		"--field", "account=alice", "--field-env", "token=AGENTGW_TEST_FORM_TOKEN", ep.String())
	if strings.Contains(out, e2e.FormToken) || strings.Contains(out, e2e.ConnectorKey) {
		t.Fatalf("auth output leaks a secret: %s", out)
	}
	testkit.WaitFor(t, 10*time.Second, "connector tools after authentication", func() bool {
		return strings.Contains(strings.Join(toolsNow(), ","), "echo")
	})

	res, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"text":"hello connector"}`), agentclient.CallOptions{})
	record(res)
	if err != nil || res.State != "completed" || !strings.Contains(string(res.Payload), "hello connector") {
		t.Fatalf("echo: %v %+v", err, res)
	}
	var percents []float64
	res, err = c.Call(ctx, ep, "slow_count", json.RawMessage(`{"steps":4,"delay_ms":30}`), agentclient.CallOptions{OnProgress: func(p agentclient.Progress) {
		if p.Percent != nil {
			percents = append(percents, *p.Percent)
		}
	}})
	record(res)
	if err != nil || res.State != "completed" || len(percents) < 3 || percents[0] >= percents[len(percents)-1] {
		t.Fatalf("slow_count: %v %+v percents=%v", err, res, percents)
	}
	res, err = c.Call(ctx, ep, "always_fail", json.RawMessage(`{}`), agentclient.CallOptions{})
	record(res)
	if err != nil || res.State != "failed" || !strings.Contains(string(res.Payload), `"code":"xagent:`) {
		t.Fatalf("always_fail: %v %+v", err, res)
	}
	res, err = c.Call(ctx, ep, "leak_key", json.RawMessage(`{}`), agentclient.CallOptions{})
	record(res)
	if err != nil {
		t.Fatalf("leak_key: %v", err)
	}

	// The connector restarts while a call runs: the task fails retryable,
	// and the channel comes back.
	p, err := c.Pin(ctx, ep, "slow_count")
	if err != nil {
		t.Fatal(err)
	}
	slowCalls := func() int {
		n := 0
		for _, in := range srv.Invocations() {
			if in.ToolID == "slow_count" {
				n++
			}
		}
		return n
	}
	slowBefore := slowCalls()
	acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: "slow_count", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{"steps":50,"delay_ms":200}`)})
	if err != nil {
		t.Fatal(err)
	}
	// Restart only once the call is at the connector: restarted before it
	// got there (a fixed 400 ms on a loaded machine), the call would simply
	// run on the new connection.
	testkit.WaitFor(t, 30*time.Second, "slow_count at the connector", func() bool { return slowCalls() > slowBefore })
	if err := srv.Restart(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	res, err = c.Follow(ctx, ep, acc, agentclient.CallOptions{RecoverAfter: time.Second})
	record(res)
	if err != nil || res.State != "failed" || !strings.Contains(string(res.Payload), `"code":"unavailable"`) || !strings.Contains(string(res.Payload), `"retryable":true`) {
		t.Fatalf("call across a connector restart: %v %+v", err, res)
	}
	testkit.WaitFor(t, 20*time.Second, "echo after the connector restart", func() bool {
		r, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"text":"again"}`), agentclient.CallOptions{})
		return err == nil && r.State == "completed"
	})

	// Secrets: neither the API key nor the form secret anywhere.
	e.StopGateway()
	db, _ := os.ReadFile(filepath.Join(e.Dir, "agentgw.db"))
	wal, _ := os.ReadFile(filepath.Join(e.Dir, "agentgw.db-wal"))
	for name, hay := range map[string]string{"gateway log": e.Log.String(), "database": string(db) + string(wal), "events": strings.Join(events, "\n")} {
		for _, secret := range []string{e2e.ConnectorKey, e2e.FormToken} {
			if n := strings.Count(hay, secret); n != 0 {
				t.Errorf("%s contains a secret %d times", name, n)
			}
		}
	}
}
