// This file stores the Self Registration records and bans in
// SQLite: it implements selfregdb.Driver on the gateway's store. A ban
// bumps change_generation, so a running gateway reloads and notices it
// together with the deactivation `agentgw admin ban` makes.

package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agentgw/agentgw/directory/selfregdb"
)

// SelfReg is the SQLite self-registration store.
type SelfReg struct {
	w *sql.DB
	r *sql.DB
}

var _ selfregdb.Driver = (*SelfReg)(nil)

// NewSelfReg returns a SelfReg on a database opened with Migrations.
func NewSelfReg(db *DB) *SelfReg { return &SelfReg{w: db.Write, r: db.Read} }

const timeFormat = time.RFC3339Nano

func fmtTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func parseTime(s string) (time.Time, error) { return time.Parse(timeFormat, s) }

func (s *SelfReg) Record(ctx context.Context, endpoint string, t time.Time) error {
	ts := fmtTime(t)
	_, err := s.w.ExecContext(ctx,
		`INSERT INTO selfreg_endpoints (endpoint, first_at, last_at) VALUES (?, ?, ?)
		 ON CONFLICT (endpoint) DO UPDATE SET last_at = excluded.last_at`, endpoint, ts, ts)
	if err != nil {
		return fmt.Errorf("selfregsqlite: record: %w", err)
	}
	return nil
}

func (s *SelfReg) Records(ctx context.Context) ([]selfregdb.Record, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT endpoint, first_at, last_at FROM selfreg_endpoints ORDER BY endpoint`)
	out, err := collect(rows, err, func(row scanner) (selfregdb.Record, error) {
		var r selfregdb.Record
		var first, last string
		if err := row.Scan(&r.Endpoint, &first, &last); err != nil {
			return r, err
		}
		if r.First, err = parseTime(first); err != nil {
			return r, err
		}
		if r.Last, err = parseTime(last); err != nil {
			return r, err
		}
		return r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("selfregsqlite: records: %w", err)
	}
	return out, nil
}

func (s *SelfReg) Ban(ctx context.Context, endpoint, reason string, t time.Time) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("selfregsqlite: ban: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO selfreg_bans (endpoint, reason, at) VALUES (?, ?, ?)
		 ON CONFLICT (endpoint) DO UPDATE SET reason = excluded.reason`, endpoint, reason, fmtTime(t)); err != nil {
		return fmt.Errorf("selfregsqlite: ban: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE change_generation SET generation = generation + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("selfregsqlite: ban: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("selfregsqlite: ban: %w", err)
	}
	return nil
}

func (s *SelfReg) Unban(ctx context.Context, endpoint string) (bool, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM selfreg_bans WHERE endpoint = ?`, endpoint)
	if err != nil {
		return false, fmt.Errorf("selfregsqlite: unban: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (s *SelfReg) Banned(ctx context.Context, endpoint string) (bool, error) {
	var n int
	// The writer connection, not a reader: a ban just committed by another
	// process must be seen by the very next registration.
	if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM selfreg_bans WHERE endpoint = ?`, endpoint).Scan(&n); err != nil {
		return false, fmt.Errorf("selfregsqlite: banned: %w", err)
	}
	return n > 0, nil
}

func (s *SelfReg) Bans(ctx context.Context) ([]selfregdb.Ban, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT endpoint, reason, at FROM selfreg_bans ORDER BY endpoint`)
	out, err := collect(rows, err, func(row scanner) (selfregdb.Ban, error) {
		var b selfregdb.Ban
		var at string
		if err := row.Scan(&b.Endpoint, &b.Reason, &at); err != nil {
			return b, err
		}
		if b.At, err = parseTime(at); err != nil {
			return b, err
		}
		return b, nil
	})
	if err != nil {
		return nil, fmt.Errorf("selfregsqlite: bans: %w", err)
	}
	return out, nil
}
