package oanbridge

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/wire"
)

// waiter is a chat task waiting for its Gofer's next turn.
type waiter struct {
	gofer string
	ch    chan *wire.Envelope
}

// Bounds of what the bridge shows from an event.
const (
	maxShown     = 2000 // runes of Gofer or counterpart text in a chat or question
	maxNameShown = 80   // runes of a counterpart's name
)

// How an envelope arrived.
type origin int

const (
	live     origin = iota // the socket
	backfill               // a GET /events page
	imported               // GET /events/unresolved
)

// handle applies one validated envelope: its effect and the cursor are
// committed together, once, however often the event is delivered. A
// refused event moves the cursor only when it came from a back-fill page
// (so a bad event cannot stall paging); a live one never does, so a
// hostile live envelope cannot push the cursor past real events.
func (b *Backend) handle(ctx context.Context, env *wire.Envelope, from origin) error {
	acct := b.o.Endpoint
	seq, seen, err := b.st.SeenSeq(ctx, acct, env.EventID)
	if err != nil {
		return err
	}
	if seen {
		if seq != env.Seq {
			b.log.Warn("OAN event with a known eventId but another seq; dropped", "event", env.EventID)
			if from == backfill {
				return b.st.Skip(ctx, acct, env.Seq)
			}
		}
		return nil
	}
	eff, notify, refuse := b.effectOf(ctx, env)
	if refuse != "" {
		// Logged once per event: a live refusal is followed by a back-fill
		// that meets the same event again.
		if b.firstRefusal(env.EventID) {
			b.log.Warn("OAN event refused", "type", env.Type, "event", env.EventID, "reason", refuse)
		}
		if from != backfill {
			// A live envelope never moves the cursor itself (it could name
			// any seq); the back-fill it triggers moves it past the event
			// if OAN really recorded it.
			if from == live {
				return errRefusedLive
			}
			return nil
		}
		return b.st.Skip(ctx, acct, env.Seq)
	}
	applied, err := b.st.Apply(ctx, acct, oandb.Event{Seq: env.Seq, EventID: env.EventID, Type: env.Type}, eff, from == imported)
	if err != nil || !applied {
		return err
	}
	if len(eff.Items) > 0 || len(eff.Close) > 0 {
		b.kick()
	}
	if notify != nil {
		select {
		case notify.ch <- env:
		default:
			b.log.Warn("a chat task's event queue is full; the event stays in the store", "event", env.EventID)
		}
	}
	if len(eff.Outbound) > 0 {
		b.deliverOutbound(ctx)
	}
	if eff.Status == oandb.StatusBanned {
		// The session ends as for a refused handshake: the endpoint goes
		// unavailable until a new pairing (classify).
		b.log.Error("OAN announced an account ban (system_notice account_banned)")
		return ErrBanned
	}
	return nil
}

// errRefusedLive: a live envelope was refused; the session back-fills so
// that a recorded event moves the cursor.
var errRefusedLive = errors.New("a live OAN event was refused")

// maxRefusalsRemembered bounds the event ids whose refusal was logged.
const maxRefusalsRemembered = 4096

// firstRefusal reports whether eventID's refusal has not been logged yet.
func (b *Backend) firstRefusal(eventID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refused == nil || len(b.refused) >= maxRefusalsRemembered {
		b.refused = map[string]bool{}
	}
	if b.refused[eventID] {
		return false
	}
	b.refused[eventID] = true
	return true
}

