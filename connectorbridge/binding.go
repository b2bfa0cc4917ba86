package connectorbridge

import (
	"context"
	"fmt"

	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/connectorbridge/wire"
)

// binding is the persisted ownership index of one agent's channel.
type binding = bindingdb.Binding

// bindingStore is one agent's view of the binding driver. A nil
// *bindingStore keeps nothing, for unit tests without a database.
type bindingStore struct {
	d        bindingdb.Driver
	endpoint string
}

func (s *bindingStore) load(ctx context.Context, cardID string) (binding, error) {
	if s == nil {
		return binding{}, nil
	}
	b, err := s.d.Binding(ctx, s.endpoint, cardID)
	if err != nil {
		return b, fmt.Errorf("connector store: %w", err)
	}
	return b, nil
}

func (s *bindingStore) generation(ctx context.Context, cardID string) (int64, error) {
	if s == nil {
		return 0, nil
	}
	return s.d.Generation(ctx, s.endpoint, cardID)
}

// setConnectorID records the runtime instance; it does not bump the
// generation, since it does not change the channel binding.
func (s *bindingStore) setConnectorID(ctx context.Context, cardID, connectorID string) error {
	if s == nil {
		return nil
	}
	if err := s.d.SetConnectorID(ctx, s.endpoint, cardID, connectorID); err != nil {
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
	g, err := s.d.SetChannel(ctx, s.endpoint, cardID, channelID, authenticated)
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
	if err := s.d.SaveSnapshot(ctx, s.endpoint, cardID, card, skill); err != nil {
		return fmt.Errorf("connector store: %w", err)
	}
	return nil
}

// setHealth records the last health state and a safe error summary.
func (s *bindingStore) setHealth(ctx context.Context, cardID, health, lastErr string) error {
	if s == nil {
		return nil
	}
	if err := s.d.SetHealth(ctx, s.endpoint, cardID, health, wire.TruncateRunes(lastErr, 500)); err != nil {
		return fmt.Errorf("connector store: %w", err)
	}
	return nil
}

// claimCard registers endpoint as the live owner of cardID within the
// store d; it fails when another live agent already owns it (architecture
// §3.3: one gateway, one store, one connection per connector_card_id).
func claimCard(ctx context.Context, d bindingdb.Driver, cardID, endpoint string) error {
	if d == nil {
		return nil
	}
	owner, err := d.Claim(ctx, cardID, endpoint)
	if err != nil {
		return fmt.Errorf("connector store: %w", err)
	}
	if owner != endpoint {
		return fmt.Errorf("connector card %s is already served by agent %s; one gateway allows one connection per connector_card_id", cardID, owner)
	}
	return nil
}

func releaseCard(d bindingdb.Driver, cardID, endpoint string) {
	if d == nil || cardID == "" {
		return
	}
	d.Release(cardID, endpoint)
}
