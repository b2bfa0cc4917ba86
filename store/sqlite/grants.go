// This file keeps federation trust grants in the gateway's SQLite
// store (migrations/0003_federation.sql): it implements
// federation.GrantStore, checked by store/storetest.

package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agentgw/agentgw/federation"
)

// Grants implements federation.GrantStore.
type Grants struct{ db *DB }

var _ federation.GrantStore = (*Grants)(nil)

// NewGrants wraps a store opened with Migrations.
func NewGrants(db *DB) *Grants { return &Grants{db: db} }

func (s *Grants) Grant(ctx context.Context, g federation.Grant) error {
	if g.Scope&^(federation.ScopeVisibility|federation.ScopeInvocation) != 0 || g.Scope == 0 {
		return fmt.Errorf("grant: invalid scope %d", g.Scope)
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO trust_grants (principal, endpoint, scope, created_at)
			VALUES (?, ?, ?, ?)
			ON CONFLICT (principal, endpoint) DO UPDATE SET scope = scope | excluded.scope`,
			g.Principal, g.Endpoint, int(g.Scope), time.Now().UTC().Format(time.RFC3339Nano))
		return err
	})
}

func (s *Grants) Revoke(ctx context.Context, principal, endpoint string, scope federation.Scope) (bool, error) {
	removed := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		// A grant that would keep no scope is deleted; otherwise only the
		// revoked bits are cleared.
		del, err := tx.ExecContext(ctx, `DELETE FROM trust_grants WHERE principal = ? AND endpoint = ? AND scope & ? != 0 AND scope & ~? = 0`,
			principal, endpoint, int(scope), int(scope))
		if err != nil {
			return err
		}
		upd, err := tx.ExecContext(ctx, `UPDATE trust_grants SET scope = scope & ~? WHERE principal = ? AND endpoint = ? AND scope & ? != 0`,
			int(scope), principal, endpoint, int(scope))
		if err != nil {
			return err
		}
		n1, _ := del.RowsAffected()
		n2, _ := upd.RowsAffected()
		removed = n1+n2 > 0
		return nil
	})
	return removed, err
}

// write runs f in a transaction that also bumps the change generation, so
// running gateways reload.
func (s *Grants) write(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE change_generation SET generation = generation + 1 WHERE id = 1`); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *Grants) List(ctx context.Context) ([]federation.Grant, error) {
	rows, err := s.db.Read.QueryContext(ctx, `SELECT principal, endpoint, scope, created_at FROM trust_grants ORDER BY principal, endpoint`)
	out, err := collect(rows, err, func(row scanner) (federation.Grant, error) {
		var g federation.Grant
		var scope int
		var created string
		if err := row.Scan(&g.Principal, &g.Endpoint, &scope, &created); err != nil {
			return g, err
		}
		g.Scope = federation.Scope(scope)
		g.Created, _ = time.Parse(time.RFC3339Nano, created)
		return g, nil
	})
	return out, err
}

func (s *Grants) Generation(ctx context.Context) (int64, error) {
	var g int64
	err := s.db.Read.QueryRowContext(ctx, `SELECT generation FROM change_generation WHERE id = 1`).Scan(&g)
	return g, err
}
