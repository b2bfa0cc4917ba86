// This file keeps the OpenAgentNetwork bridge's cursor, applied events
// and their effects in PostgreSQL (migrations/0018_oan.sql): it implements
// oandb.Driver, checked by store/storetest like store/sqlite.
//
// SQLite serializes writers; here every write transaction takes the
// account's row lock first (SELECT … FOR UPDATE), so the check-then-insert
// of Apply and the outbound numbering stay one-at-a-time per account,
// across connections and instances.

package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/oanbridge/oandb"
)

// OAN implements oandb.Driver.
type OAN struct{ db *DB }

var _ oandb.Driver = (*OAN)(nil)

// NewOAN wraps a store opened with Open.
func NewOAN(db *DB) *OAN { return &OAN{db: db} }

func wrapOAN(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("oanpg: %w", err)
}

// tx runs f in one transaction holding the account row's lock; the row is
// created when missing, and f gets the cursor read under the lock.
func (s *OAN) tx(ctx context.Context, account string, f func(tx pgx.Tx, cursor *int64) error) error {
	tx, err := s.db.Pool.Begin(ctx)
	if err != nil {
		return wrapOAN(err)
	}
	defer tx.Rollback(ctx)
	// A concurrent first insert of the account waits for the other
	// transaction and then does nothing; the lock below then waits too.
	if _, err := tx.Exec(ctx, `INSERT INTO oan_accounts (account) VALUES ($1) ON CONFLICT (account) DO NOTHING`, account); err != nil {
		return wrapOAN(err)
	}
	var cur *int64
	if err := tx.QueryRow(ctx, `SELECT cursor FROM oan_accounts WHERE account = $1 FOR UPDATE`, account).Scan(&cur); err != nil {
		return wrapOAN(err)
	}
	if err := f(tx, cur); err != nil {
		return err
	}
	return wrapOAN(tx.Commit(ctx))
}

func (s *OAN) Cursor(ctx context.Context, account string) (uint64, error) {
	var c *int64
	err := s.db.Pool.QueryRow(ctx, `SELECT cursor FROM oan_accounts WHERE account = $1`, account).Scan(&c)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && c == nil) {
		return 0, oandb.ErrNoCursor
	}
	if err != nil {
		return 0, wrapOAN(err)
	}
	return uint64(*c), nil
}

