// This file stores the endpoints' presence subscribers in PostgreSQL: it
// implements presencedb.Driver, checked by store/storetest like
// store/sqlite. The members of a cluster share the set.

package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/directory/presencedb"
)

// Presence is the PostgreSQL presence subscriber store.
type Presence struct{ db *DB }

var _ presencedb.Driver = (*Presence)(nil)

// NewPresence returns a Presence on a database opened with Open.
func NewPresence(db *DB) *Presence { return &Presence{db: db} }

func (p *Presence) Subscribe(ctx context.Context, endpoint, sub string, max int) (bool, error) {
	var is bool
	err := pgx.BeginFunc(ctx, p.db.Pool, func(tx pgx.Tx) error {
		// One endpoint's subscriptions are counted under its advisory
		// lock, so members subscribing at once never pass max together.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('presence:' || $1, 0))`, endpoint); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx,
			`INSERT INTO presence_subscribers (endpoint, subscriber)
			 SELECT $1, $2 WHERE (SELECT COUNT(*) FROM presence_subscribers WHERE endpoint = $1) < $3
			 ON CONFLICT (endpoint, subscriber) DO NOTHING`, endpoint, sub, max); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM presence_subscribers WHERE endpoint = $1 AND subscriber = $2)`, endpoint, sub).Scan(&is)
	})
	if err != nil {
		return false, fmt.Errorf("presencepg: subscribe: %w", err)
	}
	return is, nil
}

func (p *Presence) Unsubscribe(ctx context.Context, endpoint, sub string) (bool, error) {
	tag, err := p.db.Pool.Exec(ctx, `DELETE FROM presence_subscribers WHERE endpoint = $1 AND subscriber = $2`, endpoint, sub)
	if err != nil {
		return false, fmt.Errorf("presencepg: unsubscribe: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

func (p *Presence) Subscribers(ctx context.Context, endpoint string) ([]string, error) {
	rows, err := p.db.Pool.Query(ctx, `SELECT subscriber FROM presence_subscribers WHERE endpoint = $1 ORDER BY subscriber`, endpoint)
	out, err := collect(rows, err, func(row pgx.Row) (s string, err error) { return s, row.Scan(&s) })
	if err != nil {
		return nil, fmt.Errorf("presencepg: subscribers: %w", err)
	}
	return out, nil
}

func (p *Presence) Endpoints(ctx context.Context) ([]string, error) {
	rows, err := p.db.Pool.Query(ctx, `SELECT DISTINCT endpoint FROM presence_subscribers ORDER BY endpoint`)
	out, err := collect(rows, err, func(row pgx.Row) (s string, err error) { return s, row.Scan(&s) })
	if err != nil {
		return nil, fmt.Errorf("presencepg: endpoints: %w", err)
	}
	return out, nil
}
