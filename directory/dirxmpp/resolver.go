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
	active := r.active(ep)
	canSee := r.policy.CanSee(requester.Bare().String(), ep)
	return exists, exists && active && canSee
}

// active asks a Registry's index (ActiveVersion) rather than Active, which
// over a large directory would read and parse the manifest from the store
// to route one stanza.
func (r resolver) active(ep string) bool {
	if av, ok := r.reader.(interface {
		ActiveVersion(string) (string, string, bool)
	}); ok {
		_, _, a := av.ActiveVersion(ep)
		return a
	}
	_, a := r.reader.Active(ep)
	return a
}
