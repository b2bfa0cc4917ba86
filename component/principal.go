package component

import (
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// NSPrincipal is agentgw's trusted-front principal assertion
// (docs/oauth.md, "The principal assertion"): a front that serves many
// users through one XMPP account (`agentgw mcp --http`, `agentgw a2a`
// with an OAuth issuer) names, inside the payload of each IQ it sends,
// the bare JID of the user it acts for:
//
//	<invoke xmlns='urn:xmpp:agent-invoke:0' ...>
//	  ...
//	  <on-behalf-of xmlns='urn:agentgw:principal:0' jid='alice@example.test'/>
//	</invoke>
//
// The gateway accepts it only from a bare JID the operator lists in
// [policy] trusted_fronts; then that principal, not the sender, is the
// requester for visibility, invocation rights, rate limits and task
// ownership. From anyone else it is refused with forbidden.
const NSPrincipal = ns.Principal

// principalText is the one refusal of an assertion from an account that is
// not a trusted front: the same bytes whatever principal was claimed.
const principalText = "Only a trusted front may act on behalf of another principal."

// SetTrustedFronts installs the check of who may assert a principal
// (NSPrincipal), and of which principals may be asserted at all (nil: any
// bare JID). Without it every assertion is refused.
func (r *Router) SetTrustedFronts(trusted func(front jid.JID) bool, assertable func(principal jid.JID) bool) {
	r.trusted, r.assertable = trusted, assertable
}

// principal applies a principal assertion in iq's payload: it removes the
// element, so no handler sees it, and, when the sender is a trusted front,
// returns iq with From the principal and Via the sender. An assertion from
// anyone else is forbidden; a malformed one, or two, a bad request.
func (r *Router) principal(iq IQ) (IQ, error) {
	if iq.Payload == nil {
		return iq, nil
	}
	var found []*xmltree.Element
	kept := iq.Payload.Children[:0:0]
	for _, ch := range iq.Payload.Children {
		if ch.Name.Space == NSPrincipal {
			found = append(found, ch)
			continue
		}
		kept = append(kept, ch)
	}
	if len(found) == 0 {
		return iq, nil
	}
	// A copy of the payload without the assertion: the stanza tree
	// itself stays as received.
	p := *iq.Payload
	p.Children = kept
	iq.Payload = &p
	if r.trusted == nil || !r.trusted(iq.From.Bare()) {
		return iq, agentproto.ErrForbidden(principalText)
	}
	if len(found) != 1 || found[0].Name.Local != "on-behalf-of" {
		return iq, agentproto.ErrBadRequest("One on-behalf-of element is expected.")
	}
	who, err := jid.Parse(found[0].AttrValue("jid"))
	if err != nil || who.Resourcepart() != "" || who.Domainpart() == "" {
		return iq, agentproto.ErrBadRequest("The principal must be a bare JID.")
	}
	if r.assertable != nil && !r.assertable(who) {
		return iq, agentproto.ErrForbidden("This principal cannot be asserted by a front.")
	}
	iq.Via, iq.From = iq.From, who
	return iq, nil
}

// ReplyTo is where the answer to iq and the events of what it starts go:
// the sender of the stanza (the trusted front when a principal was
// asserted).
func (iq IQ) ReplyTo() jid.JID {
	if iq.Via.String() != "" {
		return iq.Via
	}
	return iq.From
}
