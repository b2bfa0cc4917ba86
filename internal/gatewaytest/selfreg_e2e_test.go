package gatewaytest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// hostPasswordEnv carries the hosted account's password to `agentgw host`.
const hostPasswordEnv = "AGENTGW_HOST_TEST_PASSWORD"

// everythingCommand is server-everything's stdio command line (skips like
// EverythingTOML when node or the package is missing).
func everythingCommand(t testing.TB) string {
	t.Helper()
	toml := EverythingTOML(t, "x", "example.test")
	i := strings.Index(toml, "command = [")
	parts := strings.Split(strings.Trim(toml[i+len("command = ["):strings.Index(toml[i:], "]")+i], " "), ", ")
	for k := range parts {
		parts[k] = strings.Trim(parts[k], `"`)
	}
	return strings.Join(parts, " ")
}

// startHost runs `agentgw host` for user@server-domain backed by
// server-everything (--mcp-command, or with backendArgs the flags given),
// and waits until it logged waitFor.
func startHost(t testing.TB, e *Env, name, user string, waitFor string, backendArgs ...string) *Proc {
	t.Helper()
	if len(backendArgs) == 0 {
		backendArgs = []string{"--mcp-command", everythingCommand(t)}
	}
	p := &Proc{t: t, LogPath: filepath.Join(e.Dir, name+".log"), exited: make(chan struct{})}
	out, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Binary(t), "host", "--jid", e.JID(user), "--password-env", hostPasswordEnv,
		"--server", e.Server.C2SAddr, "--gateway", e.Domain, "--ca-file", e.Server.CAFile,
		"--store", filepath.Join(e.Dir, user+"-host.db"), "--log-level", "debug")
	cmd.Args = append(cmd.Args, backendArgs...)
	cmd.Dir = e.Dir
	cmd.Env = append(os.Environ(), hostPasswordEnv+"="+Password+user)
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
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() { p.Stop() })
	p.WaitLog(waitFor, 90*time.Second)
	return p
}

func selfRegEnv(t testing.TB, o Options) *Env {
	o.Mutate = func(c *config.Config) { c.XMPP.SelfRegisterDomains = c.XMPP.LocalDomains }
	return Start(t, o)
}

