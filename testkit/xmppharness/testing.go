package xmppharness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
)

// skipOrFail handles launch errors in tests: a missing binary skips outside
// CI and fails under CI=true; anything else fails.
func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) {
		testkit.Unavailable(t, "%v (run scripts/install-deps.sh)", err)
	}
	t.Fatal(err)
}

// StartProsody starts a private Prosody for the test and stops it on cleanup.
// o.Dir defaults to a t.TempDir.
func StartProsody(t testing.TB, o ProsodyOptions) *Server {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := LaunchProsody(ctx, o)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Logf("stop prosody: %v", err)
		}
	})
	return s
}

// StartEjabberd starts a private ejabberd for the test and stops it on
// cleanup. o.Dir defaults to a t.TempDir.
func StartEjabberd(t testing.TB, o EjabberdOptions) *Server {
	t.Helper()
	if o.Dir == "" {
		// Not t.TempDir: its parent is mode 0700, and ejabberd runs as its
		// own user.
		dir, err := os.MkdirTemp("", "agentgw-ejabberd-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		o.Dir = dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := LaunchEjabberd(ctx, o)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Logf("stop ejabberd: %v", err)
		}
	})
	return s
}

// StartFederation starts two federated Prosody servers: a (domain a.test)
// and b (domain b.test with component agents.b.test), each with S2S on port
// 5269 of its own loopback address. Both stop on cleanup.
func StartFederation(t testing.TB) (a, b *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b, err := LaunchFederation(ctx, t.TempDir(), t.TempDir())
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Logf("stop a.test: %v", err)
		}
		if err := b.Close(); err != nil {
			t.Logf("stop b.test: %v", err)
		}
	})
	return a, b
}

// sharedTenants is how many tests one shared ejabberd serves before the
// next test starts another: each tenant is one more virtual host and
// listener in the same node.
const sharedTenants = 8

var shared struct {
	mu    sync.Mutex
	main  bool // Main runs: someone stops the servers at the end
	pools map[string]*ejabberdPool
}

type ejabberdPool struct {
	servers []*Server
	free    []*Server // tenant views not handed out yet
}

// SharedEjabberd returns the test's own tenant of an ejabberd shared by the
// test binary: its own virtual host (Domain), component domain, listener
// and secret, so tests stay independent and may run in parallel, but the
// package pays one ejabberd start (about 11 CPU-seconds) instead of one
// per test. Tenants are never reused, so user names never collide. Tests
// that stop, kill or restart the server, or need HTTPUpload, use
// StartEjabberd. The package's TestMain calls Main, which stops the shared
// servers when the tests end (SharedEjabberd fails the test without it).
func SharedEjabberd(t testing.TB, o EjabberdOptions) *Server {
	t.Helper()
	if o.HTTPUpload || o.Dir != "" {
		t.Fatal("xmppharness: SharedEjabberd takes no HTTPUpload or Dir; use StartEjabberd")
	}
	if o.Snippet == "" {
		o.Snippet = EjabberdSnippet
	}
	key := fmt.Sprintf("%q %q %q %q %q", o.Domain, o.ComponentDomain, o.Interface, o.Snippet, o.Modules)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		// Without it the node would outlive the test binary.
		t.Fatal("xmppharness: SharedEjabberd needs func TestMain(m *testing.M) { os.Exit(xmppharness.Main(m)) }")
	}
	if shared.pools == nil {
		shared.pools = map[string]*ejabberdPool{}
	}
	p := shared.pools[key]
	if p == nil {
		p = &ejabberdPool{}
		shared.pools[key] = p
	}
	if len(p.free) == 0 {
		dir, err := os.MkdirTemp("", "agentgw-ejabberd-")
		if err != nil {
			t.Fatal(err)
		}
		o.Dir = dir
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, tenants, err := launchEjabberd(ctx, o, sharedTenants)
		if err != nil {
			os.RemoveAll(dir)
			skipOrFail(t, err)
		}
		p.servers = append(p.servers, s)
		p.free = tenants
	}
	v := p.free[0]
	p.free = p.free[1:]
	return v
}

// CloseShared stops every server SharedEjabberd started and removes their
// directories.
func CloseShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for _, p := range shared.pools {
		for _, s := range p.servers {
			if err := s.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "xmppharness: stop shared ejabberd: %v\n", err)
			}
			os.RemoveAll(s.Dir)
		}
	}
	shared.pools = nil
}

// Main runs the tests and then stops the shared servers:
// func TestMain(m *testing.M) { os.Exit(xmppharness.Main(m)) }.
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	defer CloseShared()
	return m.Run()
}
