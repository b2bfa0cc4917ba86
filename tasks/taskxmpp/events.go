package taskxmpp

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/xep/xmltree"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

func xmpptimeParse(s string) (xmpptime.Instant, error) { return xmpptime.Parse(s) }

// Notifier sends lifecycle events as messages from the endpoint to the full
// JID that invoked, and re-sends an event to the caller's bare JID once when
// the server bounces it (the route is gone). It never uses XEP-0334 no-copy.
type Notifier struct {
	Sender component.Sender
	Log    *slog.Logger
	// OnSendError, when set, is told about every event that could not be
	// queued.
	OnSendError func()

	mu   sync.Mutex
	sent map[string]sentEvent // message id → event, for bounce fallback
	// order keeps insertion order to bound the map.
	order []string
}

type sentEvent struct {
	ev   tasks.Event
	at   time.Time
	bare bool
}

// maxTracked bounds how many sent events are remembered for fallback.
const maxTracked = 20000

// Notify implements tasks.Notifier. It only queues: sending never blocks the
// engine.
func (n *Notifier) Notify(ev tasks.Event) {
	n.send(ev, ev.Route, false)
}

func (n *Notifier) send(ev tasks.Event, to string, bare bool) {
	toJID, err := jid.Parse(to)
	if err != nil {
		n.log().Error("event route is not a JID", "task", ev.TaskID)
		return
	}
	from, err := jid.Parse(ev.Endpoint)
	if err != nil {
		n.log().Error("event endpoint is not a JID", "task", ev.TaskID)
		return
	}
	msg := component.NewMessage(ev.EventID, from, toJID, EventElement(ev))
	n.track(ev, bare)
	if err := n.Sender.Send(context.Background(), msg); err != nil {
		// Delivery is best effort; the caller recovers through task-state.
		if n.OnSendError != nil {
			n.OnSendError()
		}
		n.log().Warn("event not queued", "task", ev.TaskID, "revision", ev.Revision, "err", err)
	}
}

func (n *Notifier) track(ev tasks.Event, bare bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sent == nil {
		n.sent = map[string]sentEvent{}
	}
	if _, ok := n.sent[ev.EventID]; !ok {
		n.order = append(n.order, ev.EventID)
	}
	n.sent[ev.EventID] = sentEvent{ev: ev, at: time.Now(), bare: bare}
	for len(n.order) > maxTracked {
		delete(n.sent, n.order[0])
		n.order = n.order[1:]
	}
}

// HandleMessage watches for error bounces of events and falls back to the
// bare JID once. Register it with Router.HandleMessage.
func (n *Notifier) HandleMessage(ctx context.Context, m component.Message) {
	if m.Type != "error" || m.ID == "" {
		return
	}
	n.mu.Lock()
	se, ok := n.sent[m.ID]
	if ok && !se.bare && m.From.String() == se.ev.Route {
		se.bare = true
		n.sent[m.ID] = se
	} else {
		ok = false
	}
	n.mu.Unlock()
	if !ok {
		return
	}
	n.log().Info("event route bounced; falling back to the bare JID", "task", se.ev.TaskID, "revision", se.ev.Revision)
	n.send(se.ev, se.ev.Caller, true)
}

func (n *Notifier) log() *slog.Logger {
	if n.Log != nil {
		return n.Log
	}
	return slog.Default()
}

// EventElement renders the <event/> element of a lifecycle message.
func EventElement(ev tasks.Event) *xmltree.Element {
	return xmltree.New(ns.Task, "event",
		"event-id", ev.EventID,
		"revision", strconv.FormatInt(ev.Revision, 10),
		"task-id", ev.TaskID,
		"type", string(ev.Type)).WithText(xmltree.JSONText(ev.Payload))
}