// TestHostSelfRegistersAndServes runs `agentgw host` backed by
// server-everything against a real Prosody and a gateway that offers Self
// Registration, with slixmpp as every caller.
func TestHostSelfRegistersAndServes(t *testing.T) {
	needSlixmpp(t)
	e := selfRegEnv(t, Options{Users: []string{"alice", "bot", "mallory"}, Agents: []Agent{{Localpart: "weather"}}})
	bot := e.JID("bot")
	virtual := e.Endpoint("weather").String()
	full := bot + "/agent"
	host := startHost(t, e, "host", "bot", "host: registered at the gateway")

	// Listed beside the virtual endpoints, once the gateway saw it online.
	runSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", bot, "--wait", "60")
	runSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", virtual)

	// Invoked directly at its full JID: echo, progress, elicitation,
	// cancel; then task-state from a new session (a reconnected caller).
	checks := runSlixmpp(t, e, "selfreg.py", "alice", "--mode", "invoke", "--endpoint", full)
	requireChecks(t, checks, "pin", "echo", "progress", "elicitation", "cancel", "deadline")
	var cancelled string
	for _, c := range checks {
		if c["check"] == "cancel" {
			cancelled, _ = c["cancelled_task"].(string)
		}
	}
	requireChecks(t, runSlixmpp(t, e, "selfreg.py", "alice", "--mode", "state", "--endpoint", full, "--task-id", cancelled), "reconnect-state")

	// Another account cannot register or activate bot@…
	checks = runSlixmpp(t, e, "selfreg.py", "mallory", "--mode", "hijack", "--target", bot)
	requireChecks(t, checks, "hijack-register", "hijack-activate")
	if checks[0]["self_register"] != true {
		t.Errorf("a local account is not offered #self-register: %v", checks[0])
	}
	if m, ok := e.Gateway.Registry.Active(bot); !ok || m.Agent.Name == "evil" {
		t.Fatalf("bot's registration changed after the hijack attempt: %v %v", m, ok)
	}

	// kill -9 mid-task: after the restart the task settles
	// agentgw:interrupted, and replaying its request-id returns it.
	checks = runSlixmpp(t, e, "selfreg.py", "alice", "--mode", "start", "--endpoint", full)
	requireChecks(t, checks, "start")
	var taskID, requestID string
	for _, c := range checks {
		if c["check"] == "start" {
			taskID, requestID = c["task_id"].(string), c["request_id"].(string)
		}
	}
	host.Kill()
	// The restart describes the same backend with a host file instead.
	cmdline := strings.Fields(everythingCommand(t))
	hostFile := filepath.Join(e.Dir, "host.toml")
	if err := os.WriteFile(hostFile, []byte(fmt.Sprintf("[mcp]\ncommand = [%q, %q, %q]\n[tasks]\ndefault_timeout_seconds = 600\n", cmdline[0], cmdline[1], cmdline[2])), 0o600); err != nil {
		t.Fatal(err)
	}
	host = startHost(t, e, "host-2", "bot", "host: registered at the gateway", "--config", hostFile)
	requireChecks(t, runSlixmpp(t, e, "selfreg.py", "alice", "--mode", "recover", "--endpoint", full,
		"--task-id", taskID, "--request-id", requestID), "interrupted", "replay")

	// Offline: the directory stops listing it within seconds.
	host.Stop()
	runSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", bot, "--absent", "--wait", "5")
	runSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", virtual)

	// The operator lists and bans it; the ban survives a gateway restart
	// and refuses the host's next registration.
	out := e.Agentgw(0, "admin", "self-registered", "--config", e.ConfigPath)
	if !strings.Contains(out, bot) || !strings.Contains(out, "no") {
		t.Fatalf("admin self-registered:\n%s", out)
	}
	e.Agentgw(0, "admin", "ban", "--config", e.ConfigPath, "--reason", "test ban", bot)
	if out = e.Agentgw(0, "admin", "self-registered", "--config", e.ConfigPath); !strings.Contains(out, "yes: test ban") || !strings.Contains(out, "(none)") {
		t.Fatalf("admin self-registered after the ban:\n%s", out)
	}
	e.StopGateway()
	e.StartGateway()
	startHost(t, e, "host-3", "bot", "host: the gateway refused the self-registration")
	if _, ok := e.Gateway.Registry.Active(bot); ok {
		t.Fatal("a banned endpoint is active again")
	}
	runSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", bot, "--absent")
	e.Agentgw(0, "admin", "unban", "--config", e.ConfigPath, bot)
}

// TestSelfRegistrationRemoteDomainRefused: a remote account (over s2s) may
// not self-register even its own JID, not even with trust grants, and is
// not offered the feature.
func TestSelfRegistrationRemoteDomainRefused(t *testing.T) {
	needSlixmpp(t)
	a, b := xmppharness.StartFederation(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := a.Register(ctx, "mallory", Password+"mallory"); err != nil {
		t.Fatal(err)
	}
	e := selfRegEnv(t, Options{Server: b, Agents: []Agent{{Localpart: "weather"}}})
	e.Agentgw(0, "trust", "grant", "--config", e.ConfigPath, "--visibility", "--invocation", a.Domain)
	own := "mallory@" + a.Domain
	// The gateway applies grants on its next poll: wait for it rather than
	// a fixed second that a loaded machine can miss.
	testkit.WaitFor(t, testkit.MinWait, "the grant applied", func() bool {
		return e.Gateway.Grants.Granted(own, e.Endpoint("weather").String(), federation.ScopeVisibility|federation.ScopeInvocation)
	})
	cmd := exec.CommandContext(ctx, systemPython, slixmppScript(t, "selfreg.py"),
		"--jid", own, "--password", Password+"mallory",
		"--server", a.C2SAddr, "--gateway", e.Domain, "--ca", a.CAFile,
		"--mode", "hijack", "--target", own)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("selfreg.py: %v\n%s\n%s", err, out, errb.String())
	}
	if !strings.Contains(string(out), `"self_register": false`) || !strings.Contains(string(out), `"check": "hijack-register"`) {
		t.Fatalf("remote account: %s", out)
	}
	if e.Gateway.Registry.Exists(own) {
		t.Fatal("a remote account's manifest was stored")
	}
}
