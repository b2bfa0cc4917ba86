// This file keeps the OpenAgentNetwork bridge's cursor, applied
// events and their effects in the gateway's SQLite store
// (migrations/0018_oan.sql): it implements oandb.Driver, checked by
// store/storetest.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/agentgw/agentgw/oanbridge/oandb"
)

// OAN implements oandb.Driver.
type OAN struct{ db *DB }

var _ oandb.Driver = (*OAN)(nil)

// NewOAN wraps a store opened with Migrations.
func NewOAN(db *DB) *OAN { return &OAN{db: db} }

func wrapOAN(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("oansqlite: %w", err)
}

func (s *OAN) tx(ctx context.Context, account string, f func(tx *sql.Tx) error) error {
	tx, err := s.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return wrapOAN(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO oan_accounts (account) VALUES (?) ON CONFLICT (account) DO NOTHING`, account); err != nil {
		return wrapOAN(err)
	}
	if err := f(tx); err != nil {
		return err
	}
	return wrapOAN(tx.Commit())
}

func (s *OAN) Cursor(ctx context.Context, account string) (uint64, error) {
	var c sql.NullInt64
	err := s.db.Read.QueryRowContext(ctx, `SELECT cursor FROM oan_accounts WHERE account = ?`, account).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !c.Valid) {
		return 0, oandb.ErrNoCursor
	}
	if err != nil {
		return 0, wrapOAN(err)
	}
	return uint64(c.Int64), nil
}

func (s *OAN) InitCursor(ctx context.Context, account string, seq uint64) (uint64, error) {
	var out int64
	err := s.tx(ctx, account, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE oan_accounts SET cursor = ? WHERE account = ? AND cursor IS NULL`, int64(seq), account); err != nil {
			return wrapOAN(err)
		}
		return wrapOAN(tx.QueryRowContext(ctx, `SELECT cursor FROM oan_accounts WHERE account = ?`, account).Scan(&out))
	})
	return uint64(out), err
}

func (s *OAN) Apply(ctx context.Context, account string, ev oandb.Event, eff oandb.Effect, imported bool) (bool, error) {
	if ev.Seq == 0 || ev.Seq > 1<<63-1 || ev.EventID == "" {
		return false, errors.New("oansqlite: event needs a seq and an event id")
	}
	applied := false
	err := s.tx(ctx, account, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM oan_events WHERE account = ? AND event_id = ?`, account, ev.EventID).Scan(&n); err != nil {
			return wrapOAN(err)
		}
		if n > 0 {
			return nil
		}
		var cur sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT cursor FROM oan_accounts WHERE account = ?`, account).Scan(&cur); err != nil {
			return wrapOAN(err)
		}
		if !imported && cur.Valid && uint64(cur.Int64) >= ev.Seq {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO oan_events (account, event_id, seq, type) VALUES (?, ?, ?, ?)`, account, ev.EventID, int64(ev.Seq), ev.Type); err != nil {
			return wrapOAN(err)
		}
		for _, it := range eff.Items {
			if _, err := tx.ExecContext(ctx, `INSERT INTO oan_items (account, event_id, seq, kind, gofer_id, reply_path, envelope, state, decision)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, '') ON CONFLICT (account, event_id) DO NOTHING`,
				account, it.EventID, int64(it.Seq), it.Kind, it.GoferID, it.ReplyPath, it.Envelope, stateOr(it.State)); err != nil {
				return wrapOAN(err)
			}
		}
		for _, id := range eff.Close {
			if _, err := tx.ExecContext(ctx, `UPDATE oan_items SET state = ? WHERE account = ? AND event_id = ? AND state IN (?, ?)`,
				oandb.StateClosed, account, id, oandb.StatePending, oandb.StateDeferred); err != nil {
				return wrapOAN(err)
			}
		}
		for _, o := range eff.Outbound {
			if _, err := tx.ExecContext(ctx, `INSERT INTO oan_outbound (account, id, n, gofer_id, body)
				VALUES (?, ?, (SELECT coalesce(max(n), 0) + 1 FROM oan_outbound WHERE account = ?), ?, ?)
				ON CONFLICT (account, id) DO NOTHING`, account, o.ID, account, o.GoferID, o.Body); err != nil {
				return wrapOAN(err)
			}
		}
		for _, c := range eff.Conversations {
			if _, err := tx.ExecContext(ctx, `INSERT INTO oan_conversations (account, conversation_id, gofer_id) VALUES (?, ?, ?)
				ON CONFLICT (account, conversation_id) DO NOTHING`, account, c.ConversationID, c.GoferID); err != nil {
				return wrapOAN(err)
			}
		}
		if eff.Status != "" {
			if _, err := tx.ExecContext(ctx, `UPDATE oan_accounts SET status = ? WHERE account = ?`, eff.Status, account); err != nil {
				return wrapOAN(err)
			}
		}
		if !imported {
			if _, err := tx.ExecContext(ctx, `UPDATE oan_accounts SET cursor = ? WHERE account = ? AND (cursor IS NULL OR cursor < ?)`, int64(ev.Seq), account, int64(ev.Seq)); err != nil {
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
		return errors.New("oansqlite: seq out of range")
	}
	return s.tx(ctx, account, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE oan_accounts SET cursor = ? WHERE account = ? AND (cursor IS NULL OR cursor < ?)`, int64(seq), account, int64(seq))
		return wrapOAN(err)
	})
}

