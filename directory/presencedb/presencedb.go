// Package presencedb is the store interface of the endpoints' presence
// subscribers: the bare JIDs that subscribed to (or probed) a virtual
// endpoint's presence and are told when its availability changes. Kept in
// the store, the set outlives a gateway restart (a subscriber who stays
// online is not probed again) and is shared by the members of a cluster
// (the member that sees a backend go down is not the one that took the
// subscription).
//
// Drivers: store/sqlite, store/pg, and Memory here (a gateway without a
// store). Conformance: store/storetest.
package presencedb

import (
	"context"
	"sort"
	"sync"
)

// Driver is the subscriber store. Every method is safe for concurrent use
// and atomic on its own.
type Driver interface {
	// Subscribe adds sub to endpoint's subscribers unless endpoint holds
	// max already; it reports whether sub is a subscriber now.
	Subscribe(ctx context.Context, endpoint, sub string, max int) (bool, error)
	// Unsubscribe removes sub and reports whether it was a subscriber.
	Unsubscribe(ctx context.Context, endpoint, sub string) (bool, error)
	// Subscribers lists endpoint's subscribers in octetwise order.
	Subscribers(ctx context.Context, endpoint string) ([]string, error)
	// Endpoints lists the endpoints that have subscribers, in octetwise
	// order.
	Endpoints(ctx context.Context) ([]string, error)
}

// Memory is a Driver in memory: the set lasts one process.
type Memory struct {
	mu   sync.Mutex
	subs map[string]map[string]struct{}
}

var _ Driver = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{subs: map[string]map[string]struct{}{}} }

func (m *Memory) Subscribe(_ context.Context, endpoint, sub string, max int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.subs[endpoint]
	if _, ok := set[sub]; ok {
		return true, nil
	}
	if len(set) >= max {
		return false, nil
	}
	if set == nil {
		set = map[string]struct{}{}
		m.subs[endpoint] = set
	}
	set[sub] = struct{}{}
	return true, nil
}

func (m *Memory) Unsubscribe(_ context.Context, endpoint, sub string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.subs[endpoint]
	if _, ok := set[sub]; !ok {
		return false, nil
	}
	delete(set, sub)
	if len(set) == 0 {
		delete(m.subs, endpoint)
	}
	return true, nil
}

func (m *Memory) Subscribers(_ context.Context, endpoint string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.subs[endpoint]))
	for s := range m.subs[endpoint] {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

func (m *Memory) Endpoints(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.subs))
	for ep := range m.subs {
		out = append(out, ep)
	}
	sort.Strings(out)
	return out, nil
}
