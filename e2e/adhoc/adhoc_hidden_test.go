package adhoc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// adhocProbe is one command IQ of the hidden/deactivated/missing matrix:
// what to put in the IQ addressed to the endpoint.
type adhocProbe struct {
	name  string
	typ   string // IQ type; "" is set
	build func() *xmltree.Element
}

// adhocProbes lists every command payload and action: each action with and
// without a session (a well-formed made-up one and a malformed one), with
// a form, with malformed forms, an unknown action, and a bad node.
func adhocProbes() []adhocProbe {
	cmd := func(attrs ...string) *xmltree.Element {
		return xmltree.New(ns.Commands, "command", attrs...)
	}
	form := func(typ string, fields ...[2]string) *xmltree.Element {
		x := xmltree.New(ns.Data, "x", "type", typ)
		for _, f := range fields {
			x.Add(xmltree.New(ns.Data, "field", "var", f[0]).Add(xmltree.New(ns.Data, "value").WithText(f[1])))
		}
		return x
	}
	const sid = "cmd-AAAAAAAAAAAAAAAAAAAAAA"
	var ps []adhocProbe
	add := func(name string, b func() *xmltree.Element) {
		ps = append(ps, adhocProbe{name: name, build: b})
	}
	add("plain", func() *xmltree.Element { return cmd("node", "echo") })
	for _, a := range []string{"execute", "next", "prev", "complete", "cancel", "jump", ""} {
		a := a
		attrs := func(extra ...string) []string {
			out := []string{"node", "echo"}
			if a != "" {
				out = append(out, "action", a)
			}
			return append(out, extra...)
		}
		add("action="+a, func() *xmltree.Element { return cmd(attrs()...) })
		add("action="+a+"+sid", func() *xmltree.Element { return cmd(attrs("sessionid", sid)...) })
		add("action="+a+"+badsid", func() *xmltree.Element { return cmd(attrs("sessionid", "not a session")...) })
		add("action="+a+"+form", func() *xmltree.Element {
			return cmd(attrs()...).Add(form("submit", [2]string{"agentgw-stage", "start"}, [2]string{"message", "hi"}))
		})
		add("action="+a+"+sid+form", func() *xmltree.Element {
			return cmd(attrs("sessionid", sid)...).Add(form("submit", [2]string{"agentgw-stage", "start"}, [2]string{"message", "hi"}))
		})
		add("action="+a+"+sid+emptyform", func() *xmltree.Element {
			return cmd(attrs("sessionid", sid)...).Add(form("submit"))
		})
	}
	add("cancel-form", func() *xmltree.Element { return cmd("node", "echo", "sessionid", sid).Add(form("cancel")) })
	add("result-form", func() *xmltree.Element { return cmd("node", "echo").Add(form("result")) })
	add("two-forms", func() *xmltree.Element { return cmd("node", "echo").Add(form("submit"), form("submit")) })
	add("bad-field", func() *xmltree.Element {
		return cmd("node", "echo", "action", "complete").Add(xmltree.New(ns.Data, "x", "type", "submit").Add(xmltree.New(ns.Data, "field")))
	})
	add("unknown-field", func() *xmltree.Element {
		return cmd("node", "echo", "action", "complete").Add(form("submit", [2]string{"nope", "x"}))
	})
	add("input-stage", func() *xmltree.Element {
		return cmd("node", "echo", "sessionid", sid, "action", "complete").Add(form("submit", [2]string{"agentgw-stage", "input:req-x:3"}))
	})
	add("no-node", func() *xmltree.Element { return cmd("action", "next") })
	add("empty-node", func() *xmltree.Element { return cmd("node", "", "action", "cancel", "sessionid", sid) })
	add("long-node", func() *xmltree.Element { return cmd("node", strings.Repeat("n", 2000), "action", "next") })
	add("unknown-node", func() *xmltree.Element { return cmd("node", "nosuchtool", "action", "next") })
	add("unknown-child", func() *xmltree.Element { return cmd("node", "echo").Add(xmltree.New("urn:example:junk", "junk")) })
	ps = append(ps, adhocProbe{name: "iq-get", typ: "get", build: func() *xmltree.Element { return cmd("node", "echo") }})
	return ps
}

