// Package cluster is what several gateway instances sharing one database
// need beside the task store's ownership (tasks/taskdb.Cluster): a Bus that
// carries small notifications between them, and named Leases that let one
// instance at a time hold a resource (a bridge's single connection per
// account or connector). Local implements both for a single instance (the
// SQLite default: in-process, always held); store/pg implements
// them over PostgreSQL (LISTEN/NOTIFY and a lease table).
package cluster

import (
	"context"
	"errors"
	"sync"
	"time"
)

// MaxPayload bounds one notification payload. PostgreSQL's NOTIFY takes
// under 8000 bytes; a driver carries a larger payload by reference.
const MaxPayload = 1 << 20

// Bus carries notifications between the instances sharing a store. Every
// subscriber of a channel, on every instance including the publisher's,
// receives each payload published after it subscribed, at most once and
// best effort: a notification is a hint to look at committed state, never
// the state itself.
type Bus interface {
	Publish(ctx context.Context, channel string, payload []byte) error
	// Subscribe calls fn for each payload on channel until stop is
	// called. fn runs on the bus's delivery goroutine and must not block.
	Subscribe(channel string, fn func(payload []byte)) (stop func())
}

// Lease is one named lease and its holder.
type Lease struct {
	Name    string
	Holder  string
	Expires time.Time // on the database's clock
	Live    bool
}

// Leases are named, renewable, expiring leases on the database's clock.
type Leases interface {
	// Acquire takes name for holder for ttl, or renews it when holder
	// holds it already; it reports whether holder holds it now and who
	// does.
	Acquire(ctx context.Context, name, holder string, ttl time.Duration) (held bool, current string, err error)
	// Release gives name up if holder holds it.
	Release(ctx context.Context, name, holder string) error
	// List returns every lease, by name.
	List(ctx context.Context) ([]Lease, error)
}

// Local is the Bus and Leases of a single instance: delivery in process,
// and every lease always granted to whoever asks.
type Local struct {
	mu   sync.Mutex
	subs map[string]map[*func([]byte)]bool
	held map[string]string
}

var (
	_ Bus    = (*Local)(nil)
	_ Leases = (*Local)(nil)
)

// NewLocal returns a single-instance Bus and Leases.
func NewLocal() *Local {
	return &Local{subs: map[string]map[*func([]byte)]bool{}, held: map[string]string{}}
}

// Publish delivers payload to this process's subscribers of channel.
func (l *Local) Publish(ctx context.Context, channel string, payload []byte) error {
	if len(payload) > MaxPayload {
		return errors.New("cluster: notification payload too large")
	}
	l.mu.Lock()
	var fns []func([]byte)
	for f := range l.subs[channel] {
		fns = append(fns, *f)
	}
	l.mu.Unlock()
	for _, f := range fns {
		f(append([]byte(nil), payload...))
	}
	return nil
}

// Subscribe registers fn for channel.
func (l *Local) Subscribe(channel string, fn func([]byte)) func() {
	p := &fn
	l.mu.Lock()
	if l.subs[channel] == nil {
		l.subs[channel] = map[*func([]byte)]bool{}
	}
	l.subs[channel][p] = true
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.subs[channel], p)
		l.mu.Unlock()
	}
}

// Acquire always grants: a single instance holds every lease.
func (l *Local) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (bool, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[name] = holder
	return true, holder, nil
}

// Release forgets name.
func (l *Local) Release(ctx context.Context, name, holder string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[name] == holder {
		delete(l.held, name)
	}
	return nil
}

// List returns the leases taken in this process.
func (l *Local) List(ctx context.Context) ([]Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Lease
	for n, h := range l.held {
		out = append(out, Lease{Name: n, Holder: h, Live: true})
	}
	return out, nil
}
