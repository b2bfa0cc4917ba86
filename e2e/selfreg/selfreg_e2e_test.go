package selfreg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// TestHostSelfRegistersAndServes runs `agentgw host` backed by
// server-everything against a real Prosody and a gateway that offers Self
// Registration, with slixmpp as every caller.
func TestHostSelfRegistersAndServes(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	e := e2e.SelfRegEnv(t, e2e.Options{Users: []string{"alice", "bot", "mallory"}, Agents: []e2e.Agent{{Localpart: "weather"}}})
	bot := e.JID("bot")
	virtual := e.Endpoint("weather").String()
	full := bot + "/agent"
	host := e2e.StartHost(t, e, "host", "bot", "host: registered at the gateway")

	// Listed beside the virtual endpoints, once the gateway saw it online.
	e2e.RunSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", bot, "--wait", "60")
	e2e.RunSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", virtual)

	// Invoked directly at its full JID: echo, progress, elicitation,
	// cancel; then task-state from a new session (a reconnected caller).
	checks := e2e.RunSlixmpp(t, e, "selfreg.py", "alice", "--mode", "invoke", "--endpoint", full)
	e2e.RequireChecks(t, checks, "pin", "echo", "progress", "elicitation", "cancel", "deadline")
	var cancelled string
	for _, c := range checks {
		if c["check"] == "cancel" {
			cancelled, _ = c["cancelled_task"].(string)
		}
	}
	e2e.RequireChecks(t, e2e.RunSlixmpp(t, e, "selfreg.py", "alice", "--mode", "state", "--endpoint", full, "--task-id", cancelled), "reconnect-state")

	// Another account cannot register or activate bot@…
	checks = e2e.RunSlixmpp(t, e, "selfreg.py", "mallory", "--mode", "hijack", "--target", bot)
	e2e.RequireChecks(t, checks, "hijack-register", "hijack-activate")
	if checks[0]["self_register"] != true {
		t.Errorf("a local account is not offered #self-register: %v", checks[0])
	}
	if m, ok := e.Gateway.Registry.Active(bot); !ok || m.Agent.Name == "evil" {
		t.Fatalf("bot's registration changed after the hijack attempt: %v %v", m, ok)
	}

	// kill -9 mid-task: after the restart the task settles
	// agentgw:interrupted, and replaying its request-id returns it.
	checks = e2e.RunSlixmpp(t, e, "selfreg.py", "alice", "--mode", "start", "--endpoint", full)
	e2e.RequireChecks(t, checks, "start")
	var taskID, requestID string
	for _, c := range checks {
		if c["check"] == "start" {
			taskID, requestID = c["task_id"].(string), c["request_id"].(string)
		}
	}
	host.Kill()
	// The restart describes the same backend with a host file instead.
	cmdline := strings.Fields(e2e.EverythingCommand(t))
	hostFile := filepath.Join(e.Dir, "host.toml")
	if err := os.WriteFile(hostFile, []byte(fmt.Sprintf("[mcp]\ncommand = [%q, %q, %q]\n[tasks]\ndefault_timeout_seconds = 600\n", cmdline[0], cmdline[1], cmdline[2])), 0o600); err != nil {
		t.Fatal(err)
	}
	host = e2e.StartHost(t, e, "host-2", "bot", "host: registered at the gateway", "--config", hostFile)
	e2e.RequireChecks(t, e2e.RunSlixmpp(t, e, "selfreg.py", "alice", "--mode", "recover", "--endpoint", full,
		"--task-id", taskID, "--request-id", requestID), "interrupted", "replay")

	// Offline: the directory stops listing it within seconds.
	host.Stop()
	e2e.RunSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", bot, "--absent", "--wait", "5")
	e2e.RunSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", virtual)

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
	e2e.StartHost(t, e, "host-3", "bot", "host: the gateway refused the self-registration")
	if _, ok := e.Gateway.Registry.Active(bot); ok {
		t.Fatal("a banned endpoint is active again")
	}
	e2e.RunSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", bot, "--absent")
	e.Agentgw(0, "admin", "unban", "--config", e.ConfigPath, bot)
}

// TestSelfRegistrationRemoteDomainRefused: a remote account (over s2s) may
// not self-register even its own JID, not even with trust grants, and is
// not offered the feature.
func TestSelfRegistrationRemoteDomainRefused(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	a, b := xmppharness.StartFederation(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := a.Register(ctx, "mallory", e2e.Password+"mallory"); err != nil {
		t.Fatal(err)
	}
	e := e2e.SelfRegEnv(t, e2e.Options{Server: b, Agents: []e2e.Agent{{Localpart: "weather"}}})
	e.Agentgw(0, "trust", "grant", "--config", e.ConfigPath, "--visibility", "--invocation", a.Domain)
	own := "mallory@" + a.Domain
	// The gateway applies grants on its next poll: wait for it rather than
	// a fixed second that a loaded machine can miss.
	testkit.WaitFor(t, testkit.MinWait, "the grant applied", func() bool {
		return e.Gateway.Grants.Granted(own, e.Endpoint("weather").String(), federation.ScopeVisibility|federation.ScopeInvocation)
	})
	cmd := exec.CommandContext(ctx, e2e.SystemPython, e2e.SlixmppScript(t, "selfreg.py"),
		"--jid", own, "--password", e2e.Password+"mallory",
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
