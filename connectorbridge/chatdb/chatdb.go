// Package chatdb defines the storage contract of the connector bridge's
// IM Profile v2 queues: every chat message the gateway accepted, in either
// direction, is a row here until it reaches a terminal state, so it
// survives a connector reconnect and a gateway kill -9 and is delivered
// once. store/sqlite and store/pg implement it;
// store/storetest is the conformance suite
// every driver passes.
//
// A row is keyed by (endpoint, direction, message_id): enqueueing the same
// message again (a connector redelivery, an XMPP client resend) is a no-op
// that reports the row already there. Terminal rows are kept until Purge so
// that a late redelivery is still recognised.
package chatdb

import (
	"context"
	"errors"
	"time"
)

// Direction is which way a message travels.
type Direction string

const (
	Inbound  Direction = "in"  // IM network → connector → XMPP inbox
	Outbound Direction = "out" // XMPP inbox → connector → IM network
)

// State is a queued message's delivery state. Pending is the only
// non-terminal one.
type State string

const (
	Pending   State = "pending"
	Delivered State = "delivered"
	Expired   State = "expired"
	Failed    State = "failed"
)

// Terminal reports whether s is final.
func (s State) Terminal() bool { return s == Delivered || s == Expired || s == Failed }

// Item is one queued message.
type Item struct {
	Endpoint     string
	Direction    Direction
	MessageID    string
	ChannelID    string
	Conversation string // "" when the message names none
	Payload      []byte // the bridge's own JSON encoding, at most MaxPayload bytes
	ExpiresAt    time.Time
	CreatedAt    time.Time
	State        State
	Attempts     int
}

// MaxPayload bounds one item's payload.
const MaxPayload = 256 << 10

// ErrNotPending reports a Finish or Attempt on a row that is absent or
// already terminal.
var ErrNotPending = errors.New("chatdb: message is not pending")

// Driver is a chat queue store.
type Driver interface {
	// Enqueue stores it as Pending unless (Endpoint, Direction, MessageID)
	// is there already; it reports whether it inserted and the row's
	// state after the call. Enqueue returns only once the row is durable.
	Enqueue(ctx context.Context, it Item) (inserted bool, state State, err error)
	// Lookup reads the state of (endpoint, dir, messageID); found is
	// false when there is no such row.
	Lookup(ctx context.Context, endpoint string, dir Direction, messageID string) (state State, found bool, err error)
	// Pending lists up to limit Pending items of (endpoint, dir), oldest
	// first.
	Pending(ctx context.Context, endpoint string, dir Direction, limit int) ([]Item, error)
	// Attempt counts one delivery attempt of a Pending item.
	Attempt(ctx context.Context, endpoint string, dir Direction, messageID string) error
	// Finish moves a Pending item to a terminal state (ErrNotPending if it
	// is not pending).
	Finish(ctx context.Context, endpoint string, dir Direction, messageID string, to State) error
	// Reopen moves a Delivered item back to Pending, keeping its place in
	// the order (a message the recipient bounced after it was handed on);
	// ErrNotPending if the item is absent or not Delivered.
	Reopen(ctx context.Context, endpoint string, dir Direction, messageID string) error
	// Backlog counts the Pending items of (endpoint, dir) and, when
	// conversation is not "", of that conversation only.
	Backlog(ctx context.Context, endpoint string, dir Direction, conversation string) (int, error)
	// Purge deletes terminal items created before before and returns how
	// many it deleted. Pending items are never purged.
	Purge(ctx context.Context, before time.Time) (int, error)
}
