package gateway

import (
	"fmt"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/internal/config"
)

// approvals is the trusted local policy for approvalRequired and
// requiredPermissions, from the [policy] section. Anything not listed
// fails closed.
type approvals struct {
	perms     map[string][]string
	approvals []config.Approval
}

// newApprovals normalizes the [policy] principals and endpoints once, so
// that a domain entry in any letter case matches; config.Validate has
// refused entries that are not principals, and one that still slipped
// through here is an error rather than a silently unmatched string.
func newApprovals(cfg *config.Config) (*approvals, error) {
	a := &approvals{perms: map[string][]string{}}
	for perm, list := range cfg.Policy.Permissions {
		l, err := config.ParsePrincipals(list)
		if err != nil {
			return nil, fmt.Errorf("[policy.permissions] %q: %w", perm, err)
		}
		a.perms[perm] = l
	}
	for _, ap := range cfg.Policy.Approvals {
		ep, err := jid.Parse(ap.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("[[policy.approvals]] endpoint %q: %w", ap.Endpoint, err)
		}
		l, err := config.ParsePrincipals(ap.Principals)
		if err != nil {
			return nil, fmt.Errorf("[[policy.approvals]] endpoint %s principals: %w", ap.Endpoint, err)
		}
		a.approvals = append(a.approvals, config.Approval{Endpoint: ep.Bare().String(), Tool: ap.Tool, Principals: l})
	}
	return a, nil
}

// Approved reports whether the operator approved the tool for principal.
func (a *approvals) Approved(principal, endpoint, tool string) bool {
	for _, ap := range a.approvals {
		if ap.Endpoint == endpoint && ap.Tool == tool && listed(ap.Principals, principal) {
			return true
		}
	}
	return false
}

// HasPermission reports whether principal holds perm.
func (a *approvals) HasPermission(principal, perm string) bool {
	return listed(a.perms[perm], principal)
}

// listed reports whether principal, or its domain, is in a normalized list.
func listed(list []string, principal string) bool {
	dom := federation.DomainOf(principal)
	for _, e := range list {
		if e == principal || e == dom {
			return true
		}
	}
	return false
}

// trustedFronts is [policy] trusted_fronts as the router's check: the bare
// JIDs that may assert a principal (component.NSPrincipal).
func trustedFronts(list []string) func(jid.JID) bool {
	set := map[string]bool{}
	for _, e := range list {
		if j, err := jid.Parse(e); err == nil {
			set[j.Bare().String()] = true
		}
	}
	return func(front jid.JID) bool { return set[front.Bare().String()] }
}
