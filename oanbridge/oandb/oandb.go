// Package oandb defines the storage contract of the OpenAgentNetwork
// bridge: the event cursor of one OAN account, the record of applied
// events, and the durable effects of those events (open questions and
// decisions, outbound chat, matched conversations, the account status),
// each event committed together with its effects and the cursor.
// store/sqlite and store/pg implement it; store/storetest is the
// conformance suite every driver passes. No API key is ever stored: the
// account is identified by the endpoint JID and the key only by a
// fingerprint (KeyID).
package oandb

import (
	"context"
	"errors"
)

// Event is one OAN event being applied.
type Event struct {
	Seq     uint64 // numeric, > 0
	EventID string
	Type    string
}

// Item kinds and states.
const (
	KindQuestion     = "question"      // a gofer_question awaiting an answer
	KindMatchRequest = "match_request" // a match request awaiting the owner's decision
	KindPairProposed = "pair_proposed" // a pairing awaiting the owner's confirmation

	StatePending  = "pending"  // the owner has not answered
	StateDeferred = "deferred" // the owner said "defer": asked again by a later escalations task
	StatePosting  = "posting"  // the owner answered; the POST is under way
	StatePosted   = "posted"   // OAN took the answer
	StateClosed   = "closed"   // resolved without a POST from here (decided elsewhere, superseded)
)

// Item is an open question or decision.
type Item struct {
	EventID   string
	Seq       uint64
	Kind      string
	GoferID   string
	ReplyPath string // checked relative API path
	Envelope  []byte // the validated envelope JSON
	State     string
	Decision  string // the owner's answer, once given (canonical JSON)
}

// Outbound is a chat message waiting to be delivered on the XMPP side.
type Outbound struct {
	ID      string // stable (derived from the event id): the chat message id
	GoferID string
	Body    string
}

// Conversation is a matched direct channel.
type Conversation struct {
	ConversationID string
	GoferID        string
}

// Effect is everything one event changes, committed with it.
type Effect struct {
	Items         []Item
	Outbound      []Outbound
	Conversations []Conversation
	// Close moves the items with these event ids to StateClosed.
	Close []string
	// Status, when not empty, sets the account status (StatusBanned, …).
	Status string
}

// Account statuses.
const (
	StatusOK      = "ok"
	StatusRevoked = "revoked"
	StatusBanned  = "banned"
)

// ErrNoCursor is returned by Cursor when the account has none yet.
var ErrNoCursor = errors.New("oandb: no cursor")

// Driver is an OAN bridge store. account is the endpoint's bare JID.
type Driver interface {
	// Cursor returns the largest seq processed, or ErrNoCursor.
	Cursor(ctx context.Context, account string) (uint64, error)
	// InitCursor sets the cursor if the account has none (a fresh
	// connector starts from GET /events/cursor); it returns the cursor
	// after the call.
	InitCursor(ctx context.Context, account string, seq uint64) (uint64, error)
	// Apply commits ev with eff and advances the cursor to max(cursor,
	// ev.Seq), all in one transaction, unless the event was applied
	// before: then it changes nothing and reports false. An event is
	// "applied before" when its EventID was, or, unless imported, when
	// its Seq is not above the cursor. imported is for
	// /events/unresolved, whose envelopes are older than the cursor; it
	// never moves the cursor.
	Apply(ctx context.Context, account string, ev Event, eff Effect, imported bool) (applied bool, err error)
	// Skip advances the cursor past seq without applying anything (an
	// envelope that was refused), so a refused event is not fetched
	// again forever.
	Skip(ctx context.Context, account string, seq uint64) error
	// SeenSeq reports the seq an event id was applied with (ok false when
	// never applied).
	SeenSeq(ctx context.Context, account, eventID string) (seq uint64, ok bool, err error)

	// Items lists the items in the given states, by seq.
	Items(ctx context.Context, account string, states ...string) ([]Item, error)
	// Item reads one item (ok false when there is none).
	Item(ctx context.Context, account, eventID string) (Item, bool, error)
	// Transition moves an item from one of from to to, recording
	// decision when not empty; it reports false (and changes nothing)
	// when the item is not in one of from. This is the exactly-once guard
	// of a decision: only one caller moves pending → posting.
	Transition(ctx context.Context, account, eventID string, from []string, to, decision string) (bool, error)

	// PendingOutbound lists undelivered outbound messages in order;
	// Delivered marks one delivered.
	PendingOutbound(ctx context.Context, account string) ([]Outbound, error)
	Delivered(ctx context.Context, account, id string) error

	// Prune bounds the store: it forgets applied-event records with a seq
	// below belowSeq (the cursor alone then keeps those events out) and
	// delivered outbound messages.
	Prune(ctx context.Context, account string, belowSeq uint64) error

	// Conversation looks a matched conversation up.
	Conversation(ctx context.Context, account, conversationID string) (Conversation, bool, error)

	// Status reads the account status and the key fingerprint it was set
	// for ("" and StatusOK when never set); SetStatus writes them.
	Status(ctx context.Context, account string) (status, keyID string, err error)
	SetStatus(ctx context.Context, account, status, keyID string) error
}
