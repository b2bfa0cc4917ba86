// Command demo runs agentgw's main job on this machine and narrates it: a
// private Prosody, `agentgw serve` on its embedded SQLite store with three
// agents (server-everything over MCP, the reference xAgent connector, and
// a static manifest), then a scripted caller session with `agentgw agents`,
// `agentgw tools` and `agentgw call` showing discovery, live progress, an
// input prompt answered by the script, and results. It stops everything it
// started. `make demo` builds the binary and runs this.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/oanbridge/oantest"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

const (
	user         = "demo"
	password     = "demo-password"
	connectorKey = "demo-connector-key-0123"
	formToken    = "demo-form-token-4567"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "bin", "agentgw")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s is missing: run `make build` first", bin)
	}
	dir, err := os.MkdirTemp("", "agentgw-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	started := time.Now()

	step("Starting a private Prosody (example.test, component agents.example.test)")
	srv, err := xmppharness.LaunchProsody(ctx, xmppharness.ProsodyOptions{Dir: filepath.Join(dir, "prosody"), HTTPUpload: true})
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := srv.Register(ctx, user, password); err != nil {
		return err
	}
	say("  c2s %s, component port %s, user %s@%s", srv.C2SAddr, srv.ComponentAddr, user, srv.Domain)

	step("Starting the reference xAgent connector")
	conn, err := connectortest.Start(connectortest.Options{APIKey: connectorKey, FormToken: formToken})
	if err != nil {
		return err
	}
	defer conn.Close()
	say("  %s", conn.URL())

	step("Starting the reference OpenAgentNetwork server (Node, the real socket.io)")
	oan, err := oantest.Start()
	if err != nil {
		return err
	}
	defer oan.Close()
	say("  %s", oan.URL)

	cfgPath, err := writeConfig(dir, root, srv, conn.URL())
	if err != nil {
		return err
	}
	if err := appendOAN(cfgPath, oan.URL, user+"@"+srv.Domain); err != nil {
		return err
	}
	env := append(os.Environ(),
		"DEMO_COMPONENT_SECRET="+srv.ComponentSecret,
		"DEMO_CONNECTOR_KEY="+connectorKey,
		"DEMO_FORM_TOKEN="+formToken,
		"AGENTGW_PASSWORD="+password,
	)

	step("Starting agentgw serve (SQLite store %s)", filepath.Join(dir, "agentgw.db"))
	logFile, err := os.Create(filepath.Join(dir, "agentgw.log"))
	if err != nil {
		return err
	}
	serve := exec.Command(bin, "serve", "--config", cfgPath)
	serve.Env, serve.Stdout, serve.Stderr, serve.Dir = env, logFile, logFile, dir
	if err := serve.Start(); err != nil {
		return err
	}
	defer func() {
		serve.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { serve.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			serve.Process.Kill()
		}
	}()
	if err := waitReady(ctx, "http://127.0.0.1:"+metricsPort+"/readyz", 30*time.Second); err != nil {
		dumpTail(logFile.Name())
		return fmt.Errorf("agentgw did not become ready: %w", err)
	}
	say("  ready (component handshake done; /readyz on 127.0.0.1:%s)", metricsPort)
	say("  operator console: http://127.0.0.1:%s/  (log in as %s@%s, password %s)", consolePort, user, srv.Domain, password)

	caller := func(args ...string) []string {
		base := []string{"--jid", user + "@" + srv.Domain, "--server", srv.C2SAddr, "--ca-file", srv.CAFile, "--gateway", "agents.example.test"}
		return append(args[:1:1], append(base, args[1:]...)...)
	}
	sh := func(args ...string) error {
		fmt.Printf("\n$ agentgw %s\n", strings.Join(redactArgs(args), " "))
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = env, os.Stdout, os.Stdout, dir
		return cmd.Run()
	}

	step("The operator pairs the OpenAgentNetwork agent with its account (the key is written 0600, never printed)")
	oanCode, err := oan.PairingCode()
	if err != nil {
		return err
	}
	if err := sh("oan", "pair", "--config", cfgPath, "--code", oanCode, "gofers@agents.example.test"); err != nil {
		return err
	}

	step("The operator authenticates the connector's channel (form flow; the token comes from the environment)")
	if err := sh("connector", "auth", "--config", cfgPath, "--flow", "token_form", "--field", "account=demo", "--field-env", "token=DEMO_FORM_TOKEN", "im@agents.example.test"); err != nil {
		return err
	}

	step("Discovery: the agents this account can see")
	if err := waitFor(ctx, 60*time.Second, func() bool {
		probe := exec.Command(bin, append(caller("agents"), "--json")...)
		probe.Env = env
		out, _ := probe.CombinedOutput()
		if !strings.Contains(string(out), "everything@") {
			return false
		}
		// The connector's tools appear once the gateway has reopened the
		// channel that `connector auth` bound.
		tools := exec.Command(bin, append(caller("tools"), "--json", "im@agents.example.test")...)
		tools.Env = env
		out, _ = tools.CombinedOutput()
		return strings.Contains(string(out), `"name":"echo"`)
	}); err != nil {
		dumpTail(logFile.Name())
		return fmt.Errorf("the MCP and connector agents did not appear: %w", err)
	}
	if err := sh(caller("agents")...); err != nil {
		return err
	}
	if err := sh(caller("agents", "--search", "weather")...); err != nil {
		return err
	}

	step("Tools of two agents, from their hash-verified pinned manifests")
	if err := sh(caller("tools", "weather@agents.example.test")...); err != nil {
		return err
	}
	if err := sh(caller("tools", "im@agents.example.test")...); err != nil {
		return err
	}

	step("A call with live progress (MCP server-everything, trigger-long-running-operation)")
	if err := sh(caller("call", "everything@agents.example.test", "trigger-long-running-operation", "--args", `{"duration":3,"steps":6}`)...); err != nil {
		return err
	}

	step("A call that asks for input; the script answers the prompt")
	if err := sh(caller("call", "everything@agents.example.test", "trigger-elicitation-request", "--args", `{}`, "--answer", `{"name":"Demo User"}`)...); err != nil {
		return err
	}

	step("A call through the xAgent connector, and one that fails with a namespaced code")
	if err := sh(caller("call", "im@agents.example.test", "echo", "--args", `{"text":"hello from XMPP"}`)...); err != nil {
		return err
	}
	if err := sh(caller("call", "im@agents.example.test", "always_fail", "--args", `{}`)...); err == nil {
		return fmt.Errorf("always_fail succeeded")
	}

	if err := imConversation(ctx, srv, conn); err != nil {
		dumpTail(logFile.Name())
		return err
	}

	step("OpenAgentNetwork: create a Gofer and chat with it; its reply completes the call")
	if err := waitFor(ctx, 60*time.Second, func() bool {
		probe := exec.Command(bin, append(caller("tools"), "--json", "gofers@agents.example.test")...)
		probe.Env = env
		out, _ := probe.CombinedOutput()
		return strings.Contains(string(out), `"name":"escalations"`)
	}); err != nil {
		dumpTail(logFile.Name())
		return fmt.Errorf("the OAN agent did not appear: %w", err)
	}
	if err := sh(caller("call", "gofers@agents.example.test", "create_gofer", "--args", `{}`)...); err != nil {
		return err
	}
	if err := sh(caller("call", "gofers@agents.example.test", "chat", "--args", `{"message":"I am looking for a tennis partner"}`)...); err != nil {
		return err
	}
	step("OpenAgentNetwork: a Gofer question with enum constraints, answered")
	if err := sh(caller("call", "gofers@agents.example.test", "chat", "--args", `{"message":"ask:enum"}`, "--answer", `{"answer":"green"}`)...); err != nil {
		return err
	}
	step("OpenAgentNetwork: a counterpart asks to match; the owner accepts it through escalations (POSTed once)")
	gofers := exec.Command(bin, append(caller("call", "--json", "gofers@agents.example.test", "list_gofers"), "--args", `{}`)...)
	gofers.Env = env
	if out, err := gofers.CombinedOutput(); err == nil {
		if i := strings.Index(string(out), `"gofer_id":"`); i >= 0 {
			id := string(out)[i+len(`"gofer_id":"`):]
			if j := strings.IndexByte(id, '"'); j > 0 {
				oan.MatchRequest(id[:j], "Tennis Fan")
			}
		}
	}
	time.Sleep(500 * time.Millisecond)
	if err := sh(caller("call", "gofers@agents.example.test", "escalations", "--args", `{}`, "--answer", `{"decision":"accept"}`)...); err != nil {
		return err
	}

	if os.Getenv("DEMO_KEEP") != "" {
		step("Done in %s; the console stays at http://127.0.0.1:%s/ (log in as %s@%s, password %s) until Ctrl-C",
			time.Since(started).Round(100*time.Millisecond), consolePort, user, srv.Domain, password)
		<-ctx.Done()
	}
	step("Done in %s; stopping agentgw, the connector and Prosody", time.Since(started).Round(100*time.Millisecond))
	return nil
}

