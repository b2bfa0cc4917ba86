package component_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// A conflict met while reconnecting (the server, or another instance, still
// holds the domain) is retried within ConflictGrace instead of ending the
// gateway; the component takes the domain back once it is free.
func TestConflictOnReconnectIsRetried(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	cfg := componentConfig(t, srv)
	// 3 s between the first's attempts, so that the other session, started
	// as soon as the server is back, connects first even on a loaded
	// machine (with 1 s the first won under load 17-20).
	cfg.MinBackoff, cfg.MaxBackoff = 3*time.Second, 3*time.Second
	first := component.New(cfg, component.NewRouter(cfg.Domain, nil, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-first.Ready()

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Another session takes the domain before the first reconnects.
	other := component.New(componentConfig(t, srv), component.NewRouter(cfg.Domain, nil, nil))
	octx, ocancel := context.WithCancel(context.Background())
	odone := make(chan error, 1)
	go func() { odone <- other.Run(octx) }()
	select {
	case <-other.Ready():
	case err := <-odone:
		ocancel()
		t.Fatalf("other component: %v (the first, waiting 3 s to reconnect, should not have won)", err)
	case <-time.After(10 * time.Second):
		t.Fatal("other component did not connect")
	}
	reconnects := first.Stats().Reconnects
	testkit.WaitFor(t, 30*time.Second, "a refused reconnect", func() bool { return first.Stats().Reconnects >= reconnects+2 })
	select {
	case err := <-done:
		t.Fatalf("the first component gave up on a reconnect conflict: %v", err)
	default:
	}
	ocancel()
	<-odone
	testkit.WaitFor(t, 30*time.Second, "the first component to take the domain back", first.Connected)
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}
