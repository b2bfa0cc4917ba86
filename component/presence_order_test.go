package component_test

import (
	"context"
	"crypto/tls"
	"slices"
	"sync"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/component/componenttest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// TestProsodyPresenceOfOneAccountInOrder: the component subscribes to an
// account that is not yet subscribed (Self Registration's follow). Prosody
// answers at once with <presence type="unavailable"/> from the account's
// bare JID ("acknowledging receipt", mod_presence), delivers the request,
// and after the account's approval sends the presence of each of its
// resources from their full JIDs. Those must reach the presence handlers
// in that order: handled out of order, the bare "unavailable" erases the
// account's resources after they were seen online, and a self-registered
// endpoint is not listed although it is online. The handler holds the bare
// "unavailable" for a while so that any later presence of the account that
// were handled meanwhile (on another worker) would overtake it.
func TestProsodyPresenceOfOneAccountInOrder(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	cfg := componentConfig(t, srv)
	r := component.NewRouter(cfg.Domain, resolver{}, testLogger(t))
	account := "bob@" + srv.Domain

	var (
		mu        sync.Mutex
		order     []string // "unavailable (bare)" or "available <resource>"
		held      bool
		available = make(chan struct{})
		availOnce sync.Once
	)
	r.HandlePresence(func(_ context.Context, pr component.Presence) {
		if pr.From.Bare().String() != account {
			return
		}
		switch {
		case pr.Type == "unavailable" && pr.From.Resourcepart() == "":
			mu.Lock()
			first := !held
			held = true
			mu.Unlock()
			if first {
				select {
				case <-available:
				case <-time.After(3 * time.Second):
				}
			}
			mu.Lock()
			order = append(order, "unavailable (bare)")
			mu.Unlock()
		case pr.Type == "" && pr.From.Resourcepart() != "":
			mu.Lock()
			order = append(order, "available "+pr.From.Resourcepart())
			mu.Unlock()
			availOnce.Do(func() { close(available) })
		}
	})
	comp := componenttest.Start(t, cfg, r)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := srv.Register(ctx, "bob", "pw-bob"); err != nil {
		t.Fatal(err)
	}
	// Several resources, so that whatever the sharding of inbound stanzas
	// some presence of the account would be handled by another worker than
	// its bare "unavailable" if the order were kept per full JID only.
	resources := []string{"r1", "r2", "r3", "r4"}
	var approver *xmppclient.Client
	approverReady := make(chan struct{})
	approved := make(chan struct{})
	var approveOnce sync.Once
	for i, res := range resources {
		o := xmppclient.Options{
			JID: account + "/" + res, Password: "pw-bob", Server: srv.C2SAddr,
			TLS: &tls.Config{InsecureSkipVerify: true}, IQTimeout: 15 * time.Second, Presence: true,
		}
		if i == 0 {
			o.OnPresence = func(el *xmltree.Element) {
				if el.AttrValue("type") != "subscribe" {
					return
				}
				approveOnce.Do(func() {
					<-approverReady
					_ = approver.Send(context.Background(), xmltree.New(xmppclient.NS, "presence", "type", "subscribed", "to", cfg.Domain.String()))
					close(approved)
				})
			}
		}
		c, err := xmppclient.Dial(ctx, o)
		if err != nil {
			t.Fatalf("dial %s: %v", res, err)
		}
		if i == 0 {
			approver = c
			close(approverReady)
		}
	}
	if err := comp.Send(ctx, component.NewPresence("subscribe", cfg.Domain, jid.MustParse(account))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-approved:
	case <-ctx.Done():
		t.Fatal("the subscription request never reached the account")
	}
	testkit.WaitFor(t, 30*time.Second, "every resource's presence", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 1+len(resources)
	})
	mu.Lock()
	defer mu.Unlock()
	if i := slices.Index(order, "unavailable (bare)"); i != 0 {
		t.Fatalf("presence of %s handled out of order: %q (the bare unavailable was sent first)", account, order)
	}
}