// TestAdhocHiddenDeactivatedMissingIdentical: every command payload and
// action sent to a hidden, a deactivated and a nonexistent endpoint, by a
// local (bob@b.test) and a federated (alice@a.test) requester, answers with
// the same error XML byte for byte; only the addressee (from) differs.
// Both requesters hold a task at the hidden and the deactivated endpoint
// (so the router lets their IQs through to the command handler) and may
// invoke neither any more.
func TestAdhocHiddenDeactivatedMissingIdentical(t *testing.T) {
	t.Parallel()
	a, b := xmppharness.StartFederation(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := a.Register(ctx, "alice", e2e.Password+"alice"); err != nil {
		t.Fatal(err)
	}
	e := e2e.Start(t, e2e.Options{Server: b, Users: []string{"bob"}, Agents: []e2e.Agent{{Localpart: "weather"}, {Localpart: "gone"}}})
	hidden, gone, missing := e.Endpoint("weather"), e.Endpoint("gone"), e.Endpoint("nobody")

	// Before: bob (local) and alice (granted invocation) each hold a task
	// at both endpoints.
	e.Agentgw(0, "trust", "grant", "--config", e.ConfigPath, "--invocation", "a.test")
	alice, aconn := e.DialOn(a, "alice")
	bob := e.Dial("bob")
	call := func(c *agentclient.Client, ep string) {
		t.Helper()
		m, ok := e.Gateway.Registry.Active(ep)
		if !ok {
			t.Fatalf("%s has no active manifest", ep)
		}
		var acc *agentclient.Accepted
		testkit.WaitFor(t, 30*time.Second, "an invoke at "+ep, func() bool {
			var err error
			acc, err = c.Invoke(ctx, jid.MustParse(ep), &agentclient.InvokeRequest{Tool: "echo", Version: m.Version, ManifestHash: m.Hash, Arguments: json.RawMessage(`{"message":"before"}`)})
			return err == nil
		})
		if out, err := c.Follow(ctx, jid.MustParse(ep), acc, agentclient.CallOptions{RecoverAfter: time.Second}); err != nil || out.State != "completed" {
			t.Fatalf("call at %s: %v %+v", ep, err, out)
		}
	}
	for _, ep := range []string{hidden.String(), gone.String()} {
		call(alice, ep)
		call(bob, ep)
	}
	// Each also runs echo as an ad-hoc command at the to-be-hidden
	// endpoint: their own sessions stay theirs afterwards.
	_, bconn0 := e.DialConn("bob")
	command := func(conn *xmppclient.Client, to string, c *xmltree.Element) *xmltree.Element {
		t.Helper()
		reply, err := conn.SendIQ(ctx, xmltree.New("jabber:client", "iq", "type", "set", "id", "cmd", "to", to).Add(c))
		if err != nil {
			t.Fatal(err)
		}
		if reply.AttrValue("type") != "result" {
			t.Fatalf("command: %s", reply)
		}
		return reply.Child(ns.Commands, "command")
	}
	ownSession := func(conn *xmppclient.Client) string {
		t.Helper()
		first := command(conn, hidden.String(), xmltree.New(ns.Commands, "command", "node", "echo", "action", "execute"))
		sid := first.AttrValue("sessionid")
		x := xmltree.New(ns.Data, "x", "type", "submit").Add(
			xmltree.New(ns.Data, "field", "var", "agentgw-stage").Add(xmltree.New(ns.Data, "value").WithText("start")),
			xmltree.New(ns.Data, "field", "var", "message").Add(xmltree.New(ns.Data, "value").WithText("mine")))
		command(conn, hidden.String(), xmltree.New(ns.Commands, "command", "node", "echo", "sessionid", sid, "action", "complete").Add(x))
		return sid
	}
	aliceSID, bobSID := ownSession(aconn), ownSession(bconn0)

	// Then: weather is hidden from bob (visible to and invocable by carol
	// only), the federated grant is revoked, and gone is deactivated.
	e.StopGateway()
	e.Opts.Mutate = func(c *config.Config) {
		for i := range c.Agents {
			if c.Agents[i].JID == hidden.String() {
				c.Agents[i].VisibleTo = []string{"carol@" + b.Domain}
				c.Agents[i].InvocableBy = []string{"carol@" + b.Domain}
			}
		}
	}
	e.StartGateway()
	e.Agentgw(0, "trust", "revoke", "--config", e.ConfigPath, "a.test")
	if err := e.Gateway.Registry.Deactivate(ctx, gone.String()); err != nil {
		t.Fatal(err)
	}
	_, bconn := e.DialConn("bob")

	// Wait until alice's revocation applies (an invoke is refused). The
	// gateway reloads grants on a timer, and hiding weather already makes
	// Info answer item-not-found, so the grant table is checked too: under
	// load the probes would otherwise run before the reload.
	testkit.WaitFor(t, 30*time.Second, "the revocation", func() bool {
		_, err := alice.Info(ctx, hidden, "")
		return e2e.ErrCondition(err) == "item-not-found" &&
			!e.Gateway.Grants.Granted("alice@"+a.Domain, hidden.String(), federation.ScopeInvocation)
	})

	ask := func(conn *xmppclient.Client, to string, p adhocProbe) string {
		t.Helper()
		typ := p.typ
		if typ == "" {
			typ = "set"
		}
		iq := xmltree.New("jabber:client", "iq", "type", typ, "id", "probe-1", "to", to).Add(p.build())
		var reply *xmltree.Element
		var err error
		for i := 0; i < 5; i++ { // a rate-limit refusal is retried
			reply, err = conn.SendIQ(ctx, iq)
			if err != nil {
				t.Fatalf("%s to %s: %v", p.name, to, err)
			}
			if !strings.Contains(reply.String(), "resource-constraint") {
				break
			}
			time.Sleep(2 * time.Second)
		}
		// The from attribute names the addressee and to the requester;
		// everything else must be identical.
		reply.SetAttr("from", "")
		reply.SetAttr("to", "")
		return reply.String()
	}
	requesters := []struct {
		name string
		conn *xmppclient.Client
	}{{"local", bconn}, {"federated", aconn}}
	local := map[string]string{}
	for _, r := range requesters {
		for _, p := range adhocProbes() {
			want := ask(r.conn, missing.String(), p)
			// Across requesters the servers order the iq's attributes
			// differently (c2s against s2s); the error itself, which is
			// the gateway's, must be the same bytes.
			if r.name == "local" {
				local[p.name] = want
			} else if errorPart(want) != errorPart(local[p.name]) {
				t.Errorf("%s to the nonexistent endpoint differs between requesters:\nlocal     %s\nfederated %s", p.name, local[p.name], want)
			}
			if !strings.Contains(want, "item-not-found") {
				t.Errorf("%s %s to the nonexistent endpoint: %s", r.name, p.name, want)
			}
			for _, target := range []struct{ name, jid string }{{"hidden", hidden.String()}, {"deactivated", gone.String()}} {
				if got := ask(r.conn, target.jid, p); got != want {
					t.Errorf("%s %s: %s differs from nonexistent:\n%-11s %s\nnonexistent %s", r.name, p.name, target.name, target.name, got, want)
				}
			}
		}
	}
	// The exception: a requester's own submitted session still answers.
	for who, own := range map[*xmppclient.Client]string{aconn: aliceSID, bconn: bobSID} {
		var r *xmltree.Element
		testkit.WaitFor(t, 30*time.Second, "the own session's result", func() bool {
			r = command(who, hidden.String(), xmltree.New(ns.Commands, "command", "node", "echo", "sessionid", own, "action", "next"))
			return r.AttrValue("status") == "completed"
		})
		if !strings.Contains(r.String(), "mine") {
			t.Errorf("%s's own session at the hidden endpoint: %s", who.JID(), r)
		}
	}
	t.Logf("%d probes × hidden, deactivated, nonexistent × local, federated; reply: %s", len(adhocProbes()), local["plain"])
}

// errorPart is the <error/> element of a serialized error IQ.
func errorPart(iq string) string {
	i, j := strings.Index(iq, "<error"), strings.LastIndex(iq, "</error>")
	if i < 0 || j < i {
		return iq
	}
	return iq[i : j+len("</error>")]
}
