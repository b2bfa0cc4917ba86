package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"time"

	"github.com/agentgw/agentgw/callers/a2afront/frontdb"
	"github.com/agentgw/agentgw/store/migrate"
)

//go:embed a2afront/migrations/*.sql
var a2aFrontFS embed.FS

var memSeq atomic.Int64

// A2AFront is the A2A front's own SQLite file (frontdb.Store): push
// configs and the push outbox of `agentgw a2a --push-outbox FILE`. It is
// not the gateway's store and carries its own schema (a2afront/migrations).
type A2AFront struct{ db *sql.DB }

var _ frontdb.Store = (*A2AFront)(nil)

// OpenA2AFront opens (creating if needed) the front's file at path; an
// empty path is an in-memory database that lives as long as the process.
func OpenA2AFront(ctx context.Context, path string) (*A2AFront, error) {
	// A named shared-cache memory database outlives any one connection
	// (the pool may replace one) while the pool holds another.
	src := fmt.Sprintf("file:a2afront-%d-%d?mode=memory&cache=shared&_busy_timeout=10000", os.Getpid(), memSeq.Add(1))
	if path != "" {
		// The file holds webhook tokens and credentials: made 0600 (SQLite
		// gives its -wal and -shm files the same mode).
		f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("a2a front store: %w", err)
		}
		f.Close()
		src = dsn(path, false)
	}
	db, err := sql.Open("sqlite3", src)
	if err != nil {
		return nil, fmt.Errorf("a2a front store: open: %w", err)
	}
	// One connection: writes are serialized anyway, and an in-memory
	// database lives in its connection.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	sub, err := fs.Sub(a2aFrontFS, "a2afront")
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := apply(ctx, db, []migrate.Set{{Owner: "sqlite a2afront", FS: sub}}); err != nil {
		db.Close()
		return nil, fmt.Errorf("a2a front store: %w", err)
	}
	return &A2AFront{db: db}, nil
}

func (s *A2AFront) Close() error { return s.db.Close() }

func (s *A2AFront) PutConfig(ctx context.Context, c frontdb.Config, max int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var exists, n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM a2a_push_configs WHERE task_id = ? AND config_id = ?`, c.TaskID, c.ConfigID).Scan(&exists); err != nil {
		return err
	}
	if exists == 0 {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM a2a_push_configs WHERE task_id = ?`, c.TaskID).Scan(&n); err != nil {
			return err
		}
		if n >= max {
			return frontdb.ErrTooMany
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO a2a_push_configs (task_id, config_id, agent, body, done, updated_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (task_id, config_id) DO UPDATE SET agent = excluded.agent, body = excluded.body, done = excluded.done, updated_at = excluded.updated_at`,
		c.TaskID, c.ConfigID, c.Agent, c.Body, boolInt(c.Done), time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *A2AFront) configs(ctx context.Context, q string, args ...any) ([]frontdb.Config, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	return collect(rows, err, func(r scanner) (frontdb.Config, error) {
		var c frontdb.Config
		var done int
		err := r.Scan(&c.TaskID, &c.ConfigID, &c.Agent, &c.Body, &done)
		c.Done = done == 1
		return c, err
	})
}

func (s *A2AFront) Configs(ctx context.Context, taskID string) ([]frontdb.Config, error) {
	return s.configs(ctx, `SELECT task_id, config_id, agent, body, done FROM a2a_push_configs WHERE task_id = ? ORDER BY config_id`, taskID)
}

func (s *A2AFront) Followed(ctx context.Context) ([]frontdb.Config, error) {
	return s.configs(ctx, `SELECT task_id, config_id, agent, body, done FROM a2a_push_configs WHERE done = 0 ORDER BY task_id, config_id`)
}

func (s *A2AFront) DeleteConfig(ctx context.Context, taskID, configID string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM a2a_push_configs WHERE task_id = ? AND config_id = ?`, taskID, configID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM a2a_push_outbox WHERE task_id = ? AND config_id = ?`, taskID, configID); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *A2AFront) Enqueue(ctx context.Context, taskID string, body []byte, final bool, at time.Time, maxPending int) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	now := at.UnixNano()
	if _, err := tx.ExecContext(ctx, `INSERT INTO a2a_push_outbox (task_id, config_id, config, body, created_at, next_at)
		SELECT task_id, config_id, body, ?, ?, ? FROM a2a_push_configs WHERE task_id = ? ORDER BY config_id`, body, now, now, taskID); err != nil {
		return 0, err
	}
	if final {
		if _, err := tx.ExecContext(ctx, `UPDATE a2a_push_configs SET done = 1, updated_at = ? WHERE task_id = ?`, now, taskID); err != nil {
			return 0, err
		}
	}
	dropped := 0
	if maxPending > 0 {
		res, err := tx.ExecContext(ctx, `DELETE FROM a2a_push_outbox WHERE id IN (
			SELECT id FROM a2a_push_outbox ORDER BY id DESC LIMIT -1 OFFSET ?)`, maxPending)
		if err != nil {
			return 0, err
		}
		n, _ := res.RowsAffected()
		dropped = int(n)
	}
	return dropped, tx.Commit()
}

func (s *A2AFront) Due(ctx context.Context, now time.Time, limit int) ([]frontdb.Notification, error) {
	// Only the oldest notification of each config: a config's
	// notifications go out in order, one at a time.
	rows, err := s.db.QueryContext(ctx, `SELECT id, task_id, config_id, config, body, attempts, created_at FROM a2a_push_outbox o
		WHERE next_at <= ? AND id = (SELECT min(i.id) FROM a2a_push_outbox i WHERE i.task_id = o.task_id AND i.config_id = o.config_id)
		ORDER BY next_at, id LIMIT ?`, now.UnixNano(), limit)
	return collect(rows, err, func(r scanner) (frontdb.Notification, error) {
		var n frontdb.Notification
		var created int64
		err := r.Scan(&n.ID, &n.TaskID, &n.ConfigID, &n.Config, &n.Body, &n.Attempts, &created)
		n.Created = time.Unix(0, created)
		return n, err
	})
}

func (s *A2AFront) Delivered(ctx context.Context, id int64) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM a2a_push_outbox WHERE id = ?`, id)
	return err
}

