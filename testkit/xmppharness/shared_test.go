package xmppharness_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit/xmppharness"
)

func TestMain(m *testing.M) { os.Exit(xmppharness.Main(m)) }

// handshake runs the XEP-0114 handshake for domain with secret at addr and
// reports whether the server accepted it.
func handshake(t *testing.T, addr, domain, secret string) bool {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write([]byte(`<?xml version='1.0'?><stream:stream xmlns='jabber:component:accept' xmlns:stream='http://etherx.jabber.org/streams' to='` + domain + `'>`)); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	buf := make([]byte, 4096)
	idRE := regexp.MustCompile(`id=['"]([^'"]+)['"]`)
	for !idRE.MatchString(got.String()) {
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			return false // refused the domain on this listener
		}
	}
	sum := sha1.Sum([]byte(idRE.FindStringSubmatch(got.String())[1] + secret))
	if _, err := conn.Write([]byte("<handshake>" + hex.EncodeToString(sum[:]) + "</handshake>")); err != nil {
		t.Fatal(err)
	}
	got.Reset()
	for {
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		s := got.String()
		if strings.Contains(s, "<handshake") {
			return true
		}
		if strings.Contains(s, "error") || err != nil {
			return false
		}
	}
}

func TestSharedEjabberd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := xmppharness.SharedEjabberd(t, xmppharness.EjabberdOptions{})
	b := xmppharness.SharedEjabberd(t, xmppharness.EjabberdOptions{})
	if a.PID() == 0 || a.PID() != b.PID() {
		t.Fatalf("tenants on one node: pids %d %d", a.PID(), b.PID())
	}
	if a.Domain == b.Domain || a.ComponentDomain == b.ComponentDomain || a.ComponentAddr == b.ComponentAddr ||
		a.ComponentSecret == b.ComponentSecret || a.C2SAddr != b.C2SAddr {
		t.Fatalf("tenants not apart: %s %s %s / %s %s %s", a.Domain, a.ComponentDomain, a.ComponentAddr,
			b.Domain, b.ComponentDomain, b.ComponentAddr)
	}
	// The same user name on each tenant: separate virtual hosts.
	for _, s := range []*xmppharness.Server{a, b} {
		if err := s.Register(ctx, "alice", "s3cret"); err != nil {
			t.Fatal(err)
		}
		mustResult(t, login(t, s, "alice", "s3cret"), pingIQ(s.Domain))
		if !handshake(t, s.ComponentAddr, s.ComponentDomain, s.ComponentSecret) {
			t.Fatalf("component %s refused its own secret", s.ComponentDomain)
		}
	}
	if handshake(t, b.ComponentAddr, b.ComponentDomain, a.ComponentSecret) {
		t.Fatal("tenant b accepted tenant a's secret")
	}
	if handshake(t, b.ComponentAddr, a.ComponentDomain, a.ComponentSecret) {
		t.Fatal("tenant b's listener served tenant a's domain")
	}
	// A tenant cannot stop the node its neighbours use.
	if err := a.Restart(ctx); err == nil {
		t.Fatal("a tenant restarted the shared server")
	}
	if err := a.Close(); err != nil || a.PID() == 0 {
		t.Fatalf("close of a tenant: %v, pid %d", err, a.PID())
	}
	mustResult(t, login(t, b, "alice", "s3cret"), pingIQ(b.Domain))
}
