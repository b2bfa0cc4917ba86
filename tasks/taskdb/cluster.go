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
