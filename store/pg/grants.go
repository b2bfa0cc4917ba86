// This file keeps federation trust grants in PostgreSQL
// (migrations/0003_federation.sql): it implements federation.GrantStore,
// checked by store/storetest like store/sqlite.

package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/federation"
)

// Grants implements federation.GrantStore.
type Grants struct{ db *DB }

var _ federation.GrantStore = (*Grants)(nil)

// NewGrants wraps a store opened with Open.
func NewGrants(db *DB) *Grants { return &Grants{db: db} }

func (s *Grants) Grant(ctx context.Context, g federation.Grant) error {
	if g.Scope&^(federation.ScopeVisibility|federation.ScopeInvocation) != 0 || g.Scope == 0 {
		return fmt.Errorf("grant: invalid scope %d", g.Scope)
	}
	return s.write(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO trust_grants (principal, endpoint, scope, created_at)
			VALUES ($1, $2, $3, $4)
			ON CONFLICT (principal, endpoint) DO UPDATE SET scope = trust_grants.scope | excluded.scope`,
			g.Principal, g.Endpoint, int(g.Scope), time.Now().UTC())
		return err
	})
}

func (s *Grants) Revoke(ctx context.Context, principal, endpoint string, scope federation.Scope) (bool, error) {
	removed := false
	err := s.write(ctx, func(tx pgx.Tx) error {
		// A grant that would keep no scope is deleted; otherwise only the
		// revoked bits are cleared.
		del, err := tx.Exec(ctx, `DELETE FROM trust_grants WHERE principal = $1 AND endpoint = $2 AND scope & $3 <> 0 AND scope & ~$3 = 0`,
			principal, endpoint, int(scope))
		if err != nil {
			return err
		}
		upd, err := tx.Exec(ctx, `UPDATE trust_grants SET scope = scope & ~$3 WHERE principal = $1 AND endpoint = $2 AND scope & $3 <> 0`,
			principal, endpoint, int(scope))
		if err != nil {
			return err
		}
		removed = del.RowsAffected()+upd.RowsAffected() > 0
		return nil
	})
	return removed, err
}

// write runs f in a transaction that also bumps the change generation, so
// running gateways reload.
func (s *Grants) write(ctx context.Context, f func(pgx.Tx) error) error {
	tx, err := s.db.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("grantpg: %w", err)
	}
	defer tx.Rollback(ctx)
	if err := f(tx); err != nil {
		return fmt.Errorf("grantpg: %w", err)
	}
	if err := BumpGeneration(ctx, tx); err != nil {
		return fmt.Errorf("grantpg: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("grantpg: commit: %w", err)
	}
	return nil
}

func (s *Grants) List(ctx context.Context) ([]federation.Grant, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT principal, endpoint, scope, created_at FROM trust_grants ORDER BY principal, endpoint`)
	out, err := collect(rows, err, func(row pgx.Row) (federation.Grant, error) {
		var g federation.Grant
		var scope int
		if err := row.Scan(&g.Principal, &g.Endpoint, &scope, &g.Created); err != nil {
			return g, err
		}
		g.Scope = federation.Scope(scope)
		g.Created = g.Created.UTC()
		return g, nil
	})
	if err != nil {
		return nil, fmt.Errorf("grantpg: %w", err)
	}
	return out, nil
}

func (s *Grants) Generation(ctx context.Context) (int64, error) {
	return s.db.Generation(ctx)
}
