package secrets

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/oanbridge"
	"github.com/agentgw/agentgw/oanbridge/oantest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

var secPlaceOrder = []string{e2e.PlGatewayLog, e2e.PlServeWrong, e2e.PlDoctor, e2e.PlDoctorWrong, e2e.PlCLIConnector, e2e.PlCLICaller, e2e.PlFrontStderr, e2e.PlFrontTraffic,
	e2e.PlStanzasIn, e2e.PlStanzasOut, e2e.PlProsodyLog, e2e.PlComponentWire, e2e.PlDB, e2e.PlWAL, e2e.PlSHM, e2e.PlMetrics,
	e2e.PlMCPAuth, e2e.PlMCPHeaders, e2e.PlMCPReq, e2e.PlMCPResp, e2e.PlMCPLeak, e2e.PlConnAuth, e2e.PlConnHeaders, e2e.PlConnHTTP, e2e.PlConnWSOut, e2e.PlConnAuthStart, e2e.PlConnWSIn, e2e.PlConnLeak,
	e2e.PlCLIOAN, e2e.PlOANStorage, e2e.PlOANRequests, plConsole}

// TestSecretsAudit runs every flow that handles a secret, each secret
// with a distinctive value, and counts each secret in every log, output,
// store file, stanza and backend exchange. A secret may appear only where
// it must: the Authorization header the MCP server and the connector
// receive, the form secret in the auth.start frame that carries it to the
// connector, and the two deliberately leaking backend tools' own
// responses. The component secret crosses the wire only as the handshake's
// SHA-1 digest, which the test recomputes.
func TestSecretsAudit(t *testing.T) {
	secrets := []struct{ name, value string }{
		{"component", e2e.SecRandom("CompSecret")},
		{"wrong component", e2e.SecRandom("WrongCompSecret")},
		{"connector API key", e2e.SecRandom("ConnApiKey")},
		{"connector form", e2e.SecRandom("ConnFormSecret")},
		{"MCP header", e2e.SecRandom("McpHeaderToken")},
		{"XMPP password", e2e.SecRandom("XmppPassword")},
		{"console token", e2e.SecRandom("ConsoleToken")},
	}
	comp, wrong, apiKey, form, mcpToken, password, consoleToken := secrets[0].value, secrets[1].value, secrets[2].value, secrets[3].value, secrets[4].value, secrets[5].value, secrets[6].value
	rec := &e2e.SecRecorder{}
	e2e.Binary(t)

	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{ComponentSecret: comp, Debug: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := srv.Register(ctx, "alice", password); err != nil {
		t.Fatal(err)
	}
	wireAddr, handshakes := secComponentTap(t, srv.ComponentAddr, rec)
	connURL, connSrv := secConnector(t, apiKey, form, rec)
	mcpURL, mcpRejected := secMCPServer(t, mcpToken, rec)
	metricsAddr := e2e.FreeAddr(t)
	oanSrv := e2e.StartOAN(t)

	t.Setenv("AGENTGW_SEC_CONNECTOR_KEY", apiKey)
	t.Setenv("AGENTGW_SEC_FORM", form)
	t.Setenv("AGENTGW_SEC_MCP_AUTH", "Bearer "+mcpToken)
	t.Setenv("AGENTGW_SEC_PASSWORD", password)
	t.Setenv("AGENTGW_SEC_CONSOLE_TOKEN", consoleToken)
	consoleAddr := e2e.FreeAddr(t)
	e := e2e.Prepare(t, e2e.Options{Server: srv, Agents: []e2e.Agent{{Localpart: "static", NoBackend: true}}, Admins: []string{"ops"}, TOML: fmt.Sprintf(`
[[agents]]
jid = "secmcp@%[1]s"
[agents.mcp]
url = %[2]q
headers_env = { Authorization = "AGENTGW_SEC_MCP_AUTH" }

[[agents]]
jid = "im@%[1]s"
[agents.connector]
base_url = %[3]q
api_key_env = "AGENTGW_SEC_CONNECTOR_KEY"

[[agents]]
jid = "secoan@%[1]s"
[agents.oan]
base_url = %[5]q
api_key_file = "oan.key"
owner = "alice@%[6]s"

[metrics]
listen = %[4]q

[console]
listen = %[7]q
token_env = "AGENTGW_SEC_CONSOLE_TOKEN"
login_server = %[8]q
login_ca_file = %[9]q
`, srv.ComponentDomain, mcpURL, connURL, metricsAddr, oanSrv.URL, srv.Domain, consoleAddr, srv.C2SAddr, srv.CAFile)})
	// The gateway reaches Prosody through the recording proxy.
	cfgText, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	good := strings.Replace(string(cfgText), fmt.Sprintf("server = %q", srv.ComponentAddr), fmt.Sprintf("server = %q", wireAddr), 1)
	if good == string(cfgText) {
		t.Fatal("the config has no server line to point at the proxy")
	}
	if err := os.WriteFile(e.ConfigPath, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongCfg := filepath.Join(e.Dir, "wrong.toml")
	if err := os.WriteFile(filepath.Join(e.Dir, "wrong.secret"), []byte(wrong+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrongCfg, []byte(strings.Replace(good, `secret_file = "component.secret"`, `secret_file = "wrong.secret"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}

	// Before serving: doctor with both secrets, and serve with the wrong
	// one (refused by Prosody: exit 3, no restart).
	out, code := e2e.SecRun(t, e.Dir, nil, "doctor", "--config", wrongCfg, "--verbose")
	rec.Add(e2e.PlDoctorWrong, []byte(out))
	if code != 1 || !regexp.MustCompile(`(?m)^FAIL`).MatchString(out) {
		t.Errorf("doctor with the wrong secret exited %d:\n%s", code, out)
	}
	out, code = e2e.SecRun(t, e.Dir, nil, "serve", "--config", wrongCfg)
	rec.Add(e2e.PlServeWrong, []byte(out))
	if code != 3 {
		t.Errorf("serve with the wrong secret exited %d, want 3:\n%s", code, out)
	}
	// The connector is signed in before serving, so that doctor finds
	// every backend healthy; the gateway picks up the binding at start.
	for _, args := range [][]string{
		{"connector", "flows", "--config", e.ConfigPath, e.Endpoint("im").String()},
		{"connector", "auth", "--config", e.ConfigPath, "--flow", "token_form", "--field", "account=alice", "--field-env", "token=AGENTGW_SEC_FORM", e.Endpoint("im").String()},
	} {
		out, code := e2e.SecRun(t, e.Dir, nil, args...)
		rec.Add(e2e.PlCLIConnector, []byte(out))
		if code != 0 {
			t.Fatalf("agentgw %s exited %d:\n%s", strings.Join(args[:2], " "), code, out)
		}
	}
	// The OAN agent is paired before serving; the key comes from the
	// server, so it joins the audited secrets once it is known.
	oanCode, err := oanSrv.PairingCode()
	if err != nil {
		t.Fatal(err)
	}
	out, code = e2e.SecRun(t, e.Dir, nil, "oan", "pair", "--config", e.ConfigPath, "--code", oanCode, e.Endpoint("secoan").String())
	rec.Add(e2e.PlCLIOAN, []byte(out))
	if code != 0 {
		t.Fatalf("agentgw oan pair exited %d:\n%s", code, out)
	}
	oanKeyBytes, err := os.ReadFile(filepath.Join(e.Dir, "oan.key"))
	if err != nil {
		t.Fatal(err)
	}
	oanKey := strings.TrimSpace(string(oanKeyBytes))
	secrets = append(secrets, struct{ name, value string }{"OAN API key", oanKey})
	out, code = e2e.SecRun(t, e.Dir, nil, "doctor", "--config", e.ConfigPath, "--verbose")
	rec.Add(e2e.PlDoctor, []byte(out))
	if code != 0 {
		t.Errorf("doctor exited %d:\n%s", code, out)
	}
	gw := e.Serve("gw")

	// The caller, with every stanza recorded.
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
	mcpEP, imEP := e.Endpoint("secmcp"), e.Endpoint("im")
	e2e.WaitPinned(t, ctx, c, mcpEP, "leak_header")
	e2e.WaitPinned(t, ctx, c, imEP, "leak_key")
	taskIDs := secCallerFlows(t, ctx, c, e, mcpEP, imEP)
	secOANFlows(t, ctx, c, e.Endpoint("secoan"), oanSrv, rec)

	// The CLI caller and the MCP front log in with the password.
	login := []string{"--jid", "alice@" + srv.Domain, "--password-env", "AGENTGW_SEC_PASSWORD", "--server", srv.C2SAddr, "--insecure-skip-verify", "--gateway", srv.ComponentDomain, "-v"}
	for _, args := range [][]string{
		{"agents"},
		{"tools", mcpEP.String()},
		{"tools", imEP.String()},
		{"call", mcpEP.String(), "echo", "--args", `{"message":"from the cli"}`},
		{"call", mcpEP.String(), "ask", "--answer", `{"color":"teal"}`},
		{"call", "--json", mcpEP.String(), "leak_header"},
		{"call", "--json", imEP.String(), "leak_key"},
		{"call", "--json", e.Endpoint("secoan").String(), "list_gofers"},
		{"task state", imEP.String(), taskIDs[0]},
		{"task result", imEP.String(), taskIDs[0]},
	} {
		full := append(append(strings.Fields(args[0]), login...), args[1:]...)
		out, code := e2e.SecRun(t, e.Dir, nil, full...)
		rec.Add(e2e.PlCLICaller, []byte(out))
		if code != 0 {
			t.Errorf("agentgw %v exited %d:\n%s", args, code, out)
		}
	}
	secFront(t, ctx, e.Dir, login, rec)
	// The console: a login by token, one refused by XMPP password (alice
	// is no operator), every page; the session cookie joins the secrets.
	secrets = append(secrets, struct{ name, value string }{"console session", secConsole(t, consoleAddr, consoleToken, "alice@"+srv.Domain, password, mcpEP.String(), rec)})

	// Snapshots of the store while serving and after a clean stop.
	scrape := func() {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		rec.Add(e2e.PlMetrics, b)
	}
	scrape()
	snap := func() {
		for place, f := range map[string]string{e2e.PlDB: "agentgw.db", e2e.PlWAL: "agentgw.db-wal", e2e.PlSHM: "agentgw.db-shm"} {
			if b, err := os.ReadFile(filepath.Join(e.Dir, f)); err == nil {
				rec.Add(place, b)
			}
		}
	}
	snap()
	gw.Stop()
	snap()
	connSrv.Close()
	filed := make(chan struct{})
	go func() { rec.Open.Wait(); close(filed) }()
	select {
	case <-filed:
	case <-time.After(10 * time.Second):
		t.Error("connector data planes still open 10 s after the gateway stopped")
	}
	rec.Add(e2e.PlGatewayLog, []byte(gw.Log()))
	if b, err := os.ReadFile(srv.LogPath()); err == nil {
		rec.Add(e2e.PlProsodyLog, b)
	} else {
		t.Error(err)
	}
	if n := mcpRejected(); n != 0 {
		t.Errorf("the MCP server refused %d requests without the header", n)
	}

	// The component secret crossed the wire only as the handshake digest.
	hs := handshakes()
	okDigest := 0
	for _, h := range hs {
		sum := sha1.Sum([]byte(h.streamID + comp))
		if h.digest == hex.EncodeToString(sum[:]) {
			okDigest++
		}
	}
	t.Logf("component connections through the proxy: %d; handshakes with the right secret's digest: %d", len(hs), okDigest)
	if okDigest < 2 { // doctor and serve
		t.Errorf("%d handshakes carry sha1(stream id + secret), want at least 2 (doctor, serve): is the wire recorded?", okDigest)
	}

	// Each place recorded what it should have: a zero count is evidence
	// only if the place saw the flows.
	for place, marker := range map[string]string{
		e2e.PlGatewayLog:     "component: connected",
		e2e.PlServeWrong:     "not-authorized",
		e2e.PlDoctor:         "ok   xmpp handshake",
		e2e.PlCLIConnector:   "authenticated",
		e2e.PlCLICaller:      "from the cli",
		e2e.PlFrontTraffic:   "from the front",
		e2e.PlStanzasIn:      "[redacted]", // the leaking tools' results, scrubbed
		e2e.PlStanzasOut:     "hello mcp",
		e2e.PlProsodyLog:     "Received[c2s]",
		e2e.PlComponentWire:  "hello connector",
		e2e.PlDB + e2e.PlWAL: "hello connector",
		e2e.PlMCPReq:         "hello mcp",
		e2e.PlConnWSOut:      "hello connector",
		e2e.PlCLIOAN:         "paired",
		e2e.PlOANRequests:    "hello oan",
		e2e.PlOANStorage:     "storage requests: 1",
		plConsole:            "Federation grants",
	} {
		text := rec.Text(place)
		if place == e2e.PlDB+e2e.PlWAL {
			text = rec.Text(e2e.PlDB) + rec.Text(e2e.PlWAL)
		}
		if !strings.Contains(text, marker) {
			t.Errorf("%s: does not contain %q; the recording misses the flows", place, marker)
		}
	}

	// Where a secret may legitimately be; everywhere else it must not.
	allowed := map[string]map[string]bool{
		e2e.PlMCPAuth:       {"MCP header": true},
		e2e.PlMCPLeak:       {"MCP header": true},
		e2e.PlConnAuth:      {"connector API key": true},
		e2e.PlConnAuthStart: {"connector form": true},
		e2e.PlConnLeak:      {"connector API key": true},
	}
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "| place | bytes |")
	for _, s := range secrets {
		fmt.Fprintf(&tbl, " %s |", s.name)
	}
	tbl.WriteString("\n|---|---|" + strings.Repeat("---|", len(secrets)) + "\n")
	for _, place := range secPlaceOrder {
		text := rec.Text(place)
		fmt.Fprintf(&tbl, "| %s | %d |", place, len(text))
		for _, s := range secrets {
			n := strings.Count(text, s.value)
			mark := ""
			switch {
			case allowed[place][s.name] && n == 0:
				t.Errorf("%s: %s never seen: the recording misses it", place, s.name)
				mark = " (want >0)"
			case allowed[place][s.name]:
				mark = " (by design)"
			case n > 0:
				t.Errorf("%s: %s appears %d times", place, s.name, n)
				mark = " LEAK"
			}
			fmt.Fprintf(&tbl, " %d%s |", n, mark)
		}
		tbl.WriteString("\n")
		if len(text) == 0 {
			t.Errorf("%s: nothing recorded", place)
		}
	}
	t.Logf("secret occurrences (place × secret):\n%s", tbl.String())
	if t.Failed() {
		t.Logf("gateway log tail:\n%s", e2e.Tail(gw.Log(), 3000))
	}
}

// secOANFlows drives the OAN agent: a Gofer, a chat, a Gofer question,
// a match request decided, and a fetch from the signed-URL storage host
// (which must never see an Authorization header); then it files the OAN
// server's view.
func secOANFlows(t *testing.T, ctx context.Context, c *agentclient.Client, ep jid.JID, srv *oantest.Server, rec *e2e.SecRecorder) {
	t.Helper()
	e2e.WaitPinned(t, ctx, c, ep, "chat")
	testkit.WaitFor(t, 30*time.Second, "the OAN stream", func() bool {
		res, err := c.Call(ctx, ep, "list_gofers", json.RawMessage(`{}`), agentclient.CallOptions{})
		return err == nil && res.State == "completed"
	})
	for _, call := range []struct{ tool, args string }{
		{"create_gofer", `{}`},
		{"chat", `{"message":"hello oan"}`},
		{"chat", `{"message":"ask:enum"}`},
	} {
		res, err := c.Call(ctx, ep, call.tool, json.RawMessage(call.args), agentclient.CallOptions{
			OnInput: func(context.Context, agentclient.InputRequest) (json.RawMessage, error) {
				return json.RawMessage(`{"answer":"red"}`), nil
			}})
		if err != nil || res.State != "completed" {
			t.Fatalf("OAN %s: %v %+v", call.tool, err, res)
		}
	}
	// The storage host is fetched the way the bridge fetches signed URLs.
	srv.Mode(map[string]any{"redirect": srv.StorageURL + "/steal"})
	res, err := c.Call(ctx, ep, "list_gofers", json.RawMessage(`{}`), agentclient.CallOptions{})
	srv.Mode(map[string]any{"redirect": ""})
	if err != nil || res.State != "failed" {
		t.Fatalf("list_gofers answered with a 307: %v %+v", err, res)
	}
	if data, err := oanbridge.FetchSigned(ctx, srv.StorageURL+"/blob/a?sig=1"); err != nil || string(data) != "blob" {
		t.Fatalf("signed fetch: %v", err)
	}
	l, err := srv.Log()
	if err != nil {
		t.Fatal(err)
	}
	rec.Add(e2e.PlOANStorage, []byte(fmt.Sprintf("storage requests: %d, with Authorization: %d", l.StorageHits, l.StorageAuthSeen)))
	if l.StorageAuthSeen != 0 || l.StorageHits != 1 {
		t.Errorf("the storage host saw %d requests, %d with Authorization (want 1, 0: the 307 is not followed)", l.StorageHits, l.StorageAuthSeen)
	}
	for _, r := range l.Requests {
		rec.Add(e2e.PlOANRequests, []byte(r.Method+" "+r.Path+" "+string(r.Body)+"\n"))
	}
}

// secCallerFlows drives discovery, calls with progress and input, a
// cancel, a replay and the task queries; it returns the connector tasks.
func secCallerFlows(t *testing.T, ctx context.Context, c *agentclient.Client, e *e2e.Env, mcpEP, imEP jid.JID) []string {
	t.Helper()
	gwJID := e.GatewayJID()
	if _, err := c.Info(ctx, gwJID, ""); err != nil {
		t.Fatal(err)
	}
	items, err := c.AllItems(ctx, gwJID, ns.Directory, 2)
	if err != nil || len(items) != 4 { // static, secmcp, im, secoan
		t.Fatalf("directory: %v %v", items, err)
	}
	if _, err := c.SearchPage(ctx, gwJID, "sec", 10, ""); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		ep := e2e.MustJID(it.JID)
		ei, err := c.Endpoint(ctx, ep)
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.GetManifest(ctx, ep, "")
		if err != nil || m.Hash != ei.ManifestHash {
			t.Fatalf("manifest of %s: %v", ep, err)
		}
		if _, err := c.ToolItems(ctx, ep, m.Version); err != nil {
			t.Fatal(err)
		}
		for _, tl := range m.Doc.Tools {
			if _, err := c.GetSchema(ctx, ep, tl.Name, m.Version, "input", m.Hash); err != nil {
				t.Fatalf("schema %s %s: %v", ep, tl.Name, err)
			}
		}
	}
	var connTasks []string
	call := func(ep jid.JID, tool, args, want string, opts agentclient.CallOptions) *agentclient.Outcome {
		t.Helper()
		opts.RecoverAfter = 2 * time.Second
		out, err := c.Call(ctx, ep, tool, json.RawMessage(args), opts)
		if err != nil || string(out.State) != want {
			t.Fatalf("%s %s: %v %+v", ep, tool, err, out)
		}
		if ep.Equal(imEP) {
			connTasks = append(connTasks, out.Accepted.TaskID)
		}
		return out
	}
	call(imEP, "echo", `{"text":"hello connector"}`, "completed", agentclient.CallOptions{})
	call(imEP, "slow_count", `{"steps":3,"delay_ms":30}`, "completed", agentclient.CallOptions{})
	call(imEP, "always_fail", `{}`, "failed", agentclient.CallOptions{})
	call(imEP, "leak_key", `{}`, "completed", agentclient.CallOptions{})
	call(mcpEP, "echo", `{"message":"hello mcp"}`, "completed", agentclient.CallOptions{})
	progress := 0
	call(mcpEP, "count", `{}`, "completed", agentclient.CallOptions{OnProgress: func(agentclient.Progress) { progress++ }})
	if progress == 0 {
		t.Error("no progress from count")
	}
	out := call(mcpEP, "ask", `{}`, "completed", agentclient.CallOptions{OnInput: func(context.Context, agentclient.InputRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"color":"teal"}`), nil
	}})
	if !strings.Contains(string(out.Payload), "teal") {
		t.Errorf("ask: %s", out.Payload)
	}
	out = call(mcpEP, "leak_header", `{}`, "completed", agentclient.CallOptions{})
	if !strings.Contains(string(out.Payload), "seen:") {
		t.Errorf("leak_header: %s", out.Payload)
	}

	// Cancel a sleeping MCP call, and replay a connector invoke.
	p, err := c.Pin(ctx, mcpEP, "sleep")
	if err != nil {
		t.Fatal(err)
	}
	acc, err := c.Invoke(ctx, mcpEP, &agentclient.InvokeRequest{Tool: "sleep", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	reason := "audit"
	testkit.WaitFor(t, 20*time.Second, "sleep running and cancelled", func() bool {
		st, err := c.State(ctx, mcpEP, acc.TaskID)
		if err != nil || st.State != "running" {
			return false
		}
		_, err = c.Cancel(ctx, mcpEP, acc.TaskID, st.Revision, &reason)
		return err == nil
	})
	if out, err := c.Follow(ctx, mcpEP, acc, agentclient.CallOptions{RecoverAfter: 2 * time.Second}); err != nil || out.State != "cancelled" {
		t.Fatalf("cancel: %v %+v", err, out)
	}
	p, err = c.Pin(ctx, imEP, "echo")
	if err != nil {
		t.Fatal(err)
	}
	req := agentclient.InvokeRequest{Tool: "echo", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{"text":"replayed"}`)}
	a1, err := c.Invoke(ctx, imEP, &req)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := c.Invoke(ctx, imEP, &req)
	if err != nil || a2.TaskID != a1.TaskID {
		t.Fatalf("replay: %v %+v %+v", err, a2, a1)
	}
	if _, err := c.Follow(ctx, imEP, a1, agentclient.CallOptions{RecoverAfter: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(connTasks, a1.TaskID) {
		if _, err := c.State(ctx, imEP, id); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Result(ctx, imEP, id); err != nil {
			t.Fatal(err)
		}
	}
	return connTasks
}

// secFront drives `agentgw mcp` over stdio with the go-sdk client,
// recording the JSON-RPC traffic and the front's stderr.
func secFront(t *testing.T, ctx context.Context, dir string, login []string, rec *e2e.SecRecorder) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(e2e.Binary(t), append([]string{"mcp"}, login...)...)
	cmd.Dir, cmd.Stderr = dir, &stderr
	var traffic bytes.Buffer
	client := mcp.NewClient(&mcp.Implementation{Name: "secrets-audit", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.LoggingTransport{Transport: &mcp.CommandTransport{Command: cmd}, Writer: &secSyncWriter{b: &traffic}}, nil)
	if err != nil {
		t.Fatalf("mcp front: %v\n%s", err, stderr.String())
	}
	var names []string
	testkit.WaitFor(t, 30*time.Second, "the front's tools", func() bool {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			return false
		}
		names = names[:0]
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		return strings.Contains(strings.Join(names, ","), "leak_key") && strings.Contains(strings.Join(names, ","), "leak_header")
	})
	sort.Strings(names)
	for _, call := range []struct {
		suffix string
		args   map[string]any
	}{{"secmcp.echo", map[string]any{"message": "from the front"}}, {"secmcp.leak_header", map[string]any{}}, {"im.leak_key", map[string]any{}}} {
		name := ""
		for _, n := range names {
			if strings.HasSuffix(n, call.suffix) {
				name = n
			}
		}
		if name == "" {
			t.Errorf("front lists no %s tool: %v", call.suffix, names)
			continue
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: call.args}); err != nil {
			t.Errorf("front %s: %v", name, err)
		}
	}
	cs.Close()
	rec.Add(e2e.PlFrontTraffic, traffic.Bytes())
	rec.Add(e2e.PlFrontStderr, stderr.Bytes())
}

type secSyncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *secSyncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// secHandshake is one component connection's stream id and handshake.
type secHandshake struct{ streamID, digest string }

// secComponentTap proxies the component port, recording both directions
// of every connection; it returns the proxy address and a function that
// extracts each connection's stream id and handshake digest.
func secComponentTap(t *testing.T, target string, rec *e2e.SecRecorder) (string, func() []secHandshake) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	type pair struct{ up, down *bytes.Buffer }
	var conns []pair
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p := pair{&bytes.Buffer{}, &bytes.Buffer{}}
			mu.Lock()
			conns = append(conns, p)
			mu.Unlock()
			cp := func(dst, src net.Conn, buf *bytes.Buffer) {
				b := make([]byte, 32<<10)
				for {
					n, err := src.Read(b)
					if n > 0 {
						mu.Lock()
						buf.Write(b[:n])
						mu.Unlock()
						if _, werr := dst.Write(b[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				dst.Close()
				src.Close()
			}
			go cp(s, c, p.up)
			go cp(c, s, p.down)
		}
	}()
	idRe := regexp.MustCompile(`<stream:stream[^>]*\sid=['"]([^'"]+)['"]`)
	hsRe := regexp.MustCompile(`<handshake[^>]*>([0-9a-fA-F]{40})</handshake>`)
	return ln.Addr().String(), func() []secHandshake {
		mu.Lock()
		defer mu.Unlock()
		var out []secHandshake
		for _, p := range conns {
			rec.Add(e2e.PlComponentWire, p.up.Bytes())
			rec.Add(e2e.PlComponentWire, p.down.Bytes())
			id, hs := idRe.FindSubmatch(p.down.Bytes()), hsRe.FindSubmatch(p.up.Bytes())
			if id != nil && hs != nil {
				out = append(out, secHandshake{string(id[1]), strings.ToLower(string(hs[1]))})
			}
		}
		return out
	}
}

// secHeaders records a request's headers: Authorization to one place, the
// rest to another.
func secHeaders(r *http.Request, rec *e2e.SecRecorder, authPlace, otherPlace string) {
	rec.Add(authPlace, []byte(r.Header.Get("Authorization")))
	var b strings.Builder
	for k, vs := range r.Header {
		if k != "Authorization" {
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ", "))
		}
	}
	fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL)
	rec.Add(otherPlace, []byte(b.String()))
}

// secMCPServer runs a go-sdk streamable HTTP MCP server that requires
// Authorization: Bearer token and records headers and bodies. Its tools:
// echo, count (progress), ask (input), sleep (until cancelled) and
// leak_header, which returns the Authorization header it received.
func secMCPServer(t *testing.T, token string, rec *e2e.SecRecorder) (string, func() int) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "secmcp", Version: "1.0.0", Title: "Secrets audit"}, nil)
	type echoIn struct {
		Message string `json:"message"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes."}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Message}}}, nil, nil
	})
	obj := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&mcp.Tool{Name: "count", Description: "Counts to three.", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)}); err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "ask", Description: "Asks for a colour.", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["color"].(*mcp.ElicitResult); ok {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %v", r.Action, r.Content["color"])}}}, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"color": &mcp.ElicitParams{
			Message:         "Favourite colour?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string"}}, "required": []any{"color"}},
		}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "sleep", Description: "Sleeps until cancelled.", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(60 * time.Second):
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "leak_header", Description: "Returns the Authorization header it received.", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		h := ""
		if req.Extra != nil {
			h = req.Extra.Header.Get("Authorization")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "seen: " + h}}, StructuredContent: map[string]any{"authorization": h}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var mu sync.Mutex
	rejected := 0
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secHeaders(r, rec, e2e.PlMCPAuth, e2e.PlMCPHeaders)
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec.Add(e2e.PlMCPReq, body)
		if r.Header.Get("Authorization") != "Bearer "+token {
			mu.Lock()
			rejected++
			mu.Unlock()
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		place := e2e.PlMCPResp
		if bytes.Contains(body, []byte(`"leak_header"`)) && bytes.Contains(body, []byte(`"tools/call"`)) {
			place = e2e.PlMCPLeak
		}
		rw := &secRespWriter{ResponseWriter: w}
		h.ServeHTTP(rw, r)
		rec.Add(place, rw.body.Bytes())
	})
	addr := secServe(t, handler)
	return "http://" + addr + "/mcp", func() int { mu.Lock(); defer mu.Unlock(); return rejected }
}

