// Package bindingdb defines the storage contract of the xAgent Connector
// bridge: the binding row it keeps per agent endpoint and Connector Card,
// and the narrow driver interface, one method per query, that
// store/sqlite implements and that a PostgreSQL driver can
// implement later. store/storetest is the conformance suite
// every driver passes.
//
// A binding is the ownership index endpoint + connector_card_id +
// connector_channel_id, with the last connector_id (the runtime instance,
// reused on reconnect), the auth state, the Card and Skill snapshots and
// the last health state. Target-system tokens, form secrets and the system
// API key are never stored. Every write method creates the row when it is
// missing.
package bindingdb

import "context"

// Binding is the persisted ownership index of one agent's channel.
type Binding struct {
	ConnectorID   string
	ChannelID     string
	Authenticated bool
	// Generation grows with every change of ChannelID or Authenticated,
	// from this process or another (`agentgw connector auth`), so a
	// running gateway notices a new binding.
	Generation int64
}

// MaxLastError is the longest last-error summary a driver stores, in
// characters.
const MaxLastError = 512

// Driver is a binding store.
type Driver interface {
	// Binding reads the binding of (endpoint, cardID); the zero Binding
	// when there is none.
	Binding(ctx context.Context, endpoint, cardID string) (Binding, error)
	// Generation reads the binding's generation; 0 when there is none.
	Generation(ctx context.Context, endpoint, cardID string) (int64, error)
	// SetConnectorID records the runtime instance. It does not move the
	// generation: the channel binding is unchanged.
	SetConnectorID(ctx context.Context, endpoint, cardID, connectorID string) error
	// SetChannel records the bound channel and its auth state and returns
	// the generation after the write; unchanged values leave it. An
	// authenticated binding without a channel is an error.
	SetChannel(ctx context.Context, endpoint, cardID, channelID string, authenticated bool) (generation int64, err error)
	// SaveSnapshot stores the validated Card and the Skill text ("" for
	// none).
	SaveSnapshot(ctx context.Context, endpoint, cardID string, card []byte, skill string) error
	// SetHealth records the last health state (connectorbridge's: unknown,
	// ok, degraded, offline, unauthorized or incompatible; another is an
	// error) and a safe error summary of at most MaxLastError characters.
	SetHealth(ctx context.Context, endpoint, cardID, health, lastErr string) error

	// Claim makes endpoint the live owner of cardID within this store
	// unless another endpoint owns it, and returns the owner after the
	// call: one gateway (one store) has one connection per
	// connector_card_id. Claims are not persisted; they end with Release
	// or with the process.
	Claim(ctx context.Context, cardID, endpoint string) (owner string, err error)
	// Release ends endpoint's claim on cardID; another owner's claim stays.
	Release(cardID, endpoint string)
}