func (s *OAN) InitCursor(ctx context.Context, account string, seq uint64) (uint64, error) {
	if seq > 1<<63-1 {
		return 0, errors.New("oanpg: seq out of range")
	}
	var out uint64
	err := s.tx(ctx, account, func(tx pgx.Tx, cur *int64) error {
		if cur != nil {
			out = uint64(*cur)
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE oan_accounts SET cursor = $1 WHERE account = $2`, int64(seq), account); err != nil {
			return wrapOAN(err)
		}
		out = seq
		return nil
	})
	return out, err
}

func (s *OAN) Apply(ctx context.Context, account string, ev oandb.Event, eff oandb.Effect, imported bool) (bool, error) {
	if ev.Seq == 0 || ev.Seq > 1<<63-1 || ev.EventID == "" {
		return false, errors.New("oanpg: event needs a seq and an event id")
	}
	applied := false
	err := s.tx(ctx, account, func(tx pgx.Tx, cur *int64) error {
		var seen bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oan_events WHERE account = $1 AND event_id = $2)`, account, ev.EventID).Scan(&seen); err != nil {
			return wrapOAN(err)
		}
		if seen {
			return nil
		}
		if !imported && cur != nil && uint64(*cur) >= ev.Seq {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO oan_events (account, event_id, seq, type) VALUES ($1, $2, $3, $4)`, account, ev.EventID, int64(ev.Seq), ev.Type); err != nil {
			return wrapOAN(err)
		}
		for _, it := range eff.Items {
			if _, err := tx.Exec(ctx, `INSERT INTO oan_items (account, event_id, seq, kind, gofer_id, reply_path, envelope, state, decision)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, '') ON CONFLICT (account, event_id) DO NOTHING`,
				account, it.EventID, int64(it.Seq), it.Kind, it.GoferID, it.ReplyPath, it.Envelope, stateOr(it.State)); err != nil {
				return wrapOAN(err)
			}
		}
		for _, id := range eff.Close {
			if _, err := tx.Exec(ctx, `UPDATE oan_items SET state = $1 WHERE account = $2 AND event_id = $3 AND state IN ($4, $5)`,
				oandb.StateClosed, account, id, oandb.StatePending, oandb.StateDeferred); err != nil {
				return wrapOAN(err)
			}
		}
		for _, o := range eff.Outbound {
			if _, err := tx.Exec(ctx, `INSERT INTO oan_outbound (account, id, n, gofer_id, body)
				VALUES ($1, $2, (SELECT coalesce(max(n), 0) + 1 FROM oan_outbound WHERE account = $1), $3, $4)
				ON CONFLICT (account, id) DO NOTHING`, account, o.ID, o.GoferID, o.Body); err != nil {
				return wrapOAN(err)
			}
		}
		for _, c := range eff.Conversations {
			if _, err := tx.Exec(ctx, `INSERT INTO oan_conversations (account, conversation_id, gofer_id) VALUES ($1, $2, $3)
				ON CONFLICT (account, conversation_id) DO NOTHING`, account, c.ConversationID, c.GoferID); err != nil {
				return wrapOAN(err)
			}
		}
		if eff.Status != "" {
			if _, err := tx.Exec(ctx, `UPDATE oan_accounts SET status = $1 WHERE account = $2`, eff.Status, account); err != nil {
				return wrapOAN(err)
			}
		}
		if !imported {
			if _, err := tx.Exec(ctx, `UPDATE oan_accounts SET cursor = $1 WHERE account = $2 AND (cursor IS NULL OR cursor < $1)`, int64(ev.Seq), account); err != nil {
				return wrapOAN(err)
			}
		}
		applied = true
		return nil
	})
	return applied, err
}

func stateOr(s string) string {
	if s == "" {
		return oandb.StatePending
	}
	return s
}

func (s *OAN) Skip(ctx context.Context, account string, seq uint64) error {
	if seq > 1<<63-1 {
		return errors.New("oanpg: seq out of range")
	}
	return s.tx(ctx, account, func(tx pgx.Tx, _ *int64) error {
		_, err := tx.Exec(ctx, `UPDATE oan_accounts SET cursor = $1 WHERE account = $2 AND (cursor IS NULL OR cursor < $1)`, int64(seq), account)
		return wrapOAN(err)
	})
}

func (s *OAN) SeenSeq(ctx context.Context, account, eventID string) (uint64, bool, error) {
	var seq int64
	err := s.db.Pool.QueryRow(ctx, `SELECT seq FROM oan_events WHERE account = $1 AND event_id = $2`, account, eventID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, wrapOAN(err)
	}
	return uint64(seq), true, nil
}

const itemCols = `event_id, seq, kind, gofer_id, reply_path, envelope, state, decision`

func scanItem(sc pgx.Row) (oandb.Item, error) {
	var it oandb.Item
	var seq int64
	err := sc.Scan(&it.EventID, &seq, &it.Kind, &it.GoferID, &it.ReplyPath, &it.Envelope, &it.State, &it.Decision)
	it.Seq = uint64(seq)
	return it, err
}

func (s *OAN) Items(ctx context.Context, account string, states ...string) ([]oandb.Item, error) {
	if len(states) == 0 {
		return nil, nil
	}
	rows, err := s.db.Pool.Query(ctx, `SELECT `+itemCols+` FROM oan_items WHERE account = $1 AND state = ANY($2)
		ORDER BY seq, event_id`, account, states)
	out, err := collect(rows, err, scanItem)
	return out, wrapOAN(err)
}

func (s *OAN) Item(ctx context.Context, account, eventID string) (oandb.Item, bool, error) {
	it, err := scanItem(s.db.Pool.QueryRow(ctx, `SELECT `+itemCols+` FROM oan_items WHERE account = $1 AND event_id = $2`, account, eventID))
	if errors.Is(err, pgx.ErrNoRows) {
		return oandb.Item{}, false, nil
	}
	if err != nil {
		return oandb.Item{}, false, wrapOAN(err)
	}
	return it, true, nil
}

func (s *OAN) Transition(ctx context.Context, account, eventID string, from []string, to, decision string) (bool, error) {
	if len(from) == 0 {
		return false, nil
	}
	ok := false
	err := s.tx(ctx, account, func(tx pgx.Tx, _ *int64) error {
		tag, err := tx.Exec(ctx, `UPDATE oan_items SET state = $1, decision = CASE WHEN $2::text = '' THEN decision ELSE $2::text END
			WHERE account = $3 AND event_id = $4 AND state = ANY($5)`, to, decision, account, eventID, from)
		if err != nil {
			return wrapOAN(err)
		}
		ok = tag.RowsAffected() == 1
		return nil
	})
	return ok, err
}

func (s *OAN) PendingOutbound(ctx context.Context, account string) ([]oandb.Outbound, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT id, gofer_id, body FROM oan_outbound WHERE account = $1 AND NOT delivered ORDER BY n`, account)
	out, err := collect(rows, err, func(row pgx.Row) (oandb.Outbound, error) {
		var o oandb.Outbound
		if err := row.Scan(&o.ID, &o.GoferID, &o.Body); err != nil {
			return o, err
		}
		return o, nil
	})
	if err != nil {
		return nil, wrapOAN(err)
	}
	return out, nil
}

func (s *OAN) Delivered(ctx context.Context, account, id string) error {
	return s.tx(ctx, account, func(tx pgx.Tx, _ *int64) error {
		_, err := tx.Exec(ctx, `UPDATE oan_outbound SET delivered = true WHERE account = $1 AND id = $2`, account, id)
		return wrapOAN(err)
	})
}

func (s *OAN) Prune(ctx context.Context, account string, belowSeq uint64) error {
	if belowSeq > 1<<63-1 {
		belowSeq = 1<<63 - 1
	}
	return s.tx(ctx, account, func(tx pgx.Tx, _ *int64) error {
		if _, err := tx.Exec(ctx, `DELETE FROM oan_events WHERE account = $1 AND seq < $2`, account, int64(belowSeq)); err != nil {
			return wrapOAN(err)
		}
		_, err := tx.Exec(ctx, `DELETE FROM oan_outbound WHERE account = $1 AND delivered`, account)
		return wrapOAN(err)
	})
}

func (s *OAN) Conversation(ctx context.Context, account, id string) (oandb.Conversation, bool, error) {
	var c oandb.Conversation
	err := s.db.Pool.QueryRow(ctx, `SELECT conversation_id, gofer_id FROM oan_conversations WHERE account = $1 AND conversation_id = $2`, account, id).
		Scan(&c.ConversationID, &c.GoferID)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	return c, err == nil, wrapOAN(err)
}

func (s *OAN) Status(ctx context.Context, account string) (string, string, error) {
	var st, key string
	err := s.db.Pool.QueryRow(ctx, `SELECT status, key_id FROM oan_accounts WHERE account = $1`, account).Scan(&st, &key)
	if errors.Is(err, pgx.ErrNoRows) {
		return oandb.StatusOK, "", nil
	}
	return st, key, wrapOAN(err)
}

func (s *OAN) SetStatus(ctx context.Context, account, status, keyID string) error {
	return s.tx(ctx, account, func(tx pgx.Tx, _ *int64) error {
		_, err := tx.Exec(ctx, `UPDATE oan_accounts SET status = $1, key_id = $2 WHERE account = $3`, status, keyID, account)
		return wrapOAN(err)
	})
}