// secRespWriter keeps a copy of the response body.
type secRespWriter struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (w *secRespWriter) Write(p []byte) (int, error) {
	w.body.Write(p)
	return w.ResponseWriter.Write(p)
}

func (w *secRespWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func secServe(t *testing.T, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// secConnector serves the reference connector behind a handler that
// records headers and HTTP bodies, and every WebSocket frame of the data
// plane (decoded and unmasked once the connection ends).
func secConnector(t *testing.T, apiKey, form string, rec *e2e.SecRecorder) (string, *connectortest.Server) {
	s, err := connectortest.New(connectortest.Options{APIKey: apiKey, FormToken: form})
	if err != nil {
		t.Fatal(err)
	}
	inner := s.Handler()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secHeaders(r, rec, e2e.PlConnAuth, e2e.PlConnHeaders)
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec.Add(e2e.PlConnHTTP, body)
		r.Header.Del("Sec-WebSocket-Extensions") // uncompressed frames
		rw := &secHijackWriter{secRespWriter: secRespWriter{ResponseWriter: w}, rec: rec}
		inner.ServeHTTP(rw, r)
		rec.Add(e2e.PlConnHTTP, rw.body.Bytes())
	})
	addr := secServe(t, h)
	t.Cleanup(s.Close)
	return "http://" + addr, s
}

