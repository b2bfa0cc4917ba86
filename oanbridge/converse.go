package oanbridge

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/wire"
)

// The conversation capability: the owner chats with the endpoint; a
// turn is a Gofer chat message (the resource names the Gofer, else the
// account's only or last created one), and the Gofer's messages come
// back as chat from endpoint/goferId. Only the owner converses.

// MaxTurnRunes bounds one chat turn sent to a Gofer.
const MaxTurnRunes = 8000

// CanConverse implements backendkit.Conversant.
func (b *Backend) CanConverse(endpoint string) bool {
	return strings.EqualFold(endpoint, b.o.Endpoint) && b.Connected()
}

// Converse implements backendkit.Conversant: it POSTs the owner's turn to
// the Gofer's role-chat and returns once OAN took it (202). When the
// Gofer has an open question, the turn is its answer.
func (b *Backend) Converse(ctx context.Context, t backendkit.Turn) error {
	if !b.isOwner(t.From) {
		return errNotOwnerChat
	}
	if !b.Connected() {
		return backendkit.ErrChatUnavailable
	}
	body := strings.TrimSpace(t.Body)
	if body == "" {
		return errEmptyTurn
	}
	if len([]rune(body)) > MaxTurnRunes {
		return backendkit.ErrChatTooLarge
	}
	gofer, err := b.resolveGofer(ctx, t.Resource)
	if err != nil {
		if errorsIsAPI(err) {
			b.recheckOn(err)
			return backendkit.ErrChatUnavailable
		}
		return err
	}
	// An open question of this Gofer is answered by the turn: the same
	// POST, recorded so the escalations tool does not ask it again.
	if items, err := b.st.Items(ctx, b.o.Endpoint, oandb.StatePending, oandb.StateDeferred); err == nil {
		for _, it := range items {
			if it.Kind == oandb.KindQuestion && it.GoferID == gofer {
				if env, err := wire.ParseEnvelope(it.Envelope); err == nil && env.Constraints != nil && env.Constraints.MaxLength > 0 &&
					len([]rune(body)) > env.Constraints.MaxLength {
					return errTooLongForQuestion
				}
				if b.decide(ctx, it, `{"answer":"chat"}`, map[string]any{"content": body}) {
					b.ack(ctx, t)
					return nil
				}
				return backendkit.ErrChatUnavailable
			}
		}
	}
	rel, _ := seg("gofers", gofer, "chat", "messages")
	if _, err := b.api.do(ctx, http.MethodPost, rel, nil, map[string]any{"content": body}, nil); err != nil {
		b.recheckOn(err)
		return backendkit.ErrChatUnavailable
	}
	b.mu.Lock()
	b.lastGofer = gofer
	b.mu.Unlock()
	b.ack(ctx, t)
	return nil
}

func (b *Backend) ack(ctx context.Context, t backendkit.Turn) {
	b.mu.Lock()
	c := b.chat
	b.mu.Unlock()
	if c != nil && t.ReceiptRequested {
		c.Ack(ctx, backendkit.Ack{Endpoint: b.o.Endpoint, Resource: t.Resource, To: t.From, ID: t.ID})
	}
}

type chatErr string

func (e chatErr) Error() string { return string(e) }

const (
	errNotOwnerChat       = chatErr("only the OAN account's owner can chat with its Gofers")
	errEmptyTurn          = chatErr("empty message")
	errTooLongForQuestion = chatErr("the Gofer's open question allows a shorter answer")
)

// recheckOn asks the session to probe the key after a 401 or a ban seen
// by a chat turn, as a tool does.
func (b *Backend) recheckOn(err error) {
	if errors.Is(err, ErrRevoked) || errors.Is(err, ErrBanned) {
		b.recheck()
	}
}

// ChatRecipients implements backendkit.ChatConsent: the configured owner
// consents by configuration, so the Gofer's unprompted messages (match
// notices, relays, late replies) reach it without its writing first, from
// the first moment and after every restart.
func (b *Backend) ChatRecipients(endpoint string) []string {
	if !strings.EqualFold(endpoint, b.o.Endpoint) {
		return nil
	}
	if j, err := jid.Parse(b.o.Owner); err == nil {
		return []string{j.Bare().String()}
	}
	return []string{b.o.Owner}
}

var _ backendkit.ChatConsent = (*Backend)(nil)

func errorsIsAPI(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) || errors.Is(err, ErrRevoked) || errors.Is(err, ErrBanned) || errors.Is(err, ErrRedirect)
}

// chatMessage is one outbound message to the owner.
func chatMessage(endpoint, owner string, m oandb.Outbound) backendkit.Message {
	return backendkit.Message{Endpoint: endpoint, Resource: m.GoferID, To: owner, ID: m.ID, Body: m.Body, Store: true}
}
