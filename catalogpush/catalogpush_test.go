package catalogpush

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/xep/xmltree"
)

type sender struct {
	mu   sync.Mutex
	sent []*xmltree.Element
}

func (s *sender) Send(_ context.Context, el *xmltree.Element) error {
	s.mu.Lock()
	s.sent = append(s.sent, el)
	s.mu.Unlock()
	return nil
}

func (s *sender) SendIQ(context.Context, *xmltree.Element) (*xmltree.Element, error) { return nil, nil }

func (s *sender) take() []*xmltree.Element {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}

// policy: juliet sees everything, romeo nothing but "public".
type policy struct{}

func (policy) CanSee(p, ep string) bool {
	return p == "juliet@example.net" || strings.HasPrefix(ep, "public@")
}

type presence struct{ changed []string }

func (p *presence) CatalogChanged(ep string, _ func(string, string) bool) {
	p.changed = append(p.changed, ep)
}

func manifest(local, version string) []byte {
	return []byte(`{"agent":{"jid":"` + local + `@agents.example","name":"` + local + `","version":"` + version + `"},"manifestSpecVersion":"0","tools":[]}`)
}

func setup(t *testing.T) (*directory.Registry, *Service, *sender, *presence, *component.Router) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "agentgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	reg, err := directory.NewRegistry(ctx, sqlite.NewDirectory(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetDomain("agents.example")
	snd := &sender{}
	pr := &presence{}
	s := New(Deps{Domain: jid.MustParse("agents.example"), Reader: reg, Policy: policy{}, Sender: snd})
	s.SetPresence(pr)
	r := component.NewRouter(jid.MustParse("agents.example"), nil, nil)
	s.Register(r)
	return reg, s, snd, pr, r
}

func activate(t *testing.T, reg *directory.Registry, local, version string) {
	t.Helper()
	m, err := reg.Register(context.Background(), manifest(local, version))
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Activate(context.Background(), m.Endpoint, m.Version, m.Hash); err != nil {
		t.Fatal(err)
	}
}

func dispatch(t *testing.T, r *component.Router, typ, from, payload string) *xmltree.Element {
	t.Helper()
	p, err := xmltree.Parse([]byte(payload), xmltree.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return r.DispatchIQ(context.Background(), component.IQ{Type: typ, ID: "1", From: jid.MustParse(from), To: jid.MustParse("agents.example"), Payload: p})
}

func sub(node, j string) string {
	return `<pubsub xmlns="` + ns.PubSub + `"><subscribe node="` + node + `" jid="` + j + `"/></pubsub>`
}

func TestPublishVisibilityFiltered(t *testing.T) {
	reg, s, snd, pr, r := setup(t)
	for _, from := range []string{"juliet@example.net/phone", "romeo@example.org/pc"} {
		reply := dispatch(t, r, "set", from, sub(ns.CatalogNode, from))
		if reply.AttrValue("type") != "result" || !strings.Contains(reply.String(), `subscription="subscribed"`) {
			t.Fatalf("subscribe %s: %s", from, reply)
		}
	}
	// Subscribing someone else, or to another node, fails.
	if reply := dispatch(t, r, "set", "romeo@example.org/pc", sub(ns.CatalogNode, "juliet@example.net")); !strings.Contains(reply.String(), "invalid-jid") {
		t.Fatalf("subscribing another JID: %s", reply)
	}
	if reply := dispatch(t, r, "set", "romeo@example.org/pc", sub("other", "romeo@example.org")); !strings.Contains(reply.String(), "item-not-found") {
		t.Fatalf("another node: %s", reply)
	}

	activate(t, reg, "secret", "1")
	s.Scan()
	got := snd.take()
	if len(got) != 1 || got[0].AttrValue("to") != "juliet@example.net/phone" {
		t.Fatalf("secret's activation went to %v, want juliet only", got)
	}
	x := got[0].String()
	for _, want := range []string{`type="headline"`, `node="` + ns.CatalogNode + `"`, `id="secret@agents.example"`, `active="true"`, `version="1"`} {
		if !strings.Contains(x, want) {
			t.Errorf("item lacks %s: %s", want, x)
		}
	}
	activate(t, reg, "public", "1")
	s.Scan()
	if got := snd.take(); len(got) != 2 {
		t.Fatalf("public's activation reached %d subscribers, want 2", len(got))
	}
	activate(t, reg, "public", "2")
	s.Scan()
	s.Scan() // nothing new
	if got := snd.take(); len(got) != 2 || !strings.Contains(got[0].String(), `version="2"`) {
		t.Fatalf("new version: %v", got)
	}
	if err := reg.Deactivate(context.Background(), "public@agents.example"); err != nil {
		t.Fatal(err)
	}
	s.Scan()
	got = snd.take()
	if len(got) != 2 || !strings.Contains(got[0].String(), `active="false"`) {
		t.Fatalf("deactivation: %v", got)
	}
	if strings.Join(pr.changed, ",") != "secret@agents.example,public@agents.example,public@agents.example,public@agents.example" {
		t.Errorf("presence told of %v", pr.changed)
	}
	// Items: only what the requester may see.
	items := dispatch(t, r, "get", "romeo@example.org/pc", `<pubsub xmlns="`+ns.PubSub+`"><items node="`+ns.CatalogNode+`"/></pubsub>`)
	if strings.Contains(items.String(), "secret@") {
		t.Fatalf("romeo's items list a hidden endpoint: %s", items)
	}
	items = dispatch(t, r, "get", "juliet@example.net/phone", `<pubsub xmlns="`+ns.PubSub+`"><items node="`+ns.CatalogNode+`"/></pubsub>`)
	if !strings.Contains(items.String(), `id="secret@agents.example"`) {
		t.Fatalf("juliet's items: %s", items)
	}
	// Unsubscribed, romeo hears nothing more.
	if reply := dispatch(t, r, "set", "romeo@example.org/pc", `<pubsub xmlns="`+ns.PubSub+`"><unsubscribe node="`+ns.CatalogNode+`" jid="romeo@example.org/pc"/></pubsub>`); reply.AttrValue("type") != "result" {
		t.Fatalf("unsubscribe: %s", reply)
	}
	activate(t, reg, "public", "3")
	s.Scan()
	if got := snd.take(); len(got) != 1 || got[0].AttrValue("to") != "juliet@example.net/phone" {
		t.Fatalf("after unsubscribe: %v", got)
	}
}

func TestSubscriptionBounds(t *testing.T) {
	_, s, _, _, r := setup(t)
	for i := range 20 {
		from := "juliet@example.net/r" + string(rune('a'+i))
		reply := dispatch(t, r, "set", from, sub(ns.CatalogNode, from))
		if i < 16 && reply.AttrValue("type") != "result" {
			t.Fatalf("subscription %d refused: %s", i, reply)
		}
		if i >= 16 && !strings.Contains(reply.String(), "resource-constraint") {
			t.Fatalf("subscription %d beyond the bound: %s", i, reply)
		}
	}
	// Subscribing again is idempotent.
	dispatch(t, r, "set", "juliet@example.net/ra", sub(ns.CatalogNode, "juliet@example.net/ra"))
	if n := s.Subscriptions(); n != 16 {
		t.Fatalf("%d subscriptions", n)
	}
}