// secHijackWriter records the raw bytes of a hijacked (WebSocket)
// connection and files its frames when it closes.
type secHijackWriter struct {
	secRespWriter
	rec *e2e.SecRecorder
}

func (w *secHijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("not a hijacker")
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	buffered, _ := brw.Reader.Peek(brw.Reader.Buffered())
	w.rec.Open.Add(1)
	rc := &secWSConn{Conn: c, in: io.MultiReader(bytes.NewReader(append([]byte(nil), buffered...)), c), rec: w.rec}
	return rc, bufio.NewReadWriter(bufio.NewReader(rc), bufio.NewWriter(rc)), nil
}

type secWSConn struct {
	net.Conn
	in       io.Reader
	rec      *e2e.SecRecorder
	mu       sync.Mutex
	got, put bytes.Buffer
	once     sync.Once
}

func (c *secWSConn) Read(p []byte) (int, error) {
	n, err := c.in.Read(p)
	c.mu.Lock()
	c.got.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *secWSConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.put.Write(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *secWSConn) Close() error {
	c.once.Do(func() {
		defer c.rec.Open.Done()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, m := range secWSMessages(c.got.Bytes()) {
			place := e2e.PlConnWSOut
			if secPacketType(m) == "auth.start" {
				place = e2e.PlConnAuthStart
			}
			c.rec.Add(place, m)
		}
		for _, m := range secWSMessages(c.put.Bytes()) {
			place := e2e.PlConnWSIn
			if secPacketType(m) == "tool.invoke.ack" && bytes.Contains(m, []byte(`"tool_id":"leak_key"`)) {
				place = e2e.PlConnLeak
			}
			c.rec.Add(place, m)
		}
	})
	return c.Conn.Close()
}

func secPacketType(m []byte) string {
	var p struct {
		Type string `json:"type"`
	}
	json.Unmarshal(m, &p)
	return p.Type
}

// secWSMessages decodes WebSocket frames (RFC 6455 §5.2), unmasking client
// frames and joining continuations; control frames are kept as messages of
// their own.
func secWSMessages(b []byte) [][]byte {
	var out [][]byte
	var cur []byte
	for len(b) >= 2 {
		fin, op := b[0]&0x80 != 0, b[0]&0x0f
		masked, n, i := b[1]&0x80 != 0, uint64(b[1]&0x7f), 2
		switch n {
		case 126:
			if len(b) < 4 {
				return out
			}
			n, i = uint64(binary.BigEndian.Uint16(b[2:4])), 4
		case 127:
			if len(b) < 10 {
				return out
			}
			n, i = binary.BigEndian.Uint64(b[2:10]), 10
		}
		var key []byte
		if masked {
			if len(b) < i+4 {
				return out
			}
			key, i = b[i:i+4], i+4
		}
		if uint64(len(b)-i) < n {
			return out
		}
		p := append([]byte(nil), b[i:i+int(n)]...)
		for j := range p {
			if masked {
				p[j] ^= key[j%4]
			}
		}
		b = b[i+int(n):]
		if op >= 8 {
			out = append(out, p)
			continue
		}
		cur = append(cur, p...)
		if fin {
			out = append(out, cur)
			cur = nil
		}
	}
	return out
}

// TestSecretsAuditHost extends the audit to `agentgw host`: the hosted
// account's XMPP password must appear nowhere but the login itself (SCRAM
// over TLS, so not even the Prosody debug log sees it): not in the host's
// debug log, its SQLite files, its own environment after the scrub, the MCP
// server's environment, the gateway's log or store, nor any stanza a
// caller receives.
func TestSecretsAuditHost(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	password := e2e.SecRandom("HostXmppPassword")
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{Debug: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := e2e.SelfRegEnv(t, e2e.Options{Server: srv, Users: []string{"alice"}})
	if err := srv.Register(ctx, "bot", password); err != nil {
		t.Fatal(err)
	}
	p := e2e.NewProc(t, filepath.Join(e.Dir, "host.log"))
	out, err := os.Create(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(e.Dir, "bot-host.db")
	cmd := exec.Command(e2e.Binary(t), "host", "--jid", e.JID("bot"), "--password-env", e2e.HostPasswordEnv,
		"--server", srv.C2SAddr, "--gateway", e.Domain, "--ca-file", srv.CAFile,
		"--store", store, "--log-level", "debug", "--mcp-command", e2e.EverythingCommand(t))
	cmd.Dir = e.Dir
	cmd.Env = append(os.Environ(), e2e.HostPasswordEnv+"="+password)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out.Close()
	p.Cmd = cmd
	p.Reap()
	t.Cleanup(p.Stop)
	p.WaitLog("host: registered at the gateway", 90*time.Second)

	rec := &e2e.SecRecorder{}
	const (
		plHostLog     = "host log (debug)"
		plHostEnv     = "host /proc/environ"
		plMCPEnv      = "MCP server /proc/environ"
		plHostDB      = "host SQLite files"
		plCallerOut   = "slixmpp caller: checks"
		plGatewayLogH = "gateway log (debug)"
		plGatewayDB   = "gateway SQLite files"
		plProsody     = "Prosody log (debug)"
	)
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	rec.Add(plHostEnv, env)
	kids := e2e.Descendants(cmd.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("the host runs no MCP server")
	}
	for _, k := range kids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", k)); err == nil {
			rec.Add(plMCPEnv, b)
		}
	}
	stdout, stderr, err := e2e.ExecSlixmpp(t, e, "selfreg.py", "alice", "--mode", "invoke", "--endpoint", e.JID("bot")+"/agent")
	if err != nil {
		t.Fatalf("selfreg.py: %v\n%s\n%s", err, stdout, stderr)
	}
	rec.Add(plCallerOut, stdout)
	p.Stop()
	e.StopGateway()
	rec.Add(plHostLog, []byte(p.Log()))
	rec.Add(plGatewayLogH, []byte(e.Log.String()))
	for _, f := range []string{store, store + "-wal", store + "-shm"} {
		if b, err := os.ReadFile(f); err == nil {
			rec.Add(plHostDB, b)
		}
	}
	for _, f := range []string{"agentgw.db", "agentgw.db-wal", "agentgw.db-shm"} {
		if b, err := os.ReadFile(filepath.Join(e.Dir, f)); err == nil {
			rec.Add(plGatewayDB, b)
		}
	}
	if b, err := os.ReadFile(srv.LogPath()); err == nil {
		rec.Add(plProsody, b)
	}
	for place, marker := range map[string]string{
		plHostLog: "host: connected", plCallerOut: `"check": "cancel"`, plHostDB: "hello from slixmpp",
		plGatewayLogH: "component: connected", plProsody: "bot@example.test/agent", plMCPEnv: "PATH=",
		plHostEnv: "PATH=", plGatewayDB: "bot@example.test",
	} {
		if !strings.Contains(rec.Text(place), marker) {
			t.Errorf("%s: does not contain %q; the recording misses the flows", place, marker)
		}
	}
	var tbl strings.Builder
	tbl.WriteString("| place | bytes | host XMPP password |\n|---|---|---|\n")
	for _, place := range []string{plHostLog, plHostEnv, plMCPEnv, plHostDB, plCallerOut, plGatewayLogH, plGatewayDB, plProsody} {
		text := rec.Text(place)
		n := strings.Count(text, password)
		fmt.Fprintf(&tbl, "| %s | %d | %d |\n", place, len(text), n)
		if n > 0 {
			t.Errorf("%s: the host's XMPP password appears %d times", place, n)
		}
	}
	t.Logf("host password occurrences:\n%s", tbl.String())
}
