// This file stores the endpoints' presence subscribers in SQLite: it
// implements presencedb.Driver on the gateway's store.

package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentgw/agentgw/directory/presencedb"
)

// Presence is the SQLite presence subscriber store.
type Presence struct {
	w *sql.DB
	r *sql.DB
}

var _ presencedb.Driver = (*Presence)(nil)

// NewPresence returns a Presence on a database opened with Migrations.
func NewPresence(db *DB) *Presence { return &Presence{w: db.Write, r: db.Read} }

func (p *Presence) Subscribe(ctx context.Context, endpoint, sub string, max int) (bool, error) {
	tx, err := p.w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("presencesqlite: subscribe: %w", err)
	}
	defer tx.Rollback()
	// The one writer connection serializes the count and the insert.
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO presence_subscribers (endpoint, subscriber)
		 SELECT ?1, ?2 WHERE (SELECT COUNT(*) FROM presence_subscribers WHERE endpoint = ?1) < ?3
		 ON CONFLICT (endpoint, subscriber) DO NOTHING`, endpoint, sub, max); err != nil {
		return false, fmt.Errorf("presencesqlite: subscribe: %w", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM presence_subscribers WHERE endpoint = ? AND subscriber = ?`, endpoint, sub).Scan(&n); err != nil {
		return false, fmt.Errorf("presencesqlite: subscribe: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("presencesqlite: subscribe: %w", err)
	}
	return n == 1, nil
}

func (p *Presence) Unsubscribe(ctx context.Context, endpoint, sub string) (bool, error) {
	res, err := p.w.ExecContext(ctx, `DELETE FROM presence_subscribers WHERE endpoint = ? AND subscriber = ?`, endpoint, sub)
	if err != nil {
		return false, fmt.Errorf("presencesqlite: unsubscribe: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (p *Presence) Subscribers(ctx context.Context, endpoint string) ([]string, error) {
	rows, err := p.r.QueryContext(ctx, `SELECT subscriber FROM presence_subscribers WHERE endpoint = ? ORDER BY subscriber`, endpoint)
	out, err := collect(rows, err, func(row scanner) (s string, err error) { return s, row.Scan(&s) })
	if err != nil {
		return nil, fmt.Errorf("presencesqlite: subscribers: %w", err)
	}
	return out, nil
}

func (p *Presence) Endpoints(ctx context.Context) ([]string, error) {
	rows, err := p.r.QueryContext(ctx, `SELECT DISTINCT endpoint FROM presence_subscribers ORDER BY endpoint`)
	out, err := collect(rows, err, func(row scanner) (s string, err error) { return s, row.Scan(&s) })
	if err != nil {
		return nil, fmt.Errorf("presencesqlite: endpoints: %w", err)
	}
	return out, nil
}
