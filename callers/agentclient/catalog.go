package agentclient

import (
	"context"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// CatalogChange is one item of a gateway's catalog change node
// (urn:agentgw:catalog:0, agentgw's PubSub extension; docs/adhoc.md).
type CatalogChange struct {
	Gateway  jid.JID
	Endpoint string
	Active   bool
	Version  string
}

// SubscribeCatalog subscribes this connection (its full JID) to gw's
// catalog change node. Subscribing again is harmless; a gateway keeps
// subscriptions in memory only, so callers subscribe again after a
// reconnect or periodically.
func (c *Client) SubscribeCatalog(ctx context.Context, gw jid.JID) error {
	me := c.JID().String()
	p := xmltree.New(ns.PubSub, "pubsub").Add(xmltree.New(ns.PubSub, "subscribe", "node", ns.CatalogNode, "jid", me))
	_, err := c.iq(ctx, "set", gw.Domain(), p)
	return err
}

// OnCatalogChange sets the callback for catalog change items. It runs on
// the message goroutine and must not block. Only items from a gateway
// domain (a JID without localpart) are delivered.
func (c *Client) OnCatalogChange(f func(CatalogChange)) {
	c.catalogMu.Lock()
	c.onCatalog = f
	c.catalogMu.Unlock()
}

// catalogEvent delivers the catalog items of m and reports whether m was a
// catalog event.
func (c *Client) catalogEvent(m *xmltree.Element) bool {
	ev := m.Child(ns.PubSubEvent, "event")
	if ev == nil {
		return false
	}
	items := ev.Child(ns.PubSubEvent, "items")
	if items == nil || items.AttrValue("node") != ns.CatalogNode {
		return false
	}
	from, err := jid.Parse(m.AttrValue("from"))
	if err != nil || from.Localpart() != "" || from.Resourcepart() != "" {
		return true
	}
	c.catalogMu.Lock()
	f := c.onCatalog
	c.catalogMu.Unlock()
	if f == nil {
		return true
	}
	for _, it := range items.ChildrenNamed(ns.PubSubEvent, "item") {
		ch := it.Child(ns.Catalog, "change")
		if ch == nil {
			continue
		}
		ep, err := jid.Parse(ch.AttrValue("endpoint"))
		if err != nil || ep.Domainpart() != from.Domainpart() {
			continue // a gateway speaks only for its own endpoints
		}
		f(CatalogChange{Gateway: from, Endpoint: ep.Bare().String(), Active: ch.AttrValue("active") == "true", Version: ch.AttrValue("version")})
	}
	return true
}
