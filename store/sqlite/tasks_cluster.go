package sqlite

import (
	"context"
	"time"

	"github.com/agentgw/agentgw/tasks/taskdb"
)

// The SQLite store belongs to one process, so its cluster is that one
// instance: the lease lives in memory, every unsettled task is its own, and
// there is never anyone to take over from.

var _ taskdb.Cluster = (*Tasks)(nil)

// Join records the one instance's lease.
func (d *Tasks) Join(ctx context.Context, name string, ttl time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.instance, d.joined, d.expires = name, time.Now().UTC(), time.Now().UTC().Add(ttl)
	return nil
}

// Renew extends the lease of the instance that joined.
func (d *Tasks) Renew(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.instance != name {
		return false, nil
	}
	d.expires = time.Now().UTC().Add(ttl)
	return true, nil
}

// Leave forgets the lease.
func (d *Tasks) Leave(ctx context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.instance == name {
		d.expires = time.Now().UTC()
	}
	return nil
}

// Instances lists the one instance that joined.
func (d *Tasks) Instances(ctx context.Context) ([]taskdb.Instance, error) {
	d.mu.Lock()
	name, joined, exp := d.instance, d.joined, d.expires
	d.mu.Unlock()
	if name == "" {
		return nil, nil
	}
	u, err := d.Unsettled(ctx)
	if err != nil {
		return nil, err
	}
	return []taskdb.Instance{{Name: name, Joined: joined, Expires: exp, Live: time.Now().Before(exp), Unsettled: len(u)}}, nil
}

// Owned is every unsettled task: the file has one owner.
func (d *Tasks) Owned(ctx context.Context, owner string) ([]taskdb.Task, error) {
	return d.Unsettled(ctx)
}

// TakeOver never moves anything: there is no other instance.
func (d *Tasks) TakeOver(ctx context.Context, dead, owner string) ([]taskdb.Task, error) {
	return nil, nil
}
