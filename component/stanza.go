package component

import (
	"context"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/xep/xmltree"
)

// Namespace of the stream between the gateway and its server.
const NSComponent = "jabber:component:accept"

// IQ is one inbound IQ stanza.
type IQ struct {
	ID   string
	Type string // "get", "set", "result" or "error"
	// From is the requester: the sender, or the principal a trusted front
	// named (NSPrincipal), whose full JID is then Via.
	From    jid.JID
	To      jid.JID
	Payload *xmltree.Element // first child element; nil when there is none
	// Via is the trusted front that asserted From (zero otherwise); replies
	// and lifecycle events go to ReplyTo.
	Via jid.JID
	Raw *xmltree.Element // the whole stanza
}

// Message is one inbound message stanza.
type Message struct {
	ID   string
	Type string // "" means normal
	From jid.JID
	To   jid.JID
	Raw  *xmltree.Element
}

// Presence is one inbound presence stanza.
type Presence struct {
	ID   string
	Type string // "" means available
	From jid.JID
	To   jid.JID
	Raw  *xmltree.Element
}

// IQHandler answers an IQ get or set. It returns the result payload (nil for
// an empty result) or an error. A *agentproto.StanzaError is sent as it
// is; any other error is logged and answered with internal-server-error, so nothing
// internal reaches the wire.
//
// Handlers run on a worker, never on the stream's read loop, and must not
// block for long: slow work belongs to executors.
type IQHandler interface {
	HandleIQ(ctx context.Context, iq IQ) (*xmltree.Element, error)
}

// IQHandlerFunc adapts a function to IQHandler.
type IQHandlerFunc func(ctx context.Context, iq IQ) (*xmltree.Element, error)

func (f IQHandlerFunc) HandleIQ(ctx context.Context, iq IQ) (*xmltree.Element, error) {
	return f(ctx, iq)
}

// MessageHandler receives every inbound message, including error bounces.
type MessageHandler func(ctx context.Context, m Message)

// PresenceHandler receives every inbound presence stanza.
type PresenceHandler func(ctx context.Context, p Presence)

// Sender is how the rest of the gateway puts stanzas on the wire. It is
// implemented by *Component and can be faked in unit tests.
type Sender interface {
	// Send queues a stanza (iq, message or presence, with the
	// jabber:component:accept namespace or none) for sending. It returns
	// once the stanza is queued; ErrNotConnected if there is no stream.
	Send(ctx context.Context, stanza *xmltree.Element) error
	// SendIQ sends an IQ get or set and waits for its result or error
	// stanza. It fails with ErrIQTimeout after the configured timeout and
	// with ErrStreamLost when the stream goes away first; it never hangs.
	SendIQ(ctx context.Context, iq *xmltree.Element) (*xmltree.Element, error)
}

// NewIQ builds an outbound IQ stanza.
func NewIQ(typ, id string, from, to jid.JID, payload *xmltree.Element) *xmltree.Element {
	el := xmltree.New(NSComponent, "iq", "type", typ, "id", id, "from", from.String(), "to", to.String())
	return el.Add(payload)
}

// NewMessage builds an outbound message stanza of type normal.
func NewMessage(id string, from, to jid.JID, payload ...*xmltree.Element) *xmltree.Element {
	el := xmltree.New(NSComponent, "message", "type", "normal", "id", id, "from", from.String(), "to", to.String())
	return el.Add(payload...)
}

// NewPresence builds an outbound presence stanza; typ "" is available.
func NewPresence(typ string, from, to jid.JID, payload ...*xmltree.Element) *xmltree.Element {
	el := xmltree.New(NSComponent, "presence", "from", from.String(), "to", to.String())
	if typ != "" {
		el.SetAttr("type", typ)
	}
	return el.Add(payload...)
}
