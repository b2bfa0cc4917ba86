package federation

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Grant lets a remote principal (a bare JID or a whole domain) see and/or
// invoke one endpoint, or every endpoint when Endpoint is empty.
type Grant struct {
	Principal string
	Endpoint  string
	Scope     Scope
	Created   time.Time
}

// ScopeString names a scope for operators: "visibility", "invocation" or
// "visibility+invocation".
func ScopeString(s Scope) string {
	var parts []string
	if s&ScopeVisibility != 0 {
		parts = append(parts, "visibility")
	}
	if s&ScopeInvocation != 0 {
		parts = append(parts, "invocation")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// GrantStore is the driver interface of the grants, one method per query:
// store/sqlite implements it, a PostgreSQL driver can later, and
// store/storetest is the conformance suite both pass.
type GrantStore interface {
	// Grant merges g's scope into any existing grant for the same
	// principal and endpoint. A scope outside visibility|invocation, or
	// none, is an error.
	Grant(ctx context.Context, g Grant) error
	// Revoke removes the given scope bits and deletes the grant when none
	// remain; removed reports whether any bit was held.
	Revoke(ctx context.Context, principal, endpoint string, scope Scope) (removed bool, err error)
	// List returns every grant ordered by principal, then endpoint.
	List(ctx context.Context) ([]Grant, error)
	// Generation changes whenever any grant changes, also from another
	// process.
	Generation(ctx context.Context) (int64, error)
}

// GrantTable is an in-memory snapshot of the grants that answers Granted
// without touching the database, refreshed by Watch.
type GrantTable struct {
	store GrantStore
	snap  atomic.Pointer[grantSnapshot]
	gen   atomic.Int64

	kickOnce sync.Once
	kick     chan struct{} // see Kick
}

type grantSnapshot struct {
	// byPrincipal maps principal → endpoint ("" = all) → scope.
	byPrincipal map[string]map[string]Scope
}

// NewGrantTable loads the grants once.
func NewGrantTable(ctx context.Context, st GrantStore) (*GrantTable, error) {
	t := &GrantTable{store: st}
	t.gen.Store(-1)
	if err := t.Reload(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload rereads every grant if the store's generation moved.
func (t *GrantTable) Reload(ctx context.Context) error {
	gen, err := t.store.Generation(ctx)
	if err != nil {
		return err
	}
	if gen == t.gen.Load() {
		return nil
	}
	list, err := t.store.List(ctx)
	if err != nil {
		return err
	}
	s := &grantSnapshot{byPrincipal: map[string]map[string]Scope{}}
	for _, g := range list {
		key := normalizePrincipal(g.Principal)
		m := s.byPrincipal[key]
		if m == nil {
			m = map[string]Scope{}
			s.byPrincipal[key] = m
		}
		m[g.Endpoint] |= g.Scope
	}
	t.snap.Store(s)
	t.gen.Store(gen)
	return nil
}

// Watch reloads every interval until ctx ends, so grants and revocations
// made by `agentgw trust` take effect without a restart.
func (t *GrantTable) Watch(ctx context.Context, every time.Duration, onErr func(error)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	kick := t.kickCh()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-kick:
		}
		if err := t.Reload(ctx); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
	}
}

// Kick makes Watch reload now rather than at its next tick: the store
// announced a change (in cluster mode, a NOTIFY from another member).
func (t *GrantTable) Kick() {
	select {
	case t.kickCh() <- struct{}{}:
	default:
	}
}

func (t *GrantTable) kickCh() chan struct{} {
	t.kickOnce.Do(func() { t.kick = make(chan struct{}, 1) })
	return t.kick
}

// Granted implements GrantSource. It consults both the principal's bare JID
// and its domain, and both the endpoint and the all-endpoints grant, every
// time, so the work does not depend on the answer.
func (t *GrantTable) Granted(principal, endpoint string, scope Scope) bool {
	s := t.snap.Load()
	if s == nil {
		return false
	}
	var got Scope
	for _, p := range [2]string{normalizePrincipal(principal), normalizePrincipal(DomainOf(principal))} {
		m := s.byPrincipal[p]
		got |= m[endpoint] | m[""]
	}
	return got&scope == scope
}

// normalizePrincipal lower-cases the domain part; localparts are already
// normalized by JID parsing.
func normalizePrincipal(p string) string {
	if i := strings.LastIndexByte(p, '@'); i >= 0 {
		return p[:i+1] + strings.ToLower(p[i+1:])
	}
	return strings.ToLower(p)
}

// SortGrants orders grants for display.
func SortGrants(gs []Grant) {
	sort.Slice(gs, func(i, j int) bool {
		if gs[i].Principal != gs[j].Principal {
			return gs[i].Principal < gs[j].Principal
		}
		return gs[i].Endpoint < gs[j].Endpoint
	})
}

// ForPrincipal resolves a principal's grants once and returns a check for
// many endpoints, for directory pages that test every endpoint.
func (t *GrantTable) ForPrincipal(principal string) func(endpoint string, scope Scope) bool {
	s := t.snap.Load()
	if s == nil {
		return func(string, Scope) bool { return false }
	}
	byJID := s.byPrincipal[normalizePrincipal(principal)]
	byDomain := s.byPrincipal[normalizePrincipal(DomainOf(principal))]
	return func(endpoint string, scope Scope) bool {
		got := byJID[endpoint] | byJID[""] | byDomain[endpoint] | byDomain[""]
		return got&scope == scope
	}
}
