// This file keeps the connector bridge's IM v2 queues in the
// gateway's SQLite store (migrations/0016b_connector_chat.sql): it
// implements chatdb.Driver, checked by store/storetest.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentgw/agentgw/connectorbridge/chatdb"
)

// Chats implements chatdb.Driver.
type Chats struct{ db *DB }

var _ chatdb.Driver = (*Chats)(nil)

// NewChats wraps a store opened with Migrations.
func NewChats(db *DB) *Chats { return &Chats{db: db} }

func ms(t time.Time) int64 { return t.UnixMilli() }

func (s *Chats) Enqueue(ctx context.Context, it chatdb.Item) (bool, chatdb.State, error) {
	if len(it.Payload) > chatdb.MaxPayload {
		return false, "", errors.New("chatsqlite: payload too large")
	}
	if it.Direction != chatdb.Inbound && it.Direction != chatdb.Outbound {
		return false, "", errors.New("chatsqlite: unknown direction")
	}
	if it.CreatedAt.IsZero() {
		it.CreatedAt = time.Now()
	}
	tx, err := s.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return false, "", fmt.Errorf("chatsqlite: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO connector_chat_queue
		(endpoint, direction, message_id, channel_id, conversation, payload, expires_at, created_at, seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM connector_chat_queue))
		ON CONFLICT (endpoint, direction, message_id) DO NOTHING`,
		it.Endpoint, string(it.Direction), it.MessageID, it.ChannelID, it.Conversation, it.Payload,
		ms(it.ExpiresAt), ms(it.CreatedAt))
	if err != nil {
		return false, "", fmt.Errorf("chatsqlite: %w", err)
	}
	n, _ := res.RowsAffected()
	var st string
	if err := tx.QueryRowContext(ctx, `SELECT state FROM connector_chat_queue
		WHERE endpoint = ? AND direction = ? AND message_id = ?`,
		it.Endpoint, string(it.Direction), it.MessageID).Scan(&st); err != nil {
		return false, "", fmt.Errorf("chatsqlite: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, "", fmt.Errorf("chatsqlite: commit: %w", err)
	}
	return n == 1, chatdb.State(st), nil
}

func (s *Chats) Lookup(ctx context.Context, endpoint string, dir chatdb.Direction, id string) (chatdb.State, bool, error) {
	var st string
	err := s.db.Read.QueryRowContext(ctx, `SELECT state FROM connector_chat_queue
		WHERE endpoint = ? AND direction = ? AND message_id = ?`, endpoint, string(dir), id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("chatsqlite: %w", err)
	}
	return chatdb.State(st), true, nil
}

func (s *Chats) Pending(ctx context.Context, endpoint string, dir chatdb.Direction, limit int) ([]chatdb.Item, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.Read.QueryContext(ctx, `SELECT message_id, channel_id, conversation, payload,
		expires_at, created_at, attempts FROM connector_chat_queue
		WHERE endpoint = ? AND direction = ? AND state = 'pending' ORDER BY seq LIMIT ?`,
		endpoint, string(dir), limit)
	out, err := collect(rows, err, func(row scanner) (chatdb.Item, error) {
		it := chatdb.Item{Endpoint: endpoint, Direction: dir, State: chatdb.Pending}
		var exp, created int64
		if err := row.Scan(&it.MessageID, &it.ChannelID, &it.Conversation, &it.Payload, &exp, &created, &it.Attempts); err != nil {
			return it, err
		}
		it.ExpiresAt, it.CreatedAt = time.UnixMilli(exp), time.UnixMilli(created)
		return it, nil
	})
	if err != nil {
		return nil, fmt.Errorf("chatsqlite: %w", err)
	}
	return out, nil
}

func (s *Chats) Attempt(ctx context.Context, endpoint string, dir chatdb.Direction, id string) error {
	return s.update(ctx, `UPDATE connector_chat_queue SET attempts = attempts + 1
		WHERE endpoint = ? AND direction = ? AND message_id = ? AND state = 'pending'`, endpoint, string(dir), id)
}

func (s *Chats) Finish(ctx context.Context, endpoint string, dir chatdb.Direction, id string, to chatdb.State) error {
	if !to.Terminal() {
		return errors.New("chatsqlite: Finish needs a terminal state")
	}
	return s.update(ctx, `UPDATE connector_chat_queue SET state = ?
		WHERE endpoint = ? AND direction = ? AND message_id = ? AND state = 'pending'`, string(to), endpoint, string(dir), id)
}

func (s *Chats) Reopen(ctx context.Context, endpoint string, dir chatdb.Direction, id string) error {
	return s.update(ctx, `UPDATE connector_chat_queue SET state = 'pending'
		WHERE endpoint = ? AND direction = ? AND message_id = ? AND state = 'delivered'`, endpoint, string(dir), id)
}

func (s *Chats) update(ctx context.Context, q string, args ...any) error {
	res, err := s.db.Write.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("chatsqlite: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return chatdb.ErrNotPending
	}
	return nil
}

func (s *Chats) Backlog(ctx context.Context, endpoint string, dir chatdb.Direction, conv string) (int, error) {
	var n int
	err := s.db.Read.QueryRowContext(ctx, `SELECT count(*) FROM connector_chat_queue
		WHERE endpoint = ?1 AND direction = ?2 AND state = 'pending' AND (?3 = '' OR conversation = ?3)`,
		endpoint, string(dir), conv).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("chatsqlite: %w", err)
	}
	return n, nil
}

func (s *Chats) Purge(ctx context.Context, before time.Time) (int, error) {
	res, err := s.db.Write.ExecContext(ctx, `DELETE FROM connector_chat_queue
		WHERE state <> 'pending' AND created_at < ?`, ms(before))
	if err != nil {
		return 0, fmt.Errorf("chatsqlite: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
