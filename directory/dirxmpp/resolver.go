package dirxmpp

import (
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/federation"
)

// NewResolver tells the router whether an endpoint exists (it has any
// registered version) and whether the requester may see it (it has an
// active version and the policy lets the requester see it). All three
// lookups run on every call, so a hidden endpoint costs what a nonexistent
// one costs.
func NewResolver(reader directory.Reader, policy *federation.Policy) component.EndpointResolver {
	if reader == nil || policy == nil {
		panic("dirxmpp: NewResolver needs a reader and a policy")
	}
	return resolver{reader: reader, policy: policy}
}

type resolver struct {
	reader directory.Reader
	policy *federation.Policy
}

var _ component.EndpointResolver = resolver{}

func (r resolver) Resolve(requester, endpoint jid.JID) (exists, visible bool) {
	ep := endpoint.Bare().String()
	exists = r.reader.Exists(ep)
	_, active := r.reader.Active(ep)
	canSee := r.policy.CanSee(requester.Bare().String(), ep)
	return exists, exists && active && canSee
}
