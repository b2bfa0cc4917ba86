package tasks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// taskProbe is one task IQ, well-formed or not.
type taskProbe struct {
	name    string
	iqType  string
	payload func() *xmltree.Element
}

// taskProbes returns every task payload of urn:xmpp:agent-task:0 in the
// shapes a prober would try: malformed attributes and children, the wrong
// IQ type, and well-formed requests with unknown identifiers. The hash is a
// real manifest hash, so the well-formed invoke is exactly what an
// operator would have handed out.
func taskProbes(version, hash string) []taskProbe {
	reqID, taskID, inputID := ids.New("req-"), ids.New("task-"), ids.New("input-")
	el := func(local string, attrs ...string) *xmltree.Element { return xmltree.New(ns.Task, local, attrs...) }
	hashEl := func(v string) *xmltree.Element {
		return el("manifest-hash").Add(xmltree.New(ns.Hashes, "hash", "algo", ns.HashAlgo).WithText(v))
	}
	args := func(text string) *xmltree.Element { return el("arguments", "media-type", ns.MediaJSON).WithText(text) }
	invoke := func(attrs ...string) func(children ...*xmltree.Element) func() *xmltree.Element {
		return func(children ...*xmltree.Element) func() *xmltree.Element {
			return func() *xmltree.Element { return el("invoke", attrs...).Add(children...) }
		}
	}
	full := []string{"api-version", version, "request-id", reqID, "tool", "echo"}
	input := func(attrs ...string) func() *xmltree.Element {
		return func() *xmltree.Element {
			return el("provide-input", attrs...).Add(el("input", "media-type", ns.MediaJSON).WithText(`{"unit":"C"}`))
		}
	}
	simple := func(local string, attrs ...string) func() *xmltree.Element {
		return func() *xmltree.Element { return el(local, attrs...) }
	}
	cancel2 := func() *xmltree.Element {
		return el("cancel", "expected-revision", "1", "task-id", taskID).Add(el("reason").WithText("a"), el("reason").WithText("b"))
	}
	probes := []taskProbe{
		{"invoke/empty", "set", simple("invoke")},
		{"invoke/no-request-id", "set", invoke("api-version", version, "tool", "echo")(hashEl(hash), args(`{"message":"x"}`))},
		{"invoke/short-request-id", "set", invoke("api-version", version, "request-id", "short", "tool", "echo")(hashEl(hash), args(`{"message":"x"}`))},
		{"invoke/iq-get", "get", invoke(full...)(hashEl(hash), args(`{"message":"x"}`))},
		{"invoke/no-tool", "set", invoke("api-version", version, "request-id", reqID)(hashEl(hash), args(`{}`))},
		{"invoke/no-api-version", "set", invoke("request-id", reqID, "tool", "echo")(hashEl(hash), args(`{}`))},
		{"invoke/no-arguments", "set", invoke(full...)(hashEl(hash))},
		{"invoke/bad-hash", "set", invoke(full...)(hashEl("not-a-hash"), args(`{}`))},
		{"invoke/unexpected-child", "set", invoke(full...)(hashEl(hash), args(`{}`), el("surprise"))},
		{"invoke/bad-json", "set", invoke(full...)(hashEl(hash), args(`{"message":`))},
		{"invoke/unknown-tool", "set", invoke("api-version", version, "request-id", reqID, "tool", "nope")(hashEl(hash), args(`{}`))},
		{"invoke/well-formed", "set", invoke(full...)(hashEl(hash), args(`{"message":"x"}`))},
		{"provide-input/empty", "set", simple("provide-input")},
		{"provide-input/no-attributes", "set", input()},
		{"provide-input/iq-get", "get", input("expected-revision", "1", "request-id", inputID, "task-id", taskID)},
		{"provide-input/bad-task-id", "set", input("expected-revision", "1", "request-id", inputID, "task-id", "x")},
		{"provide-input/non-numeric-revision", "set", input("expected-revision", "abc", "request-id", inputID, "task-id", taskID)},
		{"provide-input/no-input", "set", simple("provide-input", "expected-revision", "1", "request-id", inputID, "task-id", taskID)},
		{"provide-input/well-formed", "set", input("expected-revision", "1", "request-id", inputID, "task-id", taskID)},
		{"cancel/empty", "set", simple("cancel")},
		{"cancel/empty-task-id", "set", simple("cancel", "expected-revision", "1", "task-id", "")},
		{"cancel/non-numeric-revision", "set", simple("cancel", "expected-revision", "one", "task-id", taskID)},
		{"cancel/iq-get", "get", simple("cancel", "expected-revision", "1", "task-id", taskID)},
		{"cancel/two-reasons", "set", cancel2},
		{"cancel/well-formed", "set", simple("cancel", "expected-revision", "1", "task-id", taskID)},
	}
	for _, op := range []string{"task-state-request", "task-result-request"} {
		probes = append(probes,
			taskProbe{op + "/no-task-id", "get", simple(op)},
			taskProbe{op + "/empty-task-id", "get", simple(op, "task-id", "")},
			taskProbe{op + "/malformed-task-id", "get", simple(op, "task-id", "bad id")},
			taskProbe{op + "/iq-set", "set", simple(op, "task-id", taskID)},
			taskProbe{op + "/well-formed", "get", simple(op, "task-id", taskID)},
		)
	}
	return append(probes, taskProbe{"unknown-task-element", "get", simple("task-list")})
}