func (s *OAN) SeenSeq(ctx context.Context, account, eventID string) (uint64, bool, error) {
	var seq int64
	err := s.db.Read.QueryRowContext(ctx, `SELECT seq FROM oan_events WHERE account = ? AND event_id = ?`, account, eventID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, wrapOAN(err)
	}
	return uint64(seq), true, nil
}

const itemCols = `event_id, seq, kind, gofer_id, reply_path, envelope, state, decision`

func scanItem(sc interface{ Scan(...any) error }) (oandb.Item, error) {
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
	args := []any{account}
	for _, st := range states {
		args = append(args, st)
	}
	rows, err := s.db.Read.QueryContext(ctx, `SELECT `+itemCols+` FROM oan_items WHERE account = ? AND state IN (?`+
		strings.Repeat(", ?", len(states)-1)+`) ORDER BY seq, event_id`, args...)
	out, err := collect(rows, err, scanItem)
	return out, wrapOAN(err)
}

func (s *OAN) Item(ctx context.Context, account, eventID string) (oandb.Item, bool, error) {
	it, err := scanItem(s.db.Read.QueryRowContext(ctx, `SELECT `+itemCols+` FROM oan_items WHERE account = ? AND event_id = ?`, account, eventID))
	if errors.Is(err, sql.ErrNoRows) {
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
	err := s.tx(ctx, account, func(tx *sql.Tx) error {
		args := []any{to, decision, decision, account, eventID}
		for _, f := range from {
			args = append(args, f)
		}
		res, err := tx.ExecContext(ctx, `UPDATE oan_items SET state = ?, decision = CASE WHEN ? = '' THEN decision ELSE ? END
			WHERE account = ? AND event_id = ? AND state IN (?`+strings.Repeat(", ?", len(from)-1)+`)`, args...)
		if err != nil {
			return wrapOAN(err)
		}
		n, err := res.RowsAffected()
		ok = n == 1
		return wrapOAN(err)
	})
	return ok, err
}

func (s *OAN) PendingOutbound(ctx context.Context, account string) ([]oandb.Outbound, error) {
	rows, err := s.db.Read.QueryContext(ctx, `SELECT id, gofer_id, body FROM oan_outbound WHERE account = ? AND delivered = 0 ORDER BY n`, account)
	out, err := collect(rows, err, func(row scanner) (oandb.Outbound, error) {
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
	return s.tx(ctx, account, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE oan_outbound SET delivered = 1 WHERE account = ? AND id = ?`, account, id)
		return wrapOAN(err)
	})
}

func (s *OAN) Prune(ctx context.Context, account string, belowSeq uint64) error {
	if belowSeq > 1<<63-1 {
		belowSeq = 1<<63 - 1
	}
	return s.tx(ctx, account, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM oan_events WHERE account = ? AND seq < ?`, account, int64(belowSeq)); err != nil {
			return wrapOAN(err)
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM oan_outbound WHERE account = ? AND delivered = 1`, account)
		return wrapOAN(err)
	})
}

func (s *OAN) Conversation(ctx context.Context, account, id string) (oandb.Conversation, bool, error) {
	var c oandb.Conversation
	err := s.db.Read.QueryRowContext(ctx, `SELECT conversation_id, gofer_id FROM oan_conversations WHERE account = ? AND conversation_id = ?`, account, id).
		Scan(&c.ConversationID, &c.GoferID)
	if errors.Is(err, sql.ErrNoRows) {
		return c, false, nil
	}
	return c, err == nil, wrapOAN(err)
}

func (s *OAN) Status(ctx context.Context, account string) (string, string, error) {
	var st, key string
	err := s.db.Read.QueryRowContext(ctx, `SELECT status, key_id FROM oan_accounts WHERE account = ?`, account).Scan(&st, &key)
	if errors.Is(err, sql.ErrNoRows) {
		return oandb.StatusOK, "", nil
	}
	return st, key, wrapOAN(err)
}

func (s *OAN) SetStatus(ctx context.Context, account, status, keyID string) error {
	return s.tx(ctx, account, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE oan_accounts SET status = ?, key_id = ? WHERE account = ?`, status, keyID, account)
		return wrapOAN(err)
	})
}
