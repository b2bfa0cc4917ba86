package a2afront

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
)

// catalogClient is a fake directory for the catalog logic only: one gateway
// whose endpoint's active version the test changes.
type catalogClient struct {
	Client    // unused methods panic
	mu        sync.Mutex
	version   string
	subscribe int
	onChange  func(agentclient.CatalogChange)
}

func (c *catalogClient) JID() jid.JID { return jid.MustParse("alice@example.test/a2a") }
func (c *catalogClient) AllItems(context.Context, jid.JID, string, int) ([]agentclient.Item, error) {
	return []agentclient.Item{{JID: "weather@agents.example.test"}}, nil
}
func (c *catalogClient) Endpoint(_ context.Context, ep jid.JID) (*agentclient.EndpointInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &agentclient.EndpointInfo{JID: ep.String(), Version: c.version, ManifestHash: "h" + c.version, Features: map[string]bool{ns.Task: true}}, nil
}
func (c *catalogClient) GetManifest(_ context.Context, ep jid.JID, _ string) (*agentclient.Manifest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &agentclient.Manifest{Version: c.version, Hash: "h" + c.version}
	m.Doc.Agent.JID = ep.String()
	m.Doc.Tools = []agentclient.ManifestTool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	return m, nil
}
func (c *catalogClient) SubscribeCatalog(context.Context, jid.JID) error {
	c.mu.Lock()
	c.subscribe++
	c.mu.Unlock()
	return nil
}
func (c *catalogClient) OnCatalogChange(f func(agentclient.CatalogChange)) { c.onChange = f }

// A pushed catalog change makes the next card request see the new version
// at once, although the TTL has not passed; the front subscribes after
// each refresh.
func TestPushedChangeRefreshesCards(t *testing.T) {
	t.Parallel()
	c := &catalogClient{version: "1"}
	f, err := New(c, Options{BaseURL: "http://x", Gateways: []jid.JID{jid.MustParse("agents.example.test")}, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := f.lookup(ctx, "weather@agents.example.test")
	if err != nil || a.version != "1" {
		t.Fatalf("first lookup: %+v %v", a, err)
	}
	c.mu.Lock()
	c.version = "2"
	c.mu.Unlock()
	if a, _ := f.lookup(ctx, "weather@agents.example.test"); a.version != "1" {
		t.Fatalf("refreshed before the TTL without a push: %s", a.version)
	}
	c.onChange(agentclient.CatalogChange{Endpoint: "weather@agents.example.test", Active: true})
	if a, _ := f.lookup(ctx, "weather@agents.example.test"); a.version != "2" || a.card.Version != "2" {
		t.Fatalf("after the push: %s", a.version)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		n := c.subscribe
		c.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscribed %d times after 2 refreshes", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
