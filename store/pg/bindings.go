// This file keeps the xAgent Connector bindings in PostgreSQL
// (migrations/0004_connector.sql): it implements bindingdb.Driver, checked
// by store/storetest like store/sqlite.
//
// Claims are held in the Store value, as in store/sqlite: one connection
// per connector_card_id within one process. Across instances sharing the
// database a claim must become a lease in the database; that is the
// cluster's (issue 19, part B) and extends this driver.

package pg

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
)

// Bindings implements bindingdb.Driver.
type Bindings struct {
	db *DB

	mu     sync.Mutex
	claims map[string]string // connector_card_id → owning endpoint
}

var _ bindingdb.Driver = (*Bindings)(nil)

// NewBindings wraps a store opened with Open.
func NewBindings(db *DB) *Bindings { return &Bindings{db: db, claims: map[string]string{}} }

const (
	authenticated   = "authenticated"
	unauthenticated = "unauthenticated"
)

// write runs f in one transaction after creating the row when missing.
func (s *Bindings) write(ctx context.Context, endpoint, cardID string, f func(tx pgx.Tx) error) error {
	tx, err := s.db.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("bindingpg: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO connector_bindings (endpoint, connector_card_id)
		VALUES ($1, $2) ON CONFLICT (endpoint, connector_card_id) DO NOTHING`, endpoint, cardID); err != nil {
		return fmt.Errorf("bindingpg: %w", err)
	}
	if err := f(tx); err != nil {
		return fmt.Errorf("bindingpg: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("bindingpg: commit: %w", err)
	}
	return nil
}

func (s *Bindings) Binding(ctx context.Context, endpoint, cardID string) (bindingdb.Binding, error) {
	var b bindingdb.Binding
	var auth string
	err := s.db.Pool.QueryRow(ctx, `SELECT connector_id, connector_channel_id, auth_state, generation
		FROM connector_bindings WHERE endpoint = $1 AND connector_card_id = $2`, endpoint, cardID).
		Scan(&b.ConnectorID, &b.ChannelID, &auth, &b.Generation)
	if errors.Is(err, pgx.ErrNoRows) {
		return bindingdb.Binding{}, nil
	}
	if err != nil {
		return bindingdb.Binding{}, fmt.Errorf("bindingpg: %w", err)
	}
	b.Authenticated = auth == authenticated
	return b, nil
}

func (s *Bindings) Generation(ctx context.Context, endpoint, cardID string) (int64, error) {
	var g int64
	err := s.db.Pool.QueryRow(ctx, `SELECT generation FROM connector_bindings
		WHERE endpoint = $1 AND connector_card_id = $2`, endpoint, cardID).Scan(&g)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("bindingpg: %w", err)
	}
	return g, nil
}

func (s *Bindings) SetConnectorID(ctx context.Context, endpoint, cardID, connectorID string) error {
	return s.write(ctx, endpoint, cardID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE connector_bindings SET connector_id = $1, updated_at = now()
			WHERE endpoint = $2 AND connector_card_id = $3`, connectorID, endpoint, cardID)
		return err
	})
}

func (s *Bindings) SetChannel(ctx context.Context, endpoint, cardID, channelID string, authn bool) (int64, error) {
	auth := unauthenticated
	if authn {
		auth = authenticated
	}
	var g int64
	err := s.write(ctx, endpoint, cardID, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `UPDATE connector_bindings
			SET connector_channel_id = $1, auth_state = $2,
			    generation = generation + CASE WHEN connector_channel_id <> $1 OR auth_state <> $2 THEN 1 ELSE 0 END,
			    updated_at = now()
			WHERE endpoint = $3 AND connector_card_id = $4
			RETURNING generation`, channelID, auth, endpoint, cardID).Scan(&g)
	})
	if err != nil {
		return 0, err
	}
	return g, nil
}

func (s *Bindings) SaveSnapshot(ctx context.Context, endpoint, cardID string, card []byte, skill string) error {
	var sk *string
	if skill != "" {
		sk = &skill
	}
	return s.write(ctx, endpoint, cardID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE connector_bindings SET card_json = $1, skill_md = $2, updated_at = now()
			WHERE endpoint = $3 AND connector_card_id = $4`, card, sk, endpoint, cardID)
		return err
	})
}

func (s *Bindings) SetHealth(ctx context.Context, endpoint, cardID, health, lastErr string) error {
	return s.write(ctx, endpoint, cardID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE connector_bindings SET health = $1, last_error = $2, updated_at = now()
			WHERE endpoint = $3 AND connector_card_id = $4`, health, lastErr, endpoint, cardID)
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
