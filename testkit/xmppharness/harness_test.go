package xmppharness_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

const (
	nsPing      = "urn:xmpp:ping"
	nsDiscoInfo = "http://jabber.org/protocol/disco#info"
)

func login(t *testing.T, srv *xmppharness.Server, user, pw string) *xmppclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := xmppclient.Dial(ctx, xmppclient.Options{
		JID: user + "@" + srv.Domain, Password: pw, Server: srv.C2SAddr, CAFile: srv.CAFile,
		IQTimeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatalf("login %s on %s: %v", user, srv.Kind, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func pingIQ(to string) *xmltree.Element {
	return xmltree.New(xmppclient.NS, "iq", "type", "get", "to", to).Add(xmltree.New(nsPing, "ping"))
}

func mustResult(t *testing.T, c *xmppclient.Client, iq *xmltree.Element) *xmltree.Element {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply, err := c.SendIQ(ctx, iq)
	if err != nil {
		t.Fatal(err)
	}
	if reply.AttrValue("type") != "result" {
		t.Fatalf("want a result, got %s", reply)
	}
	return reply
}

// componentAccepts checks that the XEP-0114 listener speaks
// jabber:component:accept for the configured domain.
func componentAccepts(t *testing.T, srv *xmppharness.Server) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", srv.ComponentAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Write([]byte(`<?xml version='1.0'?><stream:stream xmlns='jabber:component:accept' xmlns:stream='http://etherx.jabber.org/streams' to='` + srv.ComponentDomain + `'>`))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "id=") {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("component stream header: %v (got %q)", err, got.String())
		}
		got.Write(buf[:n])
	}
	if strings.Contains(got.String(), "stream:error") || !strings.Contains(got.String(), srv.ComponentDomain) {
		t.Fatalf("component listener refused %s: %q", srv.ComponentDomain, got.String())
	}
}

func TestProsody(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	ctx := context.Background()
	if srv.Kind != xmppharness.KindProsody || srv.ComponentDomain != "agents.example.test" || len(srv.ComponentSecret) < 16 {
		t.Fatalf("server = %+v", srv)
	}
	if err := srv.Register(ctx, "alice", "s3cret"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(ctx, "bad name", "x"); err == nil {
		t.Fatal("Register accepted a bad user name")
	}
	c := login(t, srv, "alice", "s3cret")
	mustResult(t, c, pingIQ(srv.Domain))
	componentAccepts(t, srv)

	// The operator snippet is what the config includes.
	cfg, err := os.ReadFile(srv.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "Include") {
		t.Fatalf("config does not include the snippet:\n%s", cfg)
	}

	pid := srv.PID()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.PID() == pid || srv.PID() == 0 {
		t.Fatalf("PID %d -> %d after restart", pid, srv.PID())
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("client stream survived a server restart")
	}
	// Same ports, same accounts.
	c2 := login(t, srv, "alice", "s3cret")
	mustResult(t, c2, pingIQ(srv.Domain))
	componentAccepts(t, srv)

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if srv.PID() != 0 {
		t.Fatal("PID after Kill")
	}
	if _, err := net.DialTimeout("tcp", srv.C2SAddr, time.Second); err == nil {
		t.Fatal("C2S port still open after Kill")
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	mustResult(t, login(t, srv, "alice", "s3cret"), pingIQ(srv.Domain))
}

func TestProsodyParallelInstances(t *testing.T) {
	t.Parallel()
	a := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	b := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{Domain: "other.test"})
	if a.C2SAddr == b.C2SAddr || a.ComponentAddr == b.ComponentAddr || a.ComponentSecret == b.ComponentSecret {
		t.Fatal("instances share ports or secrets")
	}
	if b.ComponentDomain != "agents.other.test" {
		t.Fatalf("component domain = %q", b.ComponentDomain)
	}
	if err := b.Register(context.Background(), "u", "p"); err != nil {
		t.Fatal(err)
	}
	mustResult(t, login(t, b, "u", "p"), pingIQ("other.test"))
}

func TestLaunchRejectsUnsafeValues(t *testing.T) {
	t.Parallel()
	_, err := xmppharness.LaunchProsody(context.Background(), xmppharness.ProsodyOptions{
		ComponentSecret: `x"; os.execute("true") --`, Dir: t.TempDir()})
	if err == nil || strings.Contains(err.Error(), "os.execute") {
		t.Fatalf("err = %v", err)
	}
}

func TestEjabberd(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartEjabberd(t, xmppharness.EjabberdOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if srv.Kind != xmppharness.KindEjabberd || srv.PID() == 0 {
		t.Fatalf("server = %+v pid %d", srv, srv.PID())
	}
	if err := srv.Register(ctx, "alice", "s3cret"); err != nil {
		t.Fatal(err)
	}
	c := login(t, srv, "alice", "s3cret")
	mustResult(t, c, pingIQ(srv.Domain))
	componentAccepts(t, srv)

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	mustResult(t, login(t, srv, "alice", "s3cret"), pingIQ(srv.Domain))
}

func TestFederation(t *testing.T) {
	t.Parallel()
	a, b := xmppharness.StartFederation(t)
	if a.Domain != "a.test" || b.Domain != "b.test" || b.ComponentDomain != "agents.b.test" {
		t.Fatalf("domains %s %s %s", a.Domain, b.Domain, b.ComponentDomain)
	}
	if a.S2SAddr == "" || b.S2SAddr == "" || a.Interface == b.Interface {
		t.Fatalf("s2s %q %q", a.S2SAddr, b.S2SAddr)
	}
	if err := a.Register(context.Background(), "alice", "pw"); err != nil {
		t.Fatal(err)
	}
	alice := login(t, a, "alice", "pw")
	// These replies can only come from b.test across s2s.
	reply := mustResult(t, alice, pingIQ("b.test"))
	if reply.AttrValue("from") != "b.test" {
		t.Fatalf("ping reply from %q", reply.AttrValue("from"))
	}
	info := mustResult(t, alice, xmltree.New(xmppclient.NS, "iq", "type", "get", "to", "b.test").
		Add(xmltree.New(nsDiscoInfo, "query")))
	q := info.Child(nsDiscoInfo, "query")
	if q == nil || q.Child(nsDiscoInfo, "identity") == nil {
		t.Fatalf("disco#info = %s", info)
	}
}
