// Package federation decides who may see and who may invoke each endpoint.
// Principals of the configured local domains see and invoke everything
// unless an endpoint restricts them; every other domain sees and invokes
// nothing until an operator grants it, and visibility and invocation are
// granted separately.
package federation

import (
	"strings"
	"sync/atomic"
)

// Scope is what a grant allows.
type Scope int

const (
	ScopeVisibility Scope = 1 << iota
	ScopeInvocation
)

// EndpointRule restricts local principals for one endpoint. An empty list
// leaves the default (all local principals) in place.
type EndpointRule struct {
	VisibleTo   []string // bare JIDs or domains
	InvocableBy []string
}

// GrantSource answers whether a remote principal holds a grant. The
// trust-grant store implements it; nil means no grants at all.
type GrantSource interface {
	Granted(principal, endpoint string, scope Scope) bool
}

// Policy is the gateway's authorization policy. Its methods are safe for
// concurrent use and do the same work whatever the answer, so a denial is
// not faster than an allowance.
type Policy struct {
	local  map[string]bool
	admins map[string]bool
	rules  map[string]EndpointRule
	grants atomic.Pointer[grantHolder]
}

type grantHolder struct{ src GrantSource }

// New builds a policy. Domains and JIDs are compared case-insensitively in
// their domain part; callers pass normalized bare JIDs.
func New(localDomains, admins []string, rules map[string]EndpointRule) *Policy {
	p := &Policy{local: map[string]bool{}, admins: map[string]bool{}, rules: map[string]EndpointRule{}}
	for _, d := range localDomains {
		p.local[strings.ToLower(d)] = true
	}
	for _, a := range admins {
		p.admins[a] = true
	}
	for k, v := range rules {
		p.rules[k] = v
	}
	return p
}

// SetGrants installs the source of remote grants.
func (p *Policy) SetGrants(src GrantSource) { p.grants.Store(&grantHolder{src: src}) }

// DomainOf returns the domain part of a bare JID or domain.
func DomainOf(principal string) string {
	if i := strings.LastIndexByte(principal, '@'); i >= 0 {
		return principal[i+1:]
	}
	return principal
}

// IsLocal reports whether the principal belongs to a local domain.
func (p *Policy) IsLocal(principal string) bool {
	return p.local[strings.ToLower(DomainOf(principal))]
}

// IsAdmin reports whether the principal may administer the directory.
// Administration is never federated: only local admins qualify.
func (p *Policy) IsAdmin(principal string) bool {
	return p.IsLocal(principal) && p.admins[principal]
}

// CanSee reports whether principal may discover endpoint and read its
// metadata.
func (p *Policy) CanSee(principal, endpoint string) bool {
	return p.allowed(principal, endpoint, ScopeVisibility)
}

// CanInvoke reports whether principal may invoke endpoint's tools.
func (p *Policy) CanInvoke(principal, endpoint string) bool {
	return p.allowed(principal, endpoint, ScopeInvocation)
}

func (p *Policy) allowed(principal, endpoint string, scope Scope) bool {
	local := p.IsLocal(principal)
	rule, hasRule := p.rules[endpoint]
	var list []string
	if scope == ScopeVisibility {
		list = rule.VisibleTo
	} else {
		list = rule.InvocableBy
	}
	localOK := local && (!hasRule || len(list) == 0 || matches(list, principal))
	granted := false
	if h := p.grants.Load(); h != nil && h.src != nil {
		granted = h.src.Granted(principal, endpoint, scope)
	}
	if local {
		return localOK
	}
	return granted
}

func matches(list []string, principal string) bool {
	dom := DomainOf(principal)
	hit := false
	for _, e := range list {
		if e == principal || strings.EqualFold(e, dom) {
			hit = true
		}
	}
	return hit
}

// principalGrants is implemented by grant sources that can resolve one
// principal's grants once (GrantTable does).
type principalGrants interface {
	ForPrincipal(principal string) func(endpoint string, scope Scope) bool
}

// VisibleFunc returns CanSee for one principal, with the principal's
// locality and grants resolved once: a directory page tests every endpoint.
func (p *Policy) VisibleFunc(principal string) func(endpoint string) bool {
	local := p.IsLocal(principal)
	granted := func(string, Scope) bool { return false }
	if h := p.grants.Load(); h != nil && h.src != nil {
		if pg, ok := h.src.(principalGrants); ok {
			granted = pg.ForPrincipal(principal)
		} else {
			granted = func(ep string, s Scope) bool { return h.src.Granted(principal, ep, s) }
		}
	}
	return func(endpoint string) bool {
		g := granted(endpoint, ScopeVisibility)
		if !local {
			return g
		}
		rule, hasRule := p.rules[endpoint]
		return !hasRule || len(rule.VisibleTo) == 0 || matches(rule.VisibleTo, principal)
	}
}
