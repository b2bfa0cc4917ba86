// This file stores the operator console's logins in PostgreSQL: it
// implements sessiondb.Driver, checked by store/storetest like
// store/sqlite. The members of a cluster share the logins.

package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/console/sessiondb"
)

// ConsoleSessions is the PostgreSQL console session store.
type ConsoleSessions struct{ db *DB }

var _ sessiondb.Driver = (*ConsoleSessions)(nil)

// NewConsoleSessions returns a ConsoleSessions on a database opened with
// Open.
func NewConsoleSessions(db *DB) *ConsoleSessions { return &ConsoleSessions{db: db} }

func (c *ConsoleSessions) Create(ctx context.Context, s sessiondb.Session) error {
	_, err := c.db.Pool.Exec(ctx, `INSERT INTO console_sessions (id_hash, operator, by_token, expires, note, note_ok) VALUES ($1, $2, $3, $4, $5, $6)`,
		s.IDHash, s.User, s.ByToken, s.Expires.UTC(), s.Note, s.NoteOK)
	if err != nil {
		return fmt.Errorf("consolepg: create: %w", err)
	}
	return nil
}

func (c *ConsoleSessions) Get(ctx context.Context, idHash string, now time.Time) (*sessiondb.Session, error) {
	s := sessiondb.Session{IDHash: idHash}
	err := c.db.Pool.QueryRow(ctx, `SELECT operator, by_token, expires, note, note_ok FROM console_sessions WHERE id_hash = $1 AND expires > $2`,
		idHash, now.UTC()).Scan(&s.User, &s.ByToken, &s.Expires, &s.Note, &s.NoteOK)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consolepg: get: %w", err)
	}
	return &s, nil
}

func (c *ConsoleSessions) Delete(ctx context.Context, idHash string) error {
	if _, err := c.db.Pool.Exec(ctx, `DELETE FROM console_sessions WHERE id_hash = $1`, idHash); err != nil {
		return fmt.Errorf("consolepg: delete: %w", err)
	}
	return nil
}

func (c *ConsoleSessions) SetNote(ctx context.Context, idHash, note string, ok bool) error {
	if _, err := c.db.Pool.Exec(ctx, `UPDATE console_sessions SET note = $2, note_ok = $3 WHERE id_hash = $1`, idHash, note, ok); err != nil {
		return fmt.Errorf("consolepg: note: %w", err)
	}
	return nil
}

func (c *ConsoleSessions) TakeNote(ctx context.Context, idHash string) (string, bool, error) {
	var note string
	var ok bool
	// The old values, cleared in one statement under the row's lock: two
	// members cannot both take the note.
	err := c.db.Pool.QueryRow(ctx, `UPDATE console_sessions s SET note = '', note_ok = false
		FROM (SELECT id_hash, note, note_ok FROM console_sessions WHERE id_hash = $1 FOR UPDATE) old
		WHERE s.id_hash = old.id_hash AND old.note <> ''
		RETURNING old.note, old.note_ok`, idHash).Scan(&note, &ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("consolepg: take note: %w", err)
	}
	return note, ok, nil
}

func (c *ConsoleSessions) Purge(ctx context.Context, now time.Time, max int) (int64, error) {
	tag, err := c.db.Pool.Exec(ctx, `DELETE FROM console_sessions WHERE expires <= $1 OR id_hash IN (
		SELECT id_hash FROM console_sessions ORDER BY expires DESC OFFSET $2)`, now.UTC(), max)
	if err != nil {
		return 0, fmt.Errorf("consolepg: purge: %w", err)
	}
	return tag.RowsAffected(), nil
}
