// This file stores the Self Registration records and bans in
// PostgreSQL: it implements selfregdb.Driver, checked by
// store/storetest like store/sqlite. A ban bumps the
// change generation (store/pg), so running gateways reload and
// notice it together with the deactivation `agentgw admin ban` makes.

package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/directory/selfregdb"
)

// SelfReg is the PostgreSQL self-registration store.
type SelfReg struct{ db *DB }

var _ selfregdb.Driver = (*SelfReg)(nil)

// NewSelfReg returns a SelfReg on a database opened with Open.
func NewSelfReg(db *DB) *SelfReg { return &SelfReg{db: db} }

func (s *SelfReg) Record(ctx context.Context, endpoint string, t time.Time) error {
	_, err := s.db.Pool.Exec(ctx,
		`INSERT INTO selfreg_endpoints (endpoint, first_at, last_at) VALUES ($1, $2, $2)
		 ON CONFLICT (endpoint) DO UPDATE SET last_at = excluded.last_at`, endpoint, ns(t))
	if err != nil {
		return fmt.Errorf("selfregpg: record: %w", err)
	}
	return nil
}

func (s *SelfReg) Records(ctx context.Context) ([]selfregdb.Record, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT endpoint, first_at, last_at FROM selfreg_endpoints ORDER BY endpoint`)
	if err != nil {
		return nil, fmt.Errorf("selfregpg: records: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (selfregdb.Record, error) {
		var r selfregdb.Record
		var first, last int64
		err := row.Scan(&r.Endpoint, &first, &last)
		r.First, r.Last = fromNS(first), fromNS(last)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("selfregpg: records: %w", err)
	}
	return out, nil
}

func (s *SelfReg) Ban(ctx context.Context, endpoint, reason string, t time.Time) error {
	tx, err := s.db.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("selfregpg: ban: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx,
		`INSERT INTO selfreg_bans (endpoint, reason, at) VALUES ($1, $2, $3)
		 ON CONFLICT (endpoint) DO UPDATE SET reason = excluded.reason`, endpoint, reason, ns(t)); err != nil {
		return fmt.Errorf("selfregpg: ban: %w", err)
	}
	if err := BumpGeneration(ctx, tx); err != nil {
		return fmt.Errorf("selfregpg: ban: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("selfregpg: ban: %w", err)
	}
	return nil
}

func (s *SelfReg) Unban(ctx context.Context, endpoint string) (bool, error) {
	tag, err := s.db.Pool.Exec(ctx, `DELETE FROM selfreg_bans WHERE endpoint = $1`, endpoint)
	if err != nil {
		return false, fmt.Errorf("selfregpg: unban: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

func (s *SelfReg) Banned(ctx context.Context, endpoint string) (bool, error) {
	var b bool
	// Each statement reads the newest committed state (read committed): a
	// ban another instance or `agentgw admin ban` just committed is seen.
	if err := s.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM selfreg_bans WHERE endpoint = $1)`, endpoint).Scan(&b); err != nil {
		return false, fmt.Errorf("selfregpg: banned: %w", err)
	}
	return b, nil
}

func (s *SelfReg) Bans(ctx context.Context) ([]selfregdb.Ban, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT endpoint, reason, at FROM selfreg_bans ORDER BY endpoint`)
	if err != nil {
		return nil, fmt.Errorf("selfregpg: bans: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (selfregdb.Ban, error) {
		var b selfregdb.Ban
		var at int64
		err := row.Scan(&b.Endpoint, &b.Reason, &at)
		b.At = fromNS(at)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("selfregpg: bans: %w", err)
	}
	return out, nil
}
