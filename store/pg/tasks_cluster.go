package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/tasks/taskdb"
)

// Cluster mode (migration 0100_cluster.sql): instance leases beside the
// tasks, on the database's clock.

var _ taskdb.Cluster = (*Tasks)(nil)

func interval(d time.Duration) string { return fmt.Sprintf("%d microseconds", d.Microseconds()) }

// Join takes name's lease unconditionally, and adopts the unsettled tasks
// that have no owner (written before cluster mode, or by hand): each row
// goes to exactly one joining instance.
func (d *Tasks) Join(ctx context.Context, name string, ttl time.Duration) error {
	tx, err := d.db.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("taskpg: join: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO instances(name, joined, expires) VALUES ($1, now(), now() + $2::interval)
		ON CONFLICT (name) DO UPDATE SET joined = EXCLUDED.joined, expires = EXCLUDED.expires`, name, interval(ttl)); err != nil {
		return fmt.Errorf("taskpg: join: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET owner = $1 WHERE owner = '' AND result IS NULL`, name); err != nil {
		return fmt.Errorf("taskpg: join: %w", err)
	}
	// A rejoining instance recovers its tasks from their state: notices
	// queued for its previous incarnation are stale.
	if _, err := tx.Exec(ctx, `DELETE FROM task_signals WHERE owner = $1`, name); err != nil {
		return fmt.Errorf("taskpg: join: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("taskpg: join: %w", err)
	}
	return nil
}

// Renew extends a live lease; false once it had expired.
func (d *Tasks) Renew(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	tag, err := d.db.Pool.Exec(ctx, `UPDATE instances SET expires = now() + $2::interval
		WHERE name = $1 AND expires > now()`, name, interval(ttl))
	if err != nil {
		return false, fmt.Errorf("taskpg: renew: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Leave expires the lease now.
func (d *Tasks) Leave(ctx context.Context, name string) error {
	_, err := d.db.Pool.Exec(ctx, `UPDATE instances SET expires = now() WHERE name = $1 AND expires > now()`, name)
	if err != nil {
		return fmt.Errorf("taskpg: leave: %w", err)
	}
	return nil
}

// Instances lists every instance with its unsettled task count.
func (d *Tasks) Instances(ctx context.Context) ([]taskdb.Instance, error) {
	rows, err := d.db.Pool.Query(ctx, `SELECT i.name, i.joined, i.expires, i.expires > now(),
			(SELECT count(*) FROM tasks t WHERE t.owner = i.name AND t.result IS NULL)
		FROM instances i ORDER BY i.name`)
	out, err := collect(rows, err, func(row pgx.Row) (taskdb.Instance, error) {
		var in taskdb.Instance
		if err := row.Scan(&in.Name, &in.Joined, &in.Expires, &in.Live, &in.Unsettled); err != nil {
			return in, err
		}
		in.Joined, in.Expires = in.Joined.UTC(), in.Expires.UTC()
		return in, nil
	})
	if err != nil {
		return nil, fmt.Errorf("taskpg: instances: %w", err)
	}
	return out, nil
}

func collectTasks(rows pgx.Rows) ([]taskdb.Task, error) {
	return collect(rows, nil, func(row pgx.Row) (taskdb.Task, error) {
		t, err := scanTask(row)
		if err != nil {
			return taskdb.Task{}, err
		}
		return *t, nil
	})
}

// Owned lists owner's unsettled tasks, oldest first.
func (d *Tasks) Owned(ctx context.Context, owner string) ([]taskdb.Task, error) {
	rows, err := d.db.Pool.Query(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE owner = $1 AND result IS NULL ORDER BY created_ns, id`, owner)
	if err != nil {
		return nil, fmt.Errorf("taskpg: owned: %w", err)
	}
	return collectTasks(rows)
}

// TakeOver locks dead's lease row; only if that lease has expired does it
// move dead's unsettled tasks to owner, in the same transaction. A second
// survivor waits on the row lock and then finds nothing left to move; a
// restarting dead instance's Join waits likewise and then owns only what
// was not moved.
func (d *Tasks) TakeOver(ctx context.Context, dead, owner string) ([]taskdb.Task, error) {
	tx, err := d.db.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("taskpg: takeover: %w", err)
	}
	defer tx.Rollback(ctx)
	var expired bool
	err = tx.QueryRow(ctx, `SELECT expires <= now() FROM instances WHERE name = $1 FOR UPDATE`, dead).Scan(&expired)
	if err == pgx.ErrNoRows || (err == nil && !expired) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("taskpg: takeover: %w", err)
	}
	rows, err := tx.Query(ctx, `UPDATE tasks SET owner = $2 WHERE owner = $1 AND result IS NULL
		RETURNING `+taskColumns, dead, owner)
	if err != nil {
		return nil, fmt.Errorf("taskpg: takeover: %w", err)
	}
	moved, err := collectTasks(rows)
	if err != nil {
		return nil, fmt.Errorf("taskpg: takeover: %w", err)
	}
	// The survivor recovers the moved tasks from their state: the dead
	// instance's queued notices are stale.
	if _, err := tx.Exec(ctx, `DELETE FROM task_signals WHERE owner = $1`, dead); err != nil {
		return nil, fmt.Errorf("taskpg: takeover: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("taskpg: takeover: %w", err)
	}
	return moved, nil
}
