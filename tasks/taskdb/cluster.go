package taskdb

import (
	"context"
	"time"
)

// Instance is one gateway instance's lease on a shared task store.
type Instance struct {
	Name    string
	Joined  time.Time // when this incarnation joined
	Expires time.Time // lease expiry, on the database's clock
	// Live reports whether the lease had not expired when it was read
	// (compared on the database's clock, so instance clocks may drift).
	Live bool
	// Unsettled is the number of non-terminal tasks it owns.
	Unsettled int
}

// Cluster is implemented by task drivers that several gateway instances
// share (store/pg). Every non-terminal task is owned by one instance,
// whose renewable lease lives in the same database as the tasks, so that
// taking over a dead instance's tasks is one guarded transaction. The
// engine uses it when its Config.Cluster is set; a single-instance driver
// (store/sqlite) needs none of it.
type Cluster interface {
	// Join takes name's lease for ttl from the database's now,
	// unconditionally: a restarted instance reclaims its name and with it
	// its unsettled tasks (recovered as after any restart). It also
	// adopts unsettled tasks stored without an owner.
	Join(ctx context.Context, name string, ttl time.Duration) error
	// Renew extends name's lease by ttl if it is still live. It reports
	// false once the lease had expired: a survivor may have taken the
	// tasks over, so the instance must stop executing (fencing).
	Renew(ctx context.Context, name string, ttl time.Duration) (bool, error)
	// Leave expires name's lease now (a clean shutdown), so survivors take
	// its unsettled tasks over at their next scan.
	Leave(ctx context.Context, name string) error
	// Instances lists every instance that ever joined, by name.
	Instances(ctx context.Context) ([]Instance, error)
	// Owned lists the non-terminal tasks owner owns, oldest first.
	Owned(ctx context.Context, owner string) ([]Task, error)
	// TakeOver moves every non-terminal task of dead to owner, in one
	// transaction that locks dead's lease row and proceeds only if that
	// lease has expired on the database's clock. It returns the moved
	// tasks: none when dead is live, unknown, or another survivor moved
	// them first. The same dead instance may be taken over again later
	// (tasks it admitted while it still thought itself live).
	TakeOver(ctx context.Context, dead, owner string) ([]Task, error)
}

// Signals is the durable queue of notices from one instance to a task's
// owner (cancel, input answer, "dispatch this"), implemented by a Cluster
// driver. A notice is written in the same transaction as the commit it
// announces (ClusterTx.EnqueueSignal), so it exists exactly when that
// commit does; the owner takes each one exactly once. The bus only says
// "look now": a lost hint delays a notice until the owner's next sweep.
type Signals interface {
	// TakeSignals removes and returns up to max notices queued for
	// owner, oldest first.
	TakeSignals(ctx context.Context, owner string, max int) ([][]byte, error)
}

// ClusterTx is implemented by the write transaction of a Cluster driver:
// what makes admission limits hold for the cluster rather than per
// instance (docs/cluster.md, "Cluster-wide limits").
type ClusterTx interface {
	// Serialize takes the cluster-wide commit lock, held until the
	// transaction ends, so that the counts below see every other
	// instance's committed admissions and dispatches and no other
	// instance can commit one in between. It returns once the lock is
	// held.
	Serialize() error
	// CountActive counts the non-terminal tasks of the whole store, of
	// caller, and of callers in domain ("" counts none), including this
	// transaction's own writes.
	CountActive(caller, domain string) (all, byCaller, byDomain int64, err error)
	// CountRunning counts the dispatched non-terminal tasks of endpoint.
	CountRunning(endpoint string) (int64, error)
	// EnqueueSignal queues payload for owner, committed with the
	// transaction.
	EnqueueSignal(owner string, payload []byte) error
}
