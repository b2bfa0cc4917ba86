package agentclient

import (
	"context"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/xep/xmltree"
)

type nopConn struct{ onMsg func(*xmltree.Element) }

func (c *nopConn) SendIQ(context.Context, *xmltree.Element) (*xmltree.Element, error) {
	return nil, nil
}
func (c *nopConn) OnMessage(f func(*xmltree.Element)) { c.onMsg = f }
func (c *nopConn) JID() jid.JID                       { return jid.MustParse("alice@example.test/r") }

func catalogMsg(t *testing.T, from, endpoint string) *xmltree.Element {
	t.Helper()
	el, err := xmltree.Parse([]byte(`<message xmlns="jabber:client" type="headline" from="`+from+`"><event xmlns="http://jabber.org/protocol/pubsub#event"><items node="urn:agentgw:catalog:0"><item id="x"><change xmlns="urn:agentgw:catalog:0" endpoint="`+endpoint+`" active="true" version="2"/></item></items></event></message>`), xmltree.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return el
}

// Only a gateway domain speaks for its own endpoints: items from an
// endpoint or user JID, or naming another domain's endpoint, are dropped.
func TestCatalogEvent(t *testing.T) {
	conn := &nopConn{}
	c := New(conn, nil)
	var got []CatalogChange
	c.OnCatalogChange(func(ch CatalogChange) { got = append(got, ch) })
	conn.onMsg(catalogMsg(t, "agents.example.test", "weather@agents.example.test"))
	conn.onMsg(catalogMsg(t, "mallory@example.test/x", "weather@agents.example.test"))
	conn.onMsg(catalogMsg(t, "weather@agents.example.test", "weather@agents.example.test"))
	conn.onMsg(catalogMsg(t, "evil.example", "weather@agents.example.test"))
	if len(got) != 1 || got[0].Endpoint != "weather@agents.example.test" || !got[0].Active || got[0].Version != "2" || got[0].Gateway.String() != "agents.example.test" {
		t.Fatalf("changes %+v", got)
	}
}
