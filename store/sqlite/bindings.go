// This file keeps the xAgent Connector bindings in the
// gateway's SQLite store (migrations/0004_connector.sql): it implements
// bindingdb.Driver, checked by store/storetest.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
)

// Bindings implements bindingdb.Driver. Its claims live in the Store value:
// make one per database and share it between the connector agents.
type Bindings struct {
	db *DB

	mu     sync.Mutex
	claims map[string]string // connector_card_id → owning endpoint
}

var _ bindingdb.Driver = (*Bindings)(nil)

// NewBindings wraps a store opened with Migrations.
func NewBindings(db *DB) *Bindings { return &Bindings{db: db, claims: map[string]string{}} }

const (
	authenticated   = "authenticated"
	unauthenticated = "unauthenticated"
)

// ensure creates the row with its defaults when it is missing.
func ensure(ctx context.Context, tx *sql.Tx, endpoint, cardID string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO connector_bindings (endpoint, connector_card_id)
		VALUES (?, ?) ON CONFLICT (endpoint, connector_card_id) DO NOTHING`, endpoint, cardID)
	return err
}

// write runs f after ensure, in one transaction.
func (s *Bindings) write(ctx context.Context, endpoint, cardID string, f func(tx *sql.Tx) error) error {
	tx, err := s.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("bindingsqlite: %w", err)
	}
	defer tx.Rollback()
	if err := ensure(ctx, tx, endpoint, cardID); err != nil {
		return fmt.Errorf("bindingsqlite: %w", err)
	}
	if err := f(tx); err != nil {
		return fmt.Errorf("bindingsqlite: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("bindingsqlite: commit: %w", err)
	}
	return nil
}

func (s *Bindings) Binding(ctx context.Context, endpoint, cardID string) (bindingdb.Binding, error) {
	var b bindingdb.Binding
	var auth string
	err := s.db.Read.QueryRowContext(ctx, `SELECT connector_id, connector_channel_id, auth_state, generation
		FROM connector_bindings WHERE endpoint = ? AND connector_card_id = ?`, endpoint, cardID).
		Scan(&b.ConnectorID, &b.ChannelID, &auth, &b.Generation)
	if errors.Is(err, sql.ErrNoRows) {
		return bindingdb.Binding{}, nil
	}
	if err != nil {
		return bindingdb.Binding{}, fmt.Errorf("bindingsqlite: %w", err)
	}
	b.Authenticated = auth == authenticated
	return b, nil
}

func (s *Bindings) Generation(ctx context.Context, endpoint, cardID string) (int64, error) {
	var g int64
	err := s.db.Read.QueryRowContext(ctx, `SELECT generation FROM connector_bindings
		WHERE endpoint = ? AND connector_card_id = ?`, endpoint, cardID).Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return g, err
}

func (s *Bindings) SetConnectorID(ctx context.Context, endpoint, cardID, connectorID string) error {
	return s.write(ctx, endpoint, cardID, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE connector_bindings SET connector_id = ?,
			updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
			WHERE endpoint = ? AND connector_card_id = ?`, connectorID, endpoint, cardID)
		return err
	})
}

func (s *Bindings) SetChannel(ctx context.Context, endpoint, cardID, channelID string, authn bool) (int64, error) {
	auth := unauthenticated
	if authn {
		auth = authenticated
	}
	var g int64
	err := s.write(ctx, endpoint, cardID, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `UPDATE connector_bindings
			SET connector_channel_id = ?1, auth_state = ?2,
			    generation = generation + (connector_channel_id <> ?1 OR auth_state <> ?2),
			    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
			WHERE endpoint = ?3 AND connector_card_id = ?4
			RETURNING generation`, channelID, auth, endpoint, cardID).Scan(&g)
	})
	if err != nil {
		return 0, err
	}
	return g, nil
}

func (s *Bindings) SaveSnapshot(ctx context.Context, endpoint, cardID string, card []byte, skill string) error {
	var sk any
	if skill != "" {
		sk = skill
	}
	return s.write(ctx, endpoint, cardID, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE connector_bindings SET card_json = ?, skill_md = ?,
			updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
			WHERE endpoint = ? AND connector_card_id = ?`, card, sk, endpoint, cardID)
		return err
	})
}

func (s *Bindings) SetHealth(ctx context.Context, endpoint, cardID, health, lastErr string) error {
	return s.write(ctx, endpoint, cardID, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE connector_bindings SET health = ?, last_error = ?,
			updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
			WHERE endpoint = ? AND connector_card_id = ?`, health, lastErr, endpoint, cardID)
		return err
	})
}

func (s *Bindings) Claim(_ context.Context, cardID, endpoint string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if owner, ok := s.claims[cardID]; ok {
		return owner, nil
	}
	s.claims[cardID] = endpoint
	return endpoint, nil
}

func (s *Bindings) Release(cardID, endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims[cardID] == endpoint {
		delete(s.claims, cardID)
	}
}
