// This file keeps the connector bridge's IM v2 queues in PostgreSQL
// (migrations/0016b_connector_chat.sql): it implements chatdb.Driver,
// checked by store/storetest like store/sqlite.

package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/connectorbridge/chatdb"
)

// Chats implements chatdb.Driver.
type Chats struct{ db *DB }

var _ chatdb.Driver = (*Chats)(nil)

// NewChats wraps a store opened with Open.
func NewChats(db *DB) *Chats { return &Chats{db: db} }

func ms(t time.Time) int64 { return t.UnixMilli() }

func (s *Chats) Enqueue(ctx context.Context, it chatdb.Item) (bool, chatdb.State, error) {
	if len(it.Payload) > chatdb.MaxPayload {
		return false, "", errors.New("chatpg: payload too large")
	}
	if it.Direction != chatdb.Inbound && it.Direction != chatdb.Outbound {
		return false, "", errors.New("chatpg: unknown direction")
	}
	if it.CreatedAt.IsZero() {
		it.CreatedAt = time.Now()
	}
	// A concurrent insert of the same key from another connection waits
	// for that transaction and then inserts nothing (read committed), so
	// the SELECT that follows sees the committed row.
	var st string
	err := s.db.Pool.QueryRow(ctx, `INSERT INTO connector_chat_queue
		(endpoint, direction, message_id, channel_id, conversation, payload, expires_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (endpoint, direction, message_id) DO NOTHING
		RETURNING state`,
		it.Endpoint, string(it.Direction), it.MessageID, it.ChannelID, it.Conversation, it.Payload,
		ms(it.ExpiresAt), ms(it.CreatedAt)).Scan(&st)
	if err == nil {
		return true, chatdb.State(st), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return false, "", fmt.Errorf("chatpg: %w", err)
	}
	cur, found, err := s.Lookup(ctx, it.Endpoint, it.Direction, it.MessageID)
	if err != nil {
		return false, "", err
	}
	if !found {
		// Purged between the conflict and the read: rare, and a retry
		// of the caller's enqueue inserts it.
		return false, "", errors.New("chatpg: message vanished during enqueue")
	}
	return false, cur, nil
}

func (s *Chats) Lookup(ctx context.Context, endpoint string, dir chatdb.Direction, id string) (chatdb.State, bool, error) {
	var st string
	err := s.db.Pool.QueryRow(ctx, `SELECT state FROM connector_chat_queue
		WHERE endpoint = $1 AND direction = $2 AND message_id = $3`, endpoint, string(dir), id).Scan(&st)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("chatpg: %w", err)
	}
	return chatdb.State(st), true, nil
}

func (s *Chats) Pending(ctx context.Context, endpoint string, dir chatdb.Direction, limit int) ([]chatdb.Item, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.Pool.Query(ctx, `SELECT message_id, channel_id, conversation, payload,
		expires_at, created_at, attempts FROM connector_chat_queue
		WHERE endpoint = $1 AND direction = $2 AND state = 'pending' ORDER BY seq LIMIT $3`,
		endpoint, string(dir), limit)
	out, err := collect(rows, err, func(row pgx.Row) (chatdb.Item, error) {
		it := chatdb.Item{Endpoint: endpoint, Direction: dir, State: chatdb.Pending}
		var exp, created int64
		if err := row.Scan(&it.MessageID, &it.ChannelID, &it.Conversation, &it.Payload, &exp, &created, &it.Attempts); err != nil {
			return it, err
		}
		it.ExpiresAt, it.CreatedAt = time.UnixMilli(exp), time.UnixMilli(created)
		return it, nil
	})
	if err != nil {
		return nil, fmt.Errorf("chatpg: %w", err)
	}
	return out, nil
}

func (s *Chats) Attempt(ctx context.Context, endpoint string, dir chatdb.Direction, id string) error {
	return s.update(ctx, `UPDATE connector_chat_queue SET attempts = attempts + 1
		WHERE endpoint = $1 AND direction = $2 AND message_id = $3 AND state = 'pending'`, endpoint, string(dir), id)
}

func (s *Chats) Finish(ctx context.Context, endpoint string, dir chatdb.Direction, id string, to chatdb.State) error {
	if !to.Terminal() {
		return errors.New("chatpg: Finish needs a terminal state")
	}
	// PostgreSQL re-checks state = 'pending' on the newest row version
	// after waiting for a concurrent writer, so one Finish wins.
	return s.update(ctx, `UPDATE connector_chat_queue SET state = $1
		WHERE endpoint = $2 AND direction = $3 AND message_id = $4 AND state = 'pending'`, string(to), endpoint, string(dir), id)
}

func (s *Chats) Reopen(ctx context.Context, endpoint string, dir chatdb.Direction, id string) error {
	return s.update(ctx, `UPDATE connector_chat_queue SET state = 'pending'
		WHERE endpoint = $1 AND direction = $2 AND message_id = $3 AND state = 'delivered'`, endpoint, string(dir), id)
}

func (s *Chats) update(ctx context.Context, q string, args ...any) error {
	tag, err := s.db.Pool.Exec(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("chatpg: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return chatdb.ErrNotPending
	}
	return nil
}

func (s *Chats) Backlog(ctx context.Context, endpoint string, dir chatdb.Direction, conv string) (int, error) {
	var n int
	err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM connector_chat_queue
		WHERE endpoint = $1 AND direction = $2 AND state = 'pending' AND ($3::text = '' OR conversation = $3::text)`,
		endpoint, string(dir), conv).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("chatpg: %w", err)
	}
	return n, nil
}

func (s *Chats) Purge(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.db.Pool.Exec(ctx, `DELETE FROM connector_chat_queue
		WHERE state <> 'pending' AND created_at < $1`, ms(before))
	if err != nil {
		return 0, fmt.Errorf("chatpg: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
