package xmppharness

import (
	"context"
	"errors"
	"os"
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
