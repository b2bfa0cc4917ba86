package endpointhost

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/backendkit/bridgetest"
	"github.com/agentgw/agentgw/internal/config"
)

type recPublisher struct {
	mu  sync.Mutex
	got [][]byte
}

func (p *recPublisher) Publish(_ context.Context, m []byte) (string, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, m)
	return "1.0.0", "hash", nil
}

type recAvailability struct{ up chan bool }

func (a recAvailability) SetAvailable(_ string, up bool) { a.up <- up }

// `agentgw host` builds its backend through a bridge's line of the table:
// the bridge's Build gets the host's publisher and availability, and the
// backend it adds is the one the host runs.
func TestBridgeBackend(t *testing.T) {
	a := backendkit.NewAgent(&config.Config{}, config.Agent{JID: "bot@example.test", Backend: "echo", Section: &bridgetest.Config{Greeting: "hi"}})
	a.Log = slog.New(slog.DiscardHandler)
	newBackend := BridgeBackend(context.Background(), bridgetest.Echo, a, "example.test", func() []string { return nil })
	pub, av := &recPublisher{}, recAvailability{up: make(chan bool, 1)}
	b, err := newBackend(pub, av)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Start(ctx)
	select {
	case up := <-av.up:
		if !up {
			t.Fatal("reported down")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the bridge's start did not run")
	}
	if rb, ok := b.(backendkit.Readiness); !ok || !rb.Ready() {
		t.Fatal("the hosted backend does not forward readiness")
	}
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if len(pub.got) != 1 {
		t.Fatalf("published %d manifests", len(pub.got))
	}
}
