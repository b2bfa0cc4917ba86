package directory

import (
	"context"
	"sync"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// presenceTypes records the types of the presence stanzas from one JID.
type presenceTypes struct {
	from string
	mu   sync.Mutex
	got  []string
}

func (p *presenceTypes) add(el *xmltree.Element) {
	if f, err := jid.Parse(el.AttrValue("from")); err != nil || f.Bare().String() != p.from {
		return
	}
	typ := el.AttrValue("type")
	if typ == "" {
		typ = "available"
	}
	p.mu.Lock()
	p.got = append(p.got, typ)
	p.mu.Unlock()
}

// count is how many stanzas of typ arrived.
func (p *presenceTypes) count(typ string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, t := range p.got {
		if t == typ {
			n++
		}
	}
	return n
}

// TestPresenceSubscriberSurvivesRestart: alice subscribes to an
// endpoint's presence through Prosody and stays online while the gateway
// restarts. Her server does not probe again (she did not log in again),
// so only a gateway that kept her subscription tells her anything: after
// the restart she gets the endpoint's availability when the component
// reconnects, and unavailable when the backend goes down. Before the
// store kept subscribers, the restarted gateway had forgotten her and
// sent neither.
func TestPresenceSubscriberSurvivesRestart(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep := e.Endpoint("weather").String()
	_, conn := e.DialConn("alice")
	pres := &presenceTypes{from: ep}
	conn.OnPresence(pres.add)
	if err := conn.Send(ctx, xmltree.New("jabber:client", "presence", "type", "subscribe", "to", ep)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "available presence after subscribing", func() bool { return pres.count("available") >= 1 })
	if n := e.Gateway.Presence.Subscribers(ep); n != 1 {
		t.Fatalf("%d subscribers remembered, want 1", n)
	}

	e.StopGateway()
	before := pres.count("available")
	e.StartGateway()
	testkit.WaitFor(t, 30*time.Second, "available presence when the restarted gateway reconnects", func() bool {
		return pres.count("available") > before
	})
	e.Gateway.Presence.SetAvailable(ep, false)
	testkit.WaitFor(t, 20*time.Second, "unavailable presence when the backend goes down after the restart", func() bool {
		return pres.count("unavailable") >= 1
	})
	e.Gateway.Presence.SetAvailable(ep, true)
	testkit.WaitFor(t, 20*time.Second, "available presence when it comes back", func() bool {
		return pres.count("available") > before+1
	})

	// Unsubscribing forgets her, in the store too: the next restart and
	// the next change tell her nothing.
	if err := conn.Send(ctx, xmltree.New("jabber:client", "presence", "type", "unsubscribe", "to", ep)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the subscription forgotten", func() bool { return e.Gateway.Presence.Subscribers(ep) == 0 })
}
