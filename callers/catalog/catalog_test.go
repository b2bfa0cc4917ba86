package catalog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
)

// fakeDir is one gateway's directory for the catalog alone.
type fakeDir struct {
	Client // unused methods panic

	mu        sync.Mutex
	items     []string
	versions  map[string]string // endpoint → active version; missing: item-not-found
	listErr   error
	manifests int
	subs      int
	notify    func(agentclient.CatalogChange)
}

func (d *fakeDir) JID() jid.JID { return jid.MustParse("alice@example.test/caller") }
func (d *fakeDir) FindGateways(context.Context, jid.JID) ([]jid.JID, error) {
	return []jid.JID{jid.MustParse("agents.example.test")}, nil
}
func (d *fakeDir) AllItems(context.Context, jid.JID, string, int) ([]agentclient.Item, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.listErr != nil {
		return nil, d.listErr
	}
	var out []agentclient.Item
	for _, it := range d.items {
		out = append(out, agentclient.Item{JID: it})
	}
	return out, nil
}
func (d *fakeDir) Endpoint(_ context.Context, ep jid.JID) (*agentclient.EndpointInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.versions[ep.String()]
	if !ok {
		return nil, agentproto.NewError("item-not-found", "")
	}
	return &agentclient.EndpointInfo{JID: ep.String(), Version: v, ManifestHash: "h" + v, Features: map[string]bool{ns.Task: true}}, nil
}
func (d *fakeDir) GetManifest(_ context.Context, ep jid.JID, _ string) (*agentclient.Manifest, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.manifests++
	v := d.versions[ep.String()]
	m := &agentclient.Manifest{Version: v, Hash: "h" + v}
	m.Doc.Agent.JID = ep.String()
	return m, nil
}
func (d *fakeDir) SubscribeCatalog(context.Context, jid.JID) error {
	d.mu.Lock()
	d.subs++
	d.mu.Unlock()
	return nil
}
func (d *fakeDir) OnCatalogChange(f func(agentclient.CatalogChange)) { d.notify = f }

// The catalog pins each listed endpoint once while its version holds,
// re-pins on a new version, keeps a gateway's last listing while listing
// fails, drops an endpoint that answers item-not-found, and subscribes
// after every refresh.
func TestRefreshPinsAndKeeps(t *testing.T) {
	d := &fakeDir{items: []string{"weather@agents.example.test", "notes@agents.example.test/x", "agents.example.test"},
		versions: map[string]string{"weather@agents.example.test": "1", "notes@agents.example.test": "1"}}
	var built atomic.Int32
	cat := New(d, Options{}, func(e *Endpoint) string { built.Add(1); return e.JID.String() + "@" + e.Manifest.Version })
	ctx := context.Background()
	snap, err := cat.Refresh(ctx)
	if err != nil || len(snap) != 2 || snap["weather@agents.example.test"] != "weather@agents.example.test@1" {
		t.Fatalf("first refresh: %v %v", snap, err)
	}
	if _, err := cat.Refresh(ctx); err != nil || built.Load() != 2 || d.manifests != 2 {
		t.Fatalf("unchanged refresh re-pinned: built %d, manifests %d, %v", built.Load(), d.manifests, err)
	}
	d.mu.Lock()
	d.versions["weather@agents.example.test"] = "2"
	d.listErr = errors.New("gateway down")
	d.mu.Unlock()
	snap, err = cat.Refresh(ctx)
	if err == nil || snap["weather@agents.example.test"] != "weather@agents.example.test@2" || len(snap) != 2 {
		t.Fatalf("listing failure: %v %v", snap, err)
	}
	d.mu.Lock()
	delete(d.versions, "notes@agents.example.test")
	d.listErr = nil
	d.mu.Unlock()
	snap, _ = cat.Refresh(ctx)
	if _, ok := cat.Get("notes@agents.example.test"); ok || len(snap) != 1 {
		t.Fatalf("item-not-found kept: %v", snap)
	}
	if d.subs != 4 {
		t.Fatalf("%d subscriptions after 4 refreshes", d.subs)
	}
}

// A pushed change makes the catalog stale at once and wakes Watch.
func TestPushMarksStaleAndWakes(t *testing.T) {
	d := &fakeDir{items: []string{"weather@agents.example.test"}, versions: map[string]string{"weather@agents.example.test": "1"}}
	cat := New(d, Options{}, func(e *Endpoint) string { return e.Manifest.Version })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := cat.Refresh(ctx); err != nil || !cat.Fresh(time.Hour) {
		t.Fatalf("after a refresh: fresh %v, %v", cat.Fresh(time.Hour), err)
	}
	d.notify(agentclient.CatalogChange{Gateway: jid.MustParse("agents.example.test"), Endpoint: "weather@agents.example.test", Active: true})
	if cat.Fresh(time.Hour) {
		t.Fatal("still fresh after a push")
	}
	woke := make(chan struct{}, 1)
	go cat.Watch(ctx, -1, func(ctx context.Context) { // the push's wake-up is pending
		cat.Refresh(ctx)
		woke <- struct{}{}
	})
	select {
	case <-woke:
	case <-time.After(30 * time.Second):
		t.Fatal("Watch did not refresh after a push")
	}
	if !cat.Fresh(time.Hour) {
		t.Fatal("not fresh after the pushed refresh")
	}
}
