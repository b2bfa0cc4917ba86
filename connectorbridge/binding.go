package connectorbridge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/agentgw/agentgw/internal/store"
)

// binding is the persisted ownership index of one agent's channel.
type binding struct {
	ConnectorID   string
	ChannelID     string
	Authenticated bool
	Generation    int64
}

// bindingStore keeps connector state in the connector_bindings table
// (migration 0004). A nil *bindingStore keeps nothing, for unit tests
// without a database.
type bindingStore struct {
	db       *store.DB
	endpoint string
}

func (s *bindingStore) ensure(ctx context.Context, cardID string) error {
	if s == nil {
		return nil
	}
	_, err := s.db.Write.ExecContext(ctx, `INSERT INTO connector_bindings (endpoint, connector_card_id)
		VALUES (?, ?) ON CONFLICT (endpoint, connector_card_id) DO NOTHING`, s.endpoint, cardID)
	if err != nil {
		return fmt.Errorf("connector store: %w", err)
	}
	return nil
}

func (s *bindingStore) load(ctx context.Context, cardID string) (binding, error) {
	var b binding
	if s == nil {
		return b, nil
	}
	var auth string
	err := s.db.Read.QueryRowContext(ctx, `SELECT connector_id, connector_channel_id, auth_state, generation
		FROM connector_bindings WHERE endpoint = ? AND connector_card_id = ?`, s.endpoint, cardID).
		Scan(&b.ConnectorID, &b.ChannelID, &auth, &b.Generation)
	if errors.Is(err, sql.ErrNoRows) {
		return binding{}, nil
	}
	if err != nil {
		return b, fmt.Errorf("connector store: %w", err)
	}
	b.Authenticated = auth == "authenticated"
	return b, nil
}

func (s *bindingStore) generation(ctx context.Context, cardID string) (int64, error) {
	if s == nil {
		return 0, nil
	}
	var g int64
	err := s.db.Read.QueryRowContext(ctx, `SELECT generation FROM connector_bindings
		WHERE endpoint = ? AND connector_card_id = ?`, s.endpoint, cardID).Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return g, err
}

// setConnectorID records the runtime instance; it does not bump the
// generation, since it does not change the channel binding.
func (s *bindingStore) setConnectorID(ctx context.Context, cardID, connectorID string) error {
	if s == nil {
		return nil
	}
	if err := s.ensure(ctx, cardID); err != nil {
		return err
	}
	_, err := s.db.Write.ExecContext(ctx, `UPDATE connector_bindings SET connector_id = ?,
		updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
		WHERE endpoint = ? AND connector_card_id = ?`, connectorID, s.endpoint, cardID)
	if err != nil {
		return fmt.Errorf("connector store: %w", err)
	}
	return nil
}

// setChannel records the bound channel and its auth state and returns the
// new generation. Unchanged values do not bump the generation.
func (s *bindingStore) setChannel(ctx context.Context, cardID, channelID string, authenticated bool) (int64, error) {
	if s == nil {
		return 0, nil
	}
	if err := s.ensure(ctx, cardID); err != nil {
		return 0, err
	}
	auth := "unauthenticated"
	if authenticated {
		auth = "authenticated"
	}
	var g int64
	err := s.db.Write.QueryRowContext(ctx, `UPDATE connector_bindings
		SET connector_channel_id = ?1, auth_state = ?2,
		    generation = generation + (connector_channel_id <> ?1 OR auth_state <> ?2),
		    updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
		WHERE endpoint = ?3 AND connector_card_id = ?4
		RETURNING generation`, channelID, auth, s.endpoint, cardID).Scan(&g)
	if err != nil {
		return 0, fmt.Errorf("connector store: %w", err)
	}
	return g, nil
}

// saveSnapshot stores the validated Card and the Skill cache.
func (s *bindingStore) saveSnapshot(ctx context.Context, cardID string, card []byte, skill string) error {
	if s == nil {
		return nil
	}
	if err := s.ensure(ctx, cardID); err != nil {
		return err
	}
	_, err := s.db.Write.ExecContext(ctx, `UPDATE connector_bindings SET card_json = ?, skill_md = ?,
		updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
		WHERE endpoint = ? AND connector_card_id = ?`, card, nullable(skill), s.endpoint, cardID)
	if err != nil {
		return fmt.Errorf("connector store: %w", err)
	}
	return nil
}

// setHealth records the last health state and a safe error summary.
func (s *bindingStore) setHealth(ctx context.Context, cardID, health, lastErr string) error {
	if s == nil {
		return nil
	}
	if err := s.ensure(ctx, cardID); err != nil {
		return err
	}
	_, err := s.db.Write.ExecContext(ctx, `UPDATE connector_bindings SET health = ?, last_error = ?,
		updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
		WHERE endpoint = ? AND connector_card_id = ?`, health, truncateRunes(lastErr, 500), s.endpoint, cardID)
	if err != nil {
		return fmt.Errorf("connector store: %w", err)
	}
	return nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// liveCards enforces the catalog rule that one gateway (one store) has one
// connection per connector_card_id (architecture §3.3).
var liveCards = struct {
	sync.Mutex
	m map[liveKey]string
}{m: map[liveKey]string{}}

type liveKey struct {
	db     *store.DB
	cardID string
}

// claimCard registers endpoint as the owner of cardID within this store; it
// fails when another live agent already owns it.
func claimCard(db *store.DB, cardID, endpoint string) error {
	if db == nil {
		return nil
	}
	liveCards.Lock()
	defer liveCards.Unlock()
	k := liveKey{db, cardID}
	if owner, ok := liveCards.m[k]; ok && owner != endpoint {
		return fmt.Errorf("connector card %s is already served by agent %s; one gateway allows one connection per connector_card_id", cardID, owner)
	}
	liveCards.m[k] = endpoint
	return nil
}

func releaseCard(db *store.DB, cardID, endpoint string) {
	if db == nil || cardID == "" {
		return
	}
	liveCards.Lock()
	defer liveCards.Unlock()
	k := liveKey{db, cardID}
	if liveCards.m[k] == endpoint {
		delete(liveCards.m, k)
	}
}
