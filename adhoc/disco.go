package adhoc

import (
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// The disco side of the commands. dirxmpp owns disco at endpoints and asks
// these for the nodes it does not own; the router has already checked that
// the requester may see the endpoint, so hidden and nonexistent endpoints
// never get here and answer alike.

// NodeItems lists the commands at the commands node: every tool of the
// active manifest, when the requester may invoke the endpoint (an empty
// list otherwise). Command nodes are leaves.
func (s *Service) NodeItems(requester, endpoint, node string) (*xmltree.Element, bool) {
	if node != ns.Commands {
		if _, _, err := s.tool(requester, endpoint, node); err != nil || node == "" {
			return nil, false
		}
		return xmltree.New(ns.DiscoItems, "query", "node", node), true
	}
	q := xmltree.New(ns.DiscoItems, "query", "node", ns.Commands)
	m, ok := s.d.Reader.Active(endpoint)
	if !ok || !s.d.Policy.CanInvoke(requester, endpoint) || !s.runnable(endpoint) {
		return q, true
	}
	for i := range m.Tools {
		t := &m.Tools[i]
		if t.Name == ns.Commands {
			continue // would shadow the commands node itself
		}
		q.Add(xmltree.New(ns.DiscoItems, "item", "jid", endpoint, "node", t.Name, "name", xmltree.Sanitize(title(t))))
	}
	return q, true
}

// NodeInfo answers disco#info at the commands node and at a command node.
func (s *Service) NodeInfo(requester, endpoint, node string) (*xmltree.Element, bool) {
	q := xmltree.New(ns.DiscoInfo, "query", "node", node)
	if node == ns.Commands {
		q.Add(xmltree.New(ns.DiscoInfo, "identity", "category", "automation", "type", "command-list", "name", "Commands"))
		q.Add(xmltree.New(ns.DiscoInfo, "feature", "var", ns.DiscoInfo), xmltree.New(ns.DiscoInfo, "feature", "var", ns.DiscoItems))
		return q, true
	}
	_, t, err := s.tool(requester, endpoint, node)
	if err != nil || t.Name == ns.Commands {
		return nil, false
	}
	q.Add(xmltree.New(ns.DiscoInfo, "identity", "category", "automation", "type", ns.TypeCommand, "name", xmltree.Sanitize(title(t))))
	q.Add(xmltree.New(ns.DiscoInfo, "feature", "var", ns.Commands), xmltree.New(ns.DiscoInfo, "feature", "var", ns.Data))
	return q, true
}
