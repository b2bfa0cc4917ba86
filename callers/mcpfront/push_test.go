package mcpfront

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
)

// pushAgents is fakeAgents with the catalog push side.
type pushAgents struct {
	*fakeAgents
	mu     sync.Mutex
	subs   []string
	notify func(agentclient.CatalogChange)
}

func (p *pushAgents) SubscribeCatalog(_ context.Context, gw jid.JID) error {
	p.mu.Lock()
	p.subs = append(p.subs, gw.String())
	p.mu.Unlock()
	return nil
}

func (p *pushAgents) OnCatalogChange(f func(agentclient.CatalogChange)) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
}

// With polling off, a pushed catalog change alone refreshes the front and
// reaches the host as list_changed; the front subscribes to every listed
// gateway, again after each refresh.
func TestPushedChangeRefreshes(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	fa.addEndpoint("agents.example.test", "weather@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("echo", objSchema)}, run: echoRun})
	pa := &pushAgents{fakeAgents: fa}
	f := New(pa, Options{Logger: quiet(), Refresh: -1})
	notes := make(chan struct{}, 10)
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, st) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, &mcp.ClientOptions{Logger: quiet(),
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { notes <- struct{}{} }})
	// Under 2026-07-28 (SEP-2575) list_changed reaches only a session whose
	// subscriptions/listen stream the server has registered, and Connect
	// returns once the listen request is sent, not when it is registered:
	// a change pushed in between is, by the protocol, not this host's to
	// hear. Wait for the server's acknowledgement, as a host must.
	acked := make(chan struct{})
	var ackOnce sync.Once
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				ackOnce.Do(func() { close(acked) })
			}
			return next(ctx, method, req)
		}
	})
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	select {
	case <-acked:
	case <-time.After(30 * time.Second):
		t.Fatal("the front never acknowledged the host's subscriptions/listen")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pa.mu.Lock()
		n, cb := len(pa.subs), pa.notify
		pa.mu.Unlock()
		if n >= 1 && cb != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no catalog subscription (subs %d, callback %v)", n, cb != nil)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(f.Tools()) != 1 {
		t.Fatalf("tools %v", f.Tools())
	}
	fa.setVersion("weather@agents.example.test", "2", []agentclient.ManifestTool{tool("echo", objSchema), tool("sum", objSchema)})
	pa.mu.Lock()
	cb := pa.notify
	pa.mu.Unlock()
	cb(agentclient.CatalogChange{Gateway: jid.MustParse("agents.example.test"), Endpoint: "weather@agents.example.test", Active: true, Version: "2"})
	waitNote(t, notes)
	if got := f.Tools(); len(got) != 2 {
		t.Fatalf("after the push the tools are %v", got)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		pa.mu.Lock()
		n := len(pa.subs)
		pa.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions, want one more after the pushed refresh", n)
		}
	}
	cancel()
	<-done
}
