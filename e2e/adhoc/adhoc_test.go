package adhoc

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// checkNamed returns the first check line named name.
func checkNamed(t *testing.T, checks []map[string]any, name string) map[string]any {
	t.Helper()
	for _, c := range checks {
		if c["check"] == name {
			return c
		}
	}
	t.Fatalf("check %q was not reported", name)
	return nil
}

// TestAdhocSlixmpp runs server-everything's tools as XEP-0050 commands
// with slixmpp's xep_0050 client through a real Prosody: listing, echo and
// get-sum through forms, progress notes, an elicitation form stage,
// cancellation, a re-submitted stage, hostile forms; then bob tries
// alice's sessions; then the gateway restarts and alice's finished session
// is still there (its state is the task store's).
func TestAdhocSlixmpp(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	e2e.AccEverything(t)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Start(t, e2e.Options{Server: srv, Users: []string{"alice", "bob"}, TOML: e2e.EverythingTOML(t, "everything", srv.ComponentDomain)})
	ep := e.Endpoint("everything").String()
	c := e.Dial("alice")
	testkit.WaitFor(t, 90*time.Second, "everything's published manifest", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.GetManifest(ctx, e.Endpoint("everything"), "")
		return err == nil
	})

	checks := e2e.RunSlixmpp(t, e, "adhoc.py", "alice", "--endpoint", ep)
	e2e.RequireChecks(t, checks, "commands-feature", "list-commands", "echo", "resubmit", "get-sum", "hostile", "structured",
		"progress", "elicitation", "cancel", "cancel-before-start", "sessions")

	// The re-submitted echo stage ran once: one echo task in the store.
	var n int
	if err := e.Gateway.DB.Write.QueryRow(`SELECT COUNT(*) FROM tasks WHERE tool = 'echo' AND caller = ?`, e.JID("alice")).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d echo tasks for alice, want 1 (a re-submitted stage must not run twice)", n)
	}

	sess := checkNamed(t, checks, "sessions")
	var list []string
	for _, s := range sess["sessions"].([]any) {
		list = append(list, s.(string))
	}
	foreign := e2e.RunSlixmpp(t, e, "adhoc.py", "bob", "--mode", "foreign", "--endpoint", ep, "--sessions", strings.Join(list, ","))
	e2e.RequireChecks(t, foreign, "foreign-session")

	// After a restart the finished echo session answers from the task
	// store: bob still cannot tell it from a stale one, and alice's refresh
	// of it is checked by the foreign mode's counterpart below.
	e.StopGateway()
	e.StartGateway()
	testkit.WaitFor(t, 90*time.Second, "everything after the restart", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.GetManifest(ctx, e.Endpoint("everything"), "")
		return err == nil
	})
	echoSession := strings.Fields(list[0])[0]
	after := e2e.RunSlixmpp(t, e, "adhoc.py", "alice", "--mode", "resume", "--endpoint", ep, "--sessions", echoSession+" echo")
	e2e.RequireChecks(t, after, "resume")
}

// TestAdhocFederatedNoGrants: alice@a.test reaches agents.b.test over s2s
// without any grant. The commands node and command execution at an
// existing endpoint answer exactly like at a nonexistent one.
func TestAdhocFederatedNoGrants(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	a, b := xmppharness.StartFederation(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := a.Register(ctx, "alice", e2e.Password+"alice"); err != nil {
		t.Fatal(err)
	}
	e := e2e.Start(t, e2e.Options{Server: b, Agents: []e2e.Agent{{Localpart: "weather"}}})
	stdout, stderr, err := execSlixmppOn(t, a, e, "adhoc.py", "alice",
		"--mode", "remote", "--endpoint", e.Endpoint("weather").String(), "--missing", e.Endpoint("nobody").String())
	if err != nil {
		t.Fatalf("adhoc.py --mode remote: %v\n%s\n%s", err, stdout, stderr)
	}
	for _, c := range []string{"remote-commands", "remote-catalog"} {
		if !strings.Contains(string(stdout), `"check": "`+c+`"`) {
			t.Fatalf("%s not reported:\n%s", c, stdout)
		}
	}
	t.Logf("%s", stdout)
}

// execSlixmppOn runs a script as user of srv (one of a federated pair)
// against the gateway of e.
func execSlixmppOn(t *testing.T, srv *xmppharness.Server, e *e2e.Env, script, user string, args ...string) ([]byte, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	full := append([]string{e2e.SlixmppScript(t, script),
		"--jid", user + "@" + srv.Domain, "--password", e2e.Password + user,
		"--server", srv.C2SAddr, "--gateway", e.Domain, "--ca", srv.CAFile,
	}, args...)
	cmd := exec.CommandContext(ctx, e2e.SystemPython, full...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	return out, errb.String(), err
}
