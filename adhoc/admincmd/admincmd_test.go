package admincmd_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/adhoc/admincmd"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/directory/dirxmpp"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/xep/xmltree"
)

const (
	gw    = "agents.example.test"
	admin = "ops@example.test"
	user  = "alice@example.test"
)

const manifest = `{"agent":{"jid":"weather@agents.example.test","name":"weather","version":"1.4.0"},"manifestSpecVersion":"0","tools":[]}`

type env struct {
	t       *testing.T
	cancels []string // task-cancel calls: "task admin via"
	r       *component.Router
	db      *sqlite.DB
	reg     *directory.Registry
	grants  federation.GrantStore
}

// newEnv wires the commands as the gateway does: a real router, the real
// directory service for disco, the real registry on a SQLite store.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	reg, err := directory.NewRegistry(ctx, sqlite.NewDirectory(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetDomain(gw)
	pol := federation.New([]string{"example.test"}, []string{admin}, nil)
	drv := db.Drivers()
	e := &env{t: t}
	cmds := admincmd.New(admincmd.Deps{IsAdmin: pol.IsAdmin, Admin: reg, Grants: drv.Grants, SelfReg: drv.SelfReg,
		Tasks: drv.Tasks, IsLocal: pol.IsLocal, Cancel: e.cancel})
	r := component.NewRouter(jid.MustParse(gw), nil, nil)
	cmds.Register(r)
	dirxmpp.Register(r, dirxmpp.Deps{Domain: jid.MustParse(gw), Reader: reg, Admin: reg, Policy: pol, GatewayNodes: cmds})
	e.r, e.db, e.reg, e.grants = r, db, reg, drv.Grants
	return e
}

// cancel stands in for tasks.Engine.CancelAsOperator (the engine's own
// tests cover the cancel): it records the call and answers by task ID.
func (e *env) cancel(_ context.Context, id, operator, via string) (int64, error) {
	e.cancels = append(e.cancels, id+" "+operator+" "+via)
	switch id {
	case "task-settled000000000000000000000":
		return 0, tasks.ErrConflict
	case "task-unknown000000000000000000000":
		return 0, tasks.ErrNotFound
	}
	return 3, nil
}

func (e *env) iq(from, typ string, payload *xmltree.Element) *xmltree.Element {
	e.t.Helper()
	return e.r.DispatchIQ(context.Background(), component.IQ{ID: "q1", Type: typ, From: jid.MustParse(from + "/res"), To: jid.MustParse(gw), Payload: payload})
}

// cmd runs one command stage; fields are submitted when non-nil.
func (e *env) cmd(from, node, sid, action string, fields map[string][]string) *xmltree.Element {
	e.t.Helper()
	c := xmltree.New(ns.Commands, "command", "node", admincmd.NodePrefix+node, "action", action)
	if sid != "" {
		c.SetAttr("sessionid", sid)
	}
	if fields != nil {
		x := xmltree.New(ns.Data, "x", "type", "submit")
		for k, vs := range fields {
			f := xmltree.New(ns.Data, "field", "var", k)
			for _, v := range vs {
				f.Add(xmltree.New(ns.Data, "value").WithText(v))
			}
			x.Add(f)
		}
		c.Add(x)
	}
	return e.iq(from, "set", c)
}

// run executes node and submits fields in its session: what a client
// does when the operator fills the form in.
func (e *env) run(node string, fields map[string][]string) *xmltree.Element {
	e.t.Helper()
	first := e.cmd(admin, node, "", "execute", nil)
	c := first.Child(ns.Commands, "command")
	if first.AttrValue("type") != "result" || c == nil {
		e.t.Fatalf("%s: execute answered %s", node, first)
	}
	if c.AttrValue("status") == "completed" {
		return c
	}
	if c.AttrValue("status") != "executing" || c.Child(ns.Data, "x") == nil {
		e.t.Fatalf("%s: first stage %s", node, c)
	}
	reply := e.cmd(admin, node, c.AttrValue("sessionid"), "complete", fields)
	out := reply.Child(ns.Commands, "command")
	if out == nil || out.AttrValue("status") != "completed" {
		e.t.Fatalf("%s: submission answered %s", node, reply)
	}
	return out
}

// errOf is a reply's error element: what must match byte for byte
// between requesters (the stanza's to differs by construction).
func errOf(iq *xmltree.Element) string {
	if e := iq.Child("jabber:component:accept", "error"); e != nil {
		return iq.AttrValue("type") + " " + e.String()
	}
	return iq.String()
}

func noteOf(c *xmltree.Element) (typ, text string) {
	n := c.Child(ns.Commands, "note")
	if n == nil {
		return "", ""
	}
	return n.AttrValue("type"), n.Text
}

