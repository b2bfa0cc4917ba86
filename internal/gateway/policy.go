package gateway

import (
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

func newApprovals(cfg *config.Config) *approvals {
	return &approvals{perms: cfg.Policy.Permissions, approvals: cfg.Policy.Approvals}
}

// Approved reports whether the operator approved the tool for principal.
func (a *approvals) Approved(principal, endpoint, tool string) bool {
	for _, ap := range a.approvals {
		if bare(ap.Endpoint) == endpoint && ap.Tool == tool && listed(ap.Principals, principal) {
			return true
		}
	}
	return false
}

// HasPermission reports whether principal holds perm.
func (a *approvals) HasPermission(principal, perm string) bool {
	return listed(a.perms[perm], principal)
}

func listed(list []string, principal string) bool {
	dom := federation.DomainOf(principal)
	for _, e := range list {
		if bare(e) == principal || e == dom {
			return true
		}
	}
	return false
}

func bare(s string) string {
	j, err := jid.Parse(s)
	if err != nil {
		return s
	}
	return j.Bare().String()
}