func (s *A2AFront) Retry(ctx context.Context, id int64, attempts int, next time.Time) error {
	if attempts < 0 {
		return errors.New("a2a front store: negative attempts")
	}
	_, err := s.db.ExecContext(ctx, `UPDATE a2a_push_outbox SET attempts = ?, next_at = ? WHERE id = ?`, attempts, next.UnixNano(), id)
	return err
}

func (s *A2AFront) GiveUp(ctx context.Context, id int64) error { return s.Delivered(ctx, id) }

func (s *A2AFront) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM a2a_push_configs WHERE done = 1 AND updated_at < ?
		AND NOT EXISTS (SELECT 1 FROM a2a_push_outbox o WHERE o.task_id = a2a_push_configs.task_id AND o.config_id = a2a_push_configs.config_id)`, cutoff.UnixNano())
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

func (s *A2AFront) PutTasks(ctx context.Context, ts []frontdb.Task, max int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, t := range ts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO a2a_front_tasks (id, agent, context_id, seq, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET context_id = CASE WHEN a2a_front_tasks.context_id = '' THEN excluded.context_id ELSE a2a_front_tasks.context_id END,
			updated_at = max(a2a_front_tasks.updated_at, excluded.updated_at)`, t.ID, t.Agent, t.ContextID, int64(t.Seq), t.Updated.UnixNano()); err != nil {
			return err
		}
	}
	if max > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM a2a_front_tasks WHERE id IN (
			SELECT id FROM a2a_front_tasks ORDER BY updated_at DESC, seq DESC LIMIT -1 OFFSET ?)`, max); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (s *A2AFront) Tasks(ctx context.Context, max int) ([]frontdb.Task, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, agent, context_id, seq, updated_at FROM a2a_front_tasks ORDER BY updated_at DESC, seq DESC LIMIT ?`, max)
	return collect(rows, err, func(r scanner) (frontdb.Task, error) {
		var t frontdb.Task
		var seq, upd int64
		err := r.Scan(&t.ID, &t.Agent, &t.ContextID, &seq, &upd)
		t.Seq, t.Updated = uint64(seq), time.Unix(0, upd)
		return t, err
	})
}
