package messaging

import (
	"context"
	"time"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// nsBlocking is XEP-0191's namespace and disco feature.
const nsBlocking = "urn:xmpp:blocking"

// CheckBlocking asks each server domain (the deployment's local domains)
// whether it implements XEP-0191 and logs a warning for each that does
// not or cannot say: a component cannot see blocklists, so only the
// recipients' server can keep a blocked agent's messages out (see
// docs/messaging.md, Blocking). The feature is advisory, not proof of
// enforcement for component senders (verified for Prosody and ejabberd).
// It returns the answers by domain. Call it after the stream is up.
func (s *Service) CheckBlocking(ctx context.Context, domains []string) map[string]bool {
	out := map[string]bool{}
	for _, d := range domains {
		ok, err := s.serverBlocks(ctx, d)
		out[d] = ok
		switch {
		case err != nil:
			s.log.Warn("could not ask the XMPP server whether it enforces XEP-0191 blocking; people who block an agent may still get its chat messages", "server", d, "err", err)
		case ok:
			s.log.Info("the XMPP server advertises XEP-0191 blocking", "server", d)
		default:
			s.log.Warn("the XMPP server does not advertise XEP-0191 blocking (urn:xmpp:blocking): its users who block an agent still get the agent's chat messages; enable mod_blocklist (Prosody) or mod_blocking (ejabberd)", "server", d)
		}
	}
	return out
}

func (s *Service) serverBlocks(ctx context.Context, domain string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	iq := xmltree.New(component.NSComponent, "iq", "type", "get", "id", ids.New("blk-"),
		"from", s.o.Domain.String(), "to", domain)
	iq.Add(xmltree.New(ns.DiscoInfo, "query"))
	res, err := s.o.Sender.SendIQ(ctx, iq)
	if err != nil {
		return false, err
	}
	for _, f := range res.Child(ns.DiscoInfo, "query").ChildrenNamed(ns.DiscoInfo, "feature") {
		if f.AttrValue("var") == nsBlocking {
			return true, nil
		}
	}
	return false, nil
}