// probeReply sends one probe to an endpoint and returns the whole reply
// with its from attribute (the addressee) blanked: everything else must be
// byte-identical between endpoints the requester may not touch.
func probeReply(t *testing.T, ctx context.Context, conn *xmppclient.Client, p taskProbe, to string) string {
	t.Helper()
	iq := xmltree.New("jabber:client", "iq", "type", p.iqType, "id", "probe-"+strings.ReplaceAll(p.name, "/", "-"), "to", to)
	iq.Add(p.payload())
	reply, err := conn.SendIQ(ctx, iq)
	if err != nil {
		t.Fatalf("%s to %s: %v", p.name, to, err)
	}
	reply.SetAttr("from", "")
	return reply.String()
}

// assertLikeNonexistent checks that every probe to each of endpoints gets
// the reply a nonexistent endpoint gets, and that this reply is the bare
// item-not-found.
func assertLikeNonexistent(t *testing.T, ctx context.Context, conn *xmppclient.Client, probes []taskProbe, nonexistent string, endpoints ...string) {
	t.Helper()
	for _, p := range probes {
		want := probeReply(t, ctx, conn, p, nonexistent)
		if !strings.Contains(want, "<item-not-found") || strings.Contains(want, "<text") {
			t.Fatalf("%s to nonexistent %s: %s, want a bare item-not-found", p.name, nonexistent, want)
		}
		for _, ep := range endpoints {
			if got := probeReply(t, ctx, conn, p, ep); got != want {
				t.Errorf("%s: %s answers differently from a nonexistent endpoint:\n%s: %s\nnonexistent: %s", p.name, ep, ep, got, want)
			}
		}
	}
}

// assertPrecise checks that a requester who may invoke gets bad-request
// with an explanatory text for malformed task IQs.
func assertPrecise(t *testing.T, ctx context.Context, conn *xmppclient.Client, probes []taskProbe, ep string) {
	t.Helper()
	for _, name := range []string{"invoke/no-request-id", "invoke/iq-get", "cancel/non-numeric-revision", "task-state-request/malformed-task-id", "provide-input/no-attributes"} {
		p := findProbe(t, probes, name)
		got := probeReply(t, ctx, conn, p, ep)
		if !strings.Contains(got, "<bad-request") || !strings.Contains(got, "<text") {
			t.Errorf("%s to %s by an authorized invoker: %s, want bad-request with a text", name, ep, got)
		}
	}
}

func findProbe(t *testing.T, probes []taskProbe, name string) taskProbe {
	t.Helper()
	for _, p := range probes {
		if p.name == name {
			return p
		}
	}
	t.Fatalf("no probe %s", name)
	return taskProbe{}
}

// TestTaskIQsNoExistenceOracleFederated: a remote user with no grant at
// all, across two real federated Prosody servers, cannot tell an active
// endpoint or a deactivated one from a nonexistent one with any task IQ.
// Once invocation is granted, the same user gets precise errors.
func TestTaskIQsNoExistenceOracleFederated(t *testing.T) {
	t.Parallel()
	a, b := xmppharness.StartFederation(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := a.Register(ctx, "alice", e2e.Password+"alice"); err != nil {
		t.Fatal(err)
	}
	e := e2e.Start(t, e2e.Options{Server: b, Agents: []e2e.Agent{{Localpart: "weather"}, {Localpart: "retired"}}})
	retired := e.Endpoint("retired").String()
	if err := e.Gateway.Registry.Deactivate(ctx, retired); err != nil {
		t.Fatal(err)
	}
	m, ok := e.Gateway.Registry.Active(e.Endpoint("weather").String())
	if !ok {
		t.Fatal("weather has no active manifest")
	}
	_, alice := e.DialOn(a, "alice")
	probes := taskProbes(m.Version, m.Hash)
	assertLikeNonexistent(t, ctx, alice, probes, "nobody@"+e.Domain, e.Endpoint("weather").String(), retired)
	if t.Failed() {
		return
	}

	e.Agentgw(0, "trust", "grant", "--config", e.ConfigPath, "--invocation", "a.test")
	p := findProbe(t, probes, "invoke/no-request-id")
	testkit.WaitFor(t, 3*time.Second, "invocation grant", func() bool {
		return strings.Contains(probeReply(t, ctx, alice, p, e.Endpoint("weather").String()), "<bad-request")
	})
	assertPrecise(t, ctx, alice, probes, e.Endpoint("weather").String())
	assertPrecise(t, ctx, alice, probes, retired)
}

// TestTaskIQsNoExistenceOracleLocal: endpoints restricted with visible_to
// and invocable_by, probed by a local user who is not listed, look like
// nonexistent ones to every task IQ; the listed user gets precise errors.
func TestTaskIQsNoExistenceOracleLocal(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "open"}, {Localpart: "guarded"}, {Localpart: "guardedoff"}}, Users: []string{"eve", "ops"},
		Mutate: func(c *config.Config) {
			for i := range c.Agents {
				if strings.HasPrefix(c.Agents[i].JID, "guarded") {
					ops := "ops@" + c.XMPP.LocalDomains[0]
					c.Agents[i].VisibleTo = []string{ops}
					c.Agents[i].InvocableBy = []string{ops}
				}
			}
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	off := e.Endpoint("guardedoff").String()
	if err := e.Gateway.Registry.Deactivate(ctx, off); err != nil {
		t.Fatal(err)
	}
	m, _ := e.Gateway.Registry.Active(e.Endpoint("guarded").String())
	probes := taskProbes(m.Version, m.Hash)
	_, eve := e.DialConn("eve")
	assertLikeNonexistent(t, ctx, eve, probes, "nobody@"+e.Domain, e.Endpoint("guarded").String(), off)
	// eve may invoke the unrestricted endpoint: precise errors there.
	assertPrecise(t, ctx, eve, probes, e.Endpoint("open").String())
	_, ops := e.DialConn("ops")
	assertPrecise(t, ctx, ops, probes, e.Endpoint("guarded").String())
	assertPrecise(t, ctx, ops, probes, off)
}