const metricsPort = "19464"

// consolePort is the operator web console's (docs/console.md).
const consolePort = "19480"

func writeConfig(dir, root string, srv *xmppharness.Server, connectorURL string) (string, error) {
	if err := os.WriteFile(filepath.Join(dir, "weather.json"), mustRead(filepath.Join(root, "deploy", "demo", "weather.json")), 0o644); err != nil {
		return "", err
	}
	entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	cfg := fmt.Sprintf(`[xmpp]
component_domain = "agents.example.test"
server = %q
secret_env = "DEMO_COMPONENT_SECRET"
local_domains = [%q]
admins = ["%s@%s"]
gateway_name = "agentgw demo"

[store]
path = "agentgw.db"

[metrics]
listen = "127.0.0.1:%s"

[console]
listen = "127.0.0.1:%s"
login_server = %q
login_ca_file = %q

[[agents]]
jid = "weather@agents.example.test"
manifest = "weather.json"

[[agents]]
jid = "everything@agents.example.test"
title = "Everything (MCP)"
[agents.mcp]
command = ["node", %q, "stdio"]

[[agents]]
jid = "im@agents.example.test"
[agents.connector]
base_url = %q
api_key_env = "DEMO_CONNECTOR_KEY"
inbox = "%s@%s"
`, srv.ComponentAddr, srv.Domain, user, srv.Domain, metricsPort, consolePort, srv.C2SAddr, srv.CAFile, entry, connectorURL, user, srv.Domain)
	path := filepath.Join(dir, "agentgw.toml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// appendOAN adds the OpenAgentNetwork agent, owned by the demo user.
func appendOAN(cfgPath, baseURL, owner string) error {
	f, err := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, `
[[agents]]
jid = "gofers@agents.example.test"
[agents.oan]
base_url = %q
api_key_file = "oan.key"
owner = %q
`, baseURL, owner)
	return err
}

func mustRead(p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		panic(err)
	}
	return b
}

func waitReady(ctx context.Context, url string, timeout time.Duration) error {
	return waitFor(ctx, timeout, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("timed out after %v", timeout)
}

func step(format string, a ...any) {
	fmt.Printf("\n== %s\n", fmt.Sprintf(format, a...))
}

func say(format string, a ...any) { fmt.Printf(format+"\n", a...) }

// redactArgs hides nothing secret (secrets travel in the environment) but
// keeps the transcript short.
func redactArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--ca-file", "--server":
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

func dumpTail(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > 40 {
			lines = lines[1:]
		}
	}
	fmt.Fprintln(os.Stderr, "--- last lines of the agentgw log:")
	for _, l := range lines {
		fmt.Fprintln(os.Stderr, l)
	}
}
