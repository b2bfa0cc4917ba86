// This file stores the operator console's logins in SQLite: it implements
// sessiondb.Driver on the gateway's store.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentgw/agentgw/console/sessiondb"
)

// ConsoleSessions is the SQLite console session store.
type ConsoleSessions struct {
	w *sql.DB
	r *sql.DB
}

var _ sessiondb.Driver = (*ConsoleSessions)(nil)

// NewConsoleSessions returns a ConsoleSessions on a database opened with
// Migrations.
func NewConsoleSessions(db *DB) *ConsoleSessions { return &ConsoleSessions{w: db.Write, r: db.Read} }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *ConsoleSessions) Create(ctx context.Context, s sessiondb.Session) error {
	_, err := c.w.ExecContext(ctx, `INSERT INTO console_sessions (id_hash, operator, by_token, expires, note, note_ok) VALUES (?, ?, ?, ?, ?, ?)`,
		s.IDHash, s.User, b2i(s.ByToken), s.Expires.UnixNano(), s.Note, b2i(s.NoteOK))
	if err != nil {
		return fmt.Errorf("consolesqlite: create: %w", err)
	}
	return nil
}

func (c *ConsoleSessions) Get(ctx context.Context, idHash string, now time.Time) (*sessiondb.Session, error) {
	s := sessiondb.Session{IDHash: idHash}
	var byToken, noteOK int
	var exp int64
	err := c.w.QueryRowContext(ctx, `SELECT operator, by_token, expires, note, note_ok FROM console_sessions WHERE id_hash = ? AND expires > ?`,
		idHash, now.UnixNano()).Scan(&s.User, &byToken, &exp, &s.Note, &noteOK)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consolesqlite: get: %w", err)
	}
	s.ByToken, s.NoteOK, s.Expires = byToken == 1, noteOK == 1, time.Unix(0, exp)
	return &s, nil
}

func (c *ConsoleSessions) Delete(ctx context.Context, idHash string) error {
	if _, err := c.w.ExecContext(ctx, `DELETE FROM console_sessions WHERE id_hash = ?`, idHash); err != nil {
		return fmt.Errorf("consolesqlite: delete: %w", err)
	}
	return nil
}

func (c *ConsoleSessions) SetNote(ctx context.Context, idHash, note string, ok bool) error {
	if _, err := c.w.ExecContext(ctx, `UPDATE console_sessions SET note = ?, note_ok = ? WHERE id_hash = ?`, note, b2i(ok), idHash); err != nil {
		return fmt.Errorf("consolesqlite: note: %w", err)
	}
	return nil
}

func (c *ConsoleSessions) TakeNote(ctx context.Context, idHash string) (string, bool, error) {
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return "", false, fmt.Errorf("consolesqlite: take note: %w", err)
	}
	defer tx.Rollback()
	// Read and clear on the one writer connection: two requests cannot
	// both take the note.
	var note string
	var ok int
	err = tx.QueryRowContext(ctx, `SELECT note, note_ok FROM console_sessions WHERE id_hash = ?`, idHash).Scan(&note, &ok)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && note == "") {
		return "", false, nil
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, `UPDATE console_sessions SET note = '', note_ok = 0 WHERE id_hash = ?`, idHash)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return "", false, fmt.Errorf("consolesqlite: take note: %w", err)
	}
	return note, ok == 1, nil
}

func (c *ConsoleSessions) Purge(ctx context.Context, now time.Time, max int) (int64, error) {
	res, err := c.w.ExecContext(ctx, `DELETE FROM console_sessions WHERE expires <= ? OR id_hash IN (
		SELECT id_hash FROM console_sessions ORDER BY expires DESC LIMIT -1 OFFSET ?)`, now.UnixNano(), max)
	if err != nil {
		return 0, fmt.Errorf("consolesqlite: purge: %w", err)
	}
	return res.RowsAffected()
}
