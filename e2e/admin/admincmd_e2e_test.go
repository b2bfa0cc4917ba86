package admin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// TestAdminCommandsSlixmpp: the admin operations as ad-hoc commands at
// the gateway's JID, through Prosody, driven by slixmpp's XEP-0050 client
// as an operator's client would: an admin registers and activates a
// manifest, reads its status, grants and revokes trust, bans and unbans,
// looks up another account's task and cancels another account's running
// task on its behalf (once; again and for an unknown task it is refused
// with a fixed sentence); what it did lands in the store. A
// non-admin sees no commands and gets, for every command node, what an
// unknown node answers.
func TestAdminCommandsSlixmpp(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice", "ops"}, Admins: []string{"ops"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// alice's task, for the lookup.
	c := e.Dial("alice")
	p, err := c.Pin(ctx, e.Endpoint("weather"), "echo")
	if err != nil {
		t.Fatal(err)
	}
	acc, err := c.Invoke(ctx, e.Endpoint("weather"), &agentclient.InvokeRequest{Tool: "echo", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{"message":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}

	// alice's running task, for the admin's cancel on her behalf.
	pw, err := c.Pin(ctx, e.Endpoint("weather"), "wait")
	if err != nil {
		t.Fatal(err)
	}
	running, err := c.Invoke(ctx, e.Endpoint("weather"), &agentclient.InvokeRequest{Tool: "wait", Version: pw.Manifest.Version, ManifestHash: pw.Manifest.Hash, Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}

	fresh := "fresh@" + e.Domain
	path := filepath.Join(t.TempDir(), "fresh.json")
	if err := os.WriteFile(path, []byte(admManifest(t, fresh, "2.0.0", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	checks := e2e.RunSlixmpp(t, e, "admincmd.py", "ops", "--mode", "admin", "--manifest", path, "--task", acc.TaskID, "--cancel-task", running.TaskID)
	e2e.RequireChecks(t, checks, "admin-listing", "admin-register", "admin-status", "admin-trust", "admin-ban", "admin-task", "admin-task-cancel")
	// The cancel was alice's own, made by the admin: she reads it settled.
	st, err := c.State(ctx, e.Endpoint("weather"), running.TaskID)
	if err != nil || st.State != "cancelled" {
		t.Errorf("alice's task after the admin's cancel: %+v %v", st, err)
	}
	for _, ch := range checks {
		if ch["check"] == "admin-task" && ch["caller"] != e.JID("alice") {
			t.Errorf("task lookup: caller %v, want %s", ch["caller"], e.JID("alice"))
		}
	}
	if m, ok := e.Gateway.Registry.Active(fresh); !ok || m.Version != "2.0.0" {
		t.Errorf("the registered manifest is not active in the gateway: %v %v", m, ok)
	}
	if gs, err := e.Gateway.Store.Grants.List(ctx); err != nil || len(gs) != 0 {
		t.Errorf("grants after grant and revoke: %v %v", gs, err)
	}

	other := e2e.RunSlixmpp(t, e, "admincmd.py", "alice", "--mode", "other")
	e2e.RequireChecks(t, other, "other-hidden")
}