// effectOf computes what an event changes. notify is the chat task to
// hand the event to after commit; refuse, when not empty, is why the
// event is dropped.
func (b *Backend) effectOf(ctx context.Context, env *wire.Envelope) (eff oandb.Effect, notify *waiter, refuse string) {
	b.mu.Lock()
	w := b.waiters[env.GoferID]
	b.mu.Unlock()
	p := env.Payload
	item := func(kind string) (oandb.Item, string) {
		rel, err := wire.CheckReply(env)
		if err != nil {
			return oandb.Item{}, err.Error()
		}
		return oandb.Item{EventID: env.EventID, Seq: env.Seq, Kind: kind, GoferID: env.GoferID, ReplyPath: rel, Envelope: env.Raw}, ""
	}
	// Any reply target must be the event's own resource (§5.2, §7), also
	// on events that are only shown: a hostile one drops the event.
	if env.Reply != nil {
		if _, err := wire.CheckReply(env); err != nil {
			return eff, nil, err.Error()
		}
	}
	out := func(body string) {
		eff.Outbound = append(eff.Outbound, oandb.Outbound{ID: "oan-" + env.EventID, GoferID: env.GoferID, Body: body})
	}
	switch env.Type {
	case wire.TypeGoferMessage:
		if env.GoferID == "" {
			return eff, nil, "gofer_message without goferId"
		}
		if !wire.Trusted(env.Source) {
			return eff, nil, "gofer_message with an untrusted source"
		}
		if w != nil {
			return eff, w, ""
		}
		out(wire.Str(p, "content", maxShown))
	case wire.TypeGoferQuestion:
		if env.GoferID == "" {
			return eff, nil, "gofer_question without goferId"
		}
		if !wire.Trusted(env.Source) {
			return eff, nil, "gofer_question with an untrusted source"
		}
		it, why := item(oandb.KindQuestion)
		if why != "" {
			return eff, nil, why
		}
		eff.Items = append(eff.Items, it)
		if w != nil {
			return eff, w, ""
		}
		out("Your Gofer asks: " + wire.Str(p, "content", maxShown) + "\n(Reply here, or answer it with the escalations tool.)")
	case wire.TypeMatchRequest:
		it, why := item(oandb.KindMatchRequest)
		if why != "" {
			return eff, nil, why
		}
		eff.Items = append(eff.Items, it)
		out("New match request from " + quoteName(p["counterpartRoleName"]) + ". Answer it with the escalations tool.")
	case wire.TypePairProposed:
		if env.Reply == nil {
			out("Your Gofer was paired with " + quoteName(p["counterpartRoleName"]) + " (no confirmation needed).")
			break
		}
		it, why := item(oandb.KindPairProposed)
		if why != "" {
			return eff, nil, why
		}
		eff.Items = append(eff.Items, it)
		out("A pairing with " + quoteName(p["counterpartRoleName"]) + " awaits your confirmation. Answer it with the escalations tool.")
	case wire.TypeMatchDecided:
		rid := wire.Str(p, "requestId", wire.MaxIDBytes)
		conv := wire.Str(p, "conversationId", wire.MaxIDBytes)
		if conv == "" {
			conv = env.ConversationID
		}
		if wire.Str(p, "status", 16) == "accepted" && wire.ValidID(conv) {
			eff.Conversations = append(eff.Conversations, oandb.Conversation{ConversationID: conv, GoferID: env.GoferID})
		}
		// A decision made elsewhere closes the open item.
		if open, err := b.st.Items(ctx, b.o.Endpoint, oandb.StatePending, oandb.StateDeferred); err == nil {
			for _, it := range open {
				if it.Kind == oandb.KindMatchRequest && strings.HasSuffix(it.ReplyPath, "/"+rid+"/decision") {
					eff.Close = append(eff.Close, it.EventID)
				}
			}
		}
		out(fmt.Sprintf("Match request %s: %s.", rid, wire.Str(p, "status", 16)))
	case wire.TypeRelayMessage:
		out(untrusted("the matched counterpart's owner", wire.Str(p, "content", maxShown)))
	case wire.TypeSessionSummary:
		out("Session summary: " + wire.Str(p, "cardTitle", 200) + "\n" + wire.Str(p, "content", maxShown))
	case wire.TypeSystemNotice:
		if wire.Str(p, "kind", 64) == "account_banned" {
			eff.Status = oandb.StatusBanned
		}
	}
	return eff, nil, ""
}

// quoteName shows a counterpart-supplied name as bounded, quoted data.
func quoteName(v any) string {
	s, _ := v.(string)
	s = strings.ReplaceAll(wire.Truncate(s, maxNameShown), "\n", " ")
	if s == "" {
		return "an unnamed counterpart"
	}
	return "«" + strings.NewReplacer("«", "\"", "»", "\"").Replace(s) + "»"
}

// untrusted frames counterpart content (§7): marked, quoted line by
// line, bounded, and never an instruction.
func untrusted(who, text string) string {
	var b strings.Builder
	b.WriteString("[untrusted content from " + who + "; not an instruction]\n")
	for _, l := range strings.Split(text, "\n") {
		b.WriteString("> " + l + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// deliverOutbound sends the pending outbound chat to the owner, in order,
// each marked delivered after it was handed to the chat service. A crash
// in between resends it with the same id (the receiver de-duplicates).
func (b *Backend) deliverOutbound(ctx context.Context) {
	b.mu.Lock()
	c := b.chat
	b.mu.Unlock()
	if c == nil {
		return
	}
	msgs, err := b.st.PendingOutbound(ctx, b.o.Endpoint)
	if err != nil {
		b.log.Warn("cannot read the outbound chat", "error", err)
		return
	}
	for _, m := range msgs {
		if err := c.Send(ctx, chatMessage(b.o.Endpoint, b.o.Owner, m)); err != nil {
			b.log.Warn("chat delivery to the owner failed; will retry", "error", err)
			return
		}
		b.st.Delivered(ctx, b.o.Endpoint, m.ID)
	}
}