// An administrator registers, activates, inspects, grants, bans and looks
// up through the commands, and each lands in the stores the CLI reads.
func TestAdminCommandsAct(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	c := e.run("register", map[string][]string{"manifest": {manifest}, "activate": {"true"}})
	if typ, text := noteOf(c); typ != "info" || !strings.Contains(text, "Registered weather@agents.example.test version 1.4.0") || !strings.Contains(text, "It is active.") {
		t.Fatalf("register: %s %q", typ, text)
	}
	if m, ok := e.reg.Active("weather@agents.example.test"); !ok || m.Version != "1.4.0" {
		t.Fatalf("not active in the registry: %v %v", m, ok)
	}
	c = e.run("status", map[string][]string{"endpoint": {"weather@agents.example.test"}})
	x := c.Child(ns.Data, "x")
	if x == nil || x.AttrValue("type") != "result" || !strings.Contains(x.String(), "1.4.0") {
		t.Fatalf("status: %s", c)
	}
	c = e.run("deactivate", map[string][]string{"endpoint": {"weather@agents.example.test"}})
	if _, ok := e.reg.Active("weather@agents.example.test"); ok {
		t.Fatalf("still active after deactivate: %s", c)
	}

	e.run("trust-grant", map[string][]string{"principal": {"partner.example"}, "scope": {"visibility", "invocation"}})
	gs, err := e.grants.List(ctx)
	if err != nil || len(gs) != 1 || gs[0].Principal != "partner.example" || gs[0].Scope != federation.ScopeVisibility|federation.ScopeInvocation {
		t.Fatalf("grants after trust-grant: %v %v", gs, err)
	}
	c = e.run("trust-list", nil)
	if x := c.Child(ns.Data, "x"); x == nil || !strings.Contains(x.String(), "partner.example") {
		t.Fatalf("trust-list: %s", c)
	}
	e.run("trust-revoke", map[string][]string{"principal": {"partner.example"}, "scope": {"invocation"}})
	if gs, _ := e.grants.List(ctx); len(gs) != 1 || gs[0].Scope != federation.ScopeVisibility {
		t.Fatalf("grants after revoking invocation: %v", gs)
	}
	c = e.run("trust-revoke", map[string][]string{"principal": {"nobody.example"}})
	if typ, text := noteOf(c); typ != "error" || text != "No such endpoint, version, grant or task." {
		t.Fatalf("revoking a grant nobody holds: %s %q", typ, text)
	}

	e.run("ban", map[string][]string{"endpoint": {"bot@example.test"}, "reason": {"spam"}})
	bans, err := e.db.Drivers().SelfReg.Bans(ctx)
	if err != nil || len(bans) != 1 || bans[0].Endpoint != "bot@example.test" || bans[0].Reason != "spam" {
		t.Fatalf("bans: %v %v", bans, err)
	}
	e.run("unban", map[string][]string{"endpoint": {"bot@example.test"}})
	if bans, _ := e.db.Drivers().SelfReg.Bans(ctx); len(bans) != 0 {
		t.Fatalf("bans after unban: %v", bans)
	}
	c = e.run("task", map[string][]string{"task": {ids.New("task-")}})
	if typ, _ := noteOf(c); typ != "error" {
		t.Fatalf("an unknown task: %s", c)
	}
}

// A non-administrator sees no commands, and every command node, the
// commands node and a node that does not exist answer it byte for byte
// alike; an administrator's unknown node answers the same too.
func TestAdminCommandsHiddenFromOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	info := e.iq(user, "get", xmltree.New(ns.DiscoInfo, "query"))
	if strings.Contains(info.String(), ns.Commands) {
		t.Errorf("a non-admin's disco#info advertises commands: %s", info)
	}
	if info := e.iq(admin, "get", xmltree.New(ns.DiscoInfo, "query")); !strings.Contains(info.String(), ns.Commands) {
		t.Errorf("an admin's disco#info lacks commands: %s", info)
	}
	items := e.iq(admin, "get", xmltree.New(ns.DiscoItems, "query", "node", ns.Commands))
	if n := strings.Count(items.String(), admincmd.NodePrefix); n != 11 {
		t.Errorf("an admin lists %d commands, want 11: %s", n, items)
	}
	want := errOf(e.iq(user, "get", xmltree.New(ns.DiscoItems, "query", "node", "no-such-node")))
	for _, got := range []*xmltree.Element{
		e.iq(user, "get", xmltree.New(ns.DiscoItems, "query", "node", ns.Commands)),
		e.iq(admin, "get", xmltree.New(ns.DiscoItems, "query", "node", "no-such-node")),
	} {
		if errOf(got) != want {
			t.Errorf("disco#items differs from an unknown node's:\n got %s\nwant %s", got, want)
		}
	}
	wantInfo := errOf(e.iq(user, "get", xmltree.New(ns.DiscoInfo, "query", "node", "no-such-node")))
	if got := errOf(e.iq(user, "get", xmltree.New(ns.DiscoInfo, "query", "node", admincmd.NodePrefix+"register"))); got != wantInfo {
		t.Errorf("disco#info at a command node differs for a non-admin:\n got %s\nwant %s", got, wantInfo)
	}
	unknown := errOf(e.iq(admin, "set", xmltree.New(ns.Commands, "command", "node", "urn:agentgw:admin#nosuch", "action", "execute")))
	for name, got := range map[string]string{
		"non-admin execute":    errOf(e.cmd(user, "register", "", "execute", nil)),
		"non-admin submission": errOf(e.cmd(user, "trust-grant", "adm-0123456789abcdef", "complete", map[string][]string{"principal": {"evil.example"}, "scope": {"invocation"}})),
		"non-admin unknown":    errOf(e.cmd(user, "nosuch", "", "execute", nil)),
		"non-admin cancel":     errOf(e.cmd(user, "task-cancel", "adm-0123456789abcdef", "complete", map[string][]string{"task": {"task-running000000000000000000000"}})),
	} {
		if got != unknown {
			t.Errorf("%s differs from an unknown node:\n got %s\nwant %s", name, got, unknown)
		}
	}
	if gs, _ := e.grants.List(context.Background()); len(gs) != 0 {
		t.Fatalf("a non-admin's submission granted: %v", gs)
	}
	if len(e.cancels) != 0 {
		t.Fatalf("a non-admin's task-cancel reached the engine: %q", e.cancels)
	}
}

