package pg

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/tasks/taskdb"
)

// Cluster-wide limits and the durable notice queue (migration
// 0210_cluster_limits.sql, docs/cluster.md).

var (
	_ taskdb.ClusterTx = (*TaskTx)(nil)
	_ taskdb.Signals   = (*Tasks)(nil)
)

// LimitsLock is the advisory lock key of the cluster-wide commit lock
// ("agwlim"): every cluster member's group commit holds it, so counts taken
// under it are exact for the whole cluster.
const LimitsLock = 0x6167_776c_696d

// Serialize sends BEGIN and the lock now and returns once the lock is
// held, so the engine can add the operations queued meanwhile to the
// batch.
func (t *TaskTx) Serialize() error {
	if _, err := t.exec(fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, int64(LimitsLock))); err != nil {
		return fmt.Errorf("taskpg: cluster commit lock: %w", err)
	}
	return nil
}

// CountActive reads the non-terminal task counts (task_counts, kept by
// trigger): all, caller's, and those of callers in domain (the part after
// the last '@', as the engine's remoteDomain takes it).
func (t *TaskTx) CountActive(caller, domain string) (all, byCaller, byDomain int64, err error) {
	err = t.queryRow(`SELECT
			coalesce(sum(n) FILTER (WHERE kind = 'all'), 0),
			coalesce(sum(n) FILTER (WHERE kind = 'caller'), 0),
			coalesce(sum(n) FILTER (WHERE kind = 'domain'), 0)
		FROM task_counts WHERE (kind = 'all' AND key = '') OR (kind = 'caller' AND key = $1)
			OR (kind = 'domain' AND key = $2 AND $2 <> '')`, caller, domain).Scan(&all, &byCaller, &byDomain)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("taskpg: count active: %w", err)
	}
	return all, byCaller, byDomain, nil
}

// CountRunning reads endpoint's dispatched non-terminal task count.
func (t *TaskTx) CountRunning(endpoint string) (int64, error) {
	var n int64
	if err := t.queryRow(`SELECT coalesce(sum(n), 0) FROM task_counts WHERE kind = 'running' AND key = $1`, endpoint).Scan(&n); err != nil {
		return 0, fmt.Errorf("taskpg: count running: %w", err)
	}
	return n, nil
}

// EnqueueSignal queues a notice for owner in this transaction.
func (t *TaskTx) EnqueueSignal(owner string, payload []byte) error {
	if _, err := t.exec(`INSERT INTO task_signals(owner, payload) VALUES ($1, $2)`, owner, payload); err != nil {
		return fmt.Errorf("taskpg: enqueue signal: %w", err)
	}
	return nil
}

// TakeSignals deletes and returns up to max of owner's notices, oldest
// first. SKIP LOCKED lets a second taker (a restarting owner) pass by rows
// the first is taking.
func (d *Tasks) TakeSignals(ctx context.Context, owner string, max int) ([][]byte, error) {
	rows, err := d.db.Pool.Query(ctx, `DELETE FROM task_signals WHERE id IN (
			SELECT id FROM task_signals WHERE owner = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING id, payload`, owner, max)
	type sig struct {
		id int64
		p  []byte
	}
	got, err := collect(rows, err, func(row pgx.Row) (sig, error) {
		var s sig
		return s, row.Scan(&s.id, &s.p)
	})
	if err != nil {
		return nil, fmt.Errorf("taskpg: take signals: %w", err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].id < got[j].id })
	out := make([][]byte, len(got))
	for i, s := range got {
		out[i] = s.p
	}
	return out, nil
}