// Hostile and malformed submissions: clear errors that never quote the
// input; a manifest that fails validation is a refusal note.
func TestAdminCommandsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const evil = "<script>alert(1)</script>"
	for name, tc := range map[string]struct {
		node   string
		fields map[string][]string
	}{
		"endpoint not a JID": {"deactivate", map[string][]string{"endpoint": {evil}}},
		"endpoint a domain":  {"status", map[string][]string{"endpoint": {"example.test"}}},
		"bad scope":          {"trust-grant", map[string][]string{"principal": {"p.example"}, "scope": {evil}}},
		"no scope":           {"trust-grant", map[string][]string{"principal": {"p.example"}}},
		"bad principal":      {"trust-grant", map[string][]string{"principal": {evil}, "scope": {"visibility"}}},
		"bad task id":        {"task", map[string][]string{"task": {evil}}},
		"empty manifest":     {"register", map[string][]string{"manifest": {" "}}},
	} {
		got := e.cmd(admin, tc.node, "adm-0123456789abcdef", "complete", tc.fields).String()
		if !strings.Contains(got, `type="error"`) || !strings.Contains(got, "bad-request") || strings.Contains(got, "script") {
			t.Errorf("%s: %s", name, got)
		}
	}
	c := e.run("register", map[string][]string{"manifest": {`{"agent":{"jid":"x@elsewhere.example","name":"` + evil + `","version":"1"},"manifestSpecVersion":"0","tools":[]}`}})
	if typ, text := noteOf(c); typ != "error" || strings.Contains(text, "script") {
		t.Errorf("a foreign manifest: %s %q", typ, text)
	}
	if got := e.cmd(admin, "status", "not a session id!", "complete", map[string][]string{"endpoint": {"a@b"}}).String(); !strings.Contains(got, "bad-sessionid") {
		t.Errorf("a malformed session id: %s", got)
	}
}

// task-cancel cancels through the engine's operator cancel, naming the
// admin and where the command ran; refusals are fixed sentences, a
// malformed ID a bad-payload error that reaches no engine.
func TestAdminTaskCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.run("task-cancel", map[string][]string{"task": {"task-running000000000000000000000"}})
	if typ, text := noteOf(c); typ != "info" || !strings.HasPrefix(text, "Cancellation of task task-running") {
		t.Fatalf("cancel: %s %q", typ, text)
	}
	if len(e.cancels) != 1 || e.cancels[0] != "task-running000000000000000000000 "+admin+" admin command" {
		t.Fatalf("engine calls %q", e.cancels)
	}
	for id, want := range map[string]string{
		"task-settled000000000000000000000": "The task has already settled, or another cancellation was accepted.",
		"task-unknown000000000000000000000": "No such endpoint, version, grant or task.",
	} {
		if typ, text := noteOf(e.run("task-cancel", map[string][]string{"task": {id}})); typ != "error" || text != want {
			t.Errorf("%s: %s %q, want error %q", id, typ, text, want)
		}
	}
	n := len(e.cancels)
	first := e.cmd(admin, "task-cancel", "", "execute", nil).Child(ns.Commands, "command")
	reply := e.cmd(admin, "task-cancel", first.AttrValue("sessionid"), "complete", map[string][]string{"task": {"<script>"}})
	if reply.AttrValue("type") != "error" || strings.Contains(reply.String(), "script") {
		t.Errorf("a malformed ID: %s", reply)
	}
	if len(e.cancels) != n {
		t.Errorf("a malformed ID reached the engine: %q", e.cancels[n:])
	}
}
