package backendkit

import (
	"context"
	"errors"
)

// The conversation capability, beside tool execution (the spec's Human
// Messaging profile). A conversation is channel-owned: it never becomes a
// task, and a task result never takes a chat route. The messaging package
// owns the XMPP side (receipts, chat states, hints, ids, replies, forms,
// presence); a backend only sees transport-neutral turns and answers
// through the Chat it was attached to. All text here is untrusted data.

// Conversant is a backend that can take a chat turn. The messaging
// package routes a chat message addressed to an endpoint to its backend
// only if the backend implements Conversant and CanConverse reports true
// for that endpoint; otherwise the sender gets a short error reply.
type Conversant interface {
	// CanConverse reports whether chat works for the endpoint right now;
	// the endpoint advertises the messaging features only while it does.
	CanConverse(endpoint string) bool
	// Converse accepts one inbound turn. It returns once the turn is
	// durably taken (queued or handed on), not when a reply exists:
	// replies, acks and activity come later through Chat. An error is a
	// refusal the sender is told about in a short, safe reply
	// (ErrChatUnavailable, ErrChatTooLarge, ErrChatRateLimited, or any
	// error whose text is safe to show).
	Converse(ctx context.Context, turn Turn) error
}

// ChatAttacher is implemented by a Conversant that originates messages
// (replies, inbound IM traffic). The gateway attaches the messaging
// service's Chat before the backend starts.
type ChatAttacher interface {
	AttachChat(Chat)
}

// Chat is how a backend speaks on the XMPP side. The messaging package
// implements it; it stamps ids and hints, honours blocking and consent,
// and bounds what it sends.
type Chat interface {
	// Send delivers a message from the endpoint (Message.Endpoint, with
	// Message.Resource when the backend has channels) to Message.To.
	Send(ctx context.Context, m Message) error
	// Ack tells the sender of an earlier turn that it was delivered on the
	// backend's side (XEP-0184 receipt, sent only if the turn asked for one).
	Ack(ctx context.Context, a Ack) error
	// Activity reports the endpoint's chat state to a peer (XEP-0085).
	Activity(ctx context.Context, a Activity) error
}

// ChatLink is an optional interface of a Chat. Connected reports whether
// the XMPP stream is up right now: a Send before that is only queued, and
// what needs an answer from the XMPP server (an XEP-0363 upload slot)
// fails. A backend holds such work until Connected is true.
type ChatLink interface {
	Connected() bool
}

// Bounce is an error the recipient's side returned for a message the
// endpoint sent (Message.ID): offline without offline storage
// (service-unavailable), blocked, or refused.
type Bounce struct {
	Endpoint  string // bare JID of the sending endpoint
	Resource  string // the sending resource, if any
	Peer      string // bare JID of the recipient
	ID        string // the Message.ID that came back
	Condition string // the stanza error condition
	Blocked   bool   // XEP-0191 <blocked/>: retrying is pointless until the peer writes
}

// ChatWatcher is an optional interface of a ChatAttacher: the messaging
// service tells it that one of its messages bounced and that a peer is
// back (its presence reached the endpoint, or it wrote). Both are called
// on the XMPP read path and must not block.
type ChatWatcher interface {
	ChatBounced(b Bounce)
	ChatPeerBack(endpoint, peer string)
}

// ChatState is an XEP-0085 chat state.
type ChatState string

const (
	ChatActive    ChatState = "active"
	ChatComposing ChatState = "composing"
	ChatPaused    ChatState = "paused"
	ChatInactive  ChatState = "inactive"
	ChatGone      ChatState = "gone"
)

// Turn is one inbound chat message from a person (or their client) to an
// endpoint.
type Turn struct {
	Endpoint string // bare JID of the addressed endpoint
	Resource string // resource of the addressed endpoint JID, if any (a backend channel)
	From     string // sender's full JID, as authenticated by the XMPP server
	ID       string // the sender's XEP-0359 origin-id, else the stanza id: the de-duplication key
	Thread   string // XMPP thread, if any
	Body     string // plain text, untrusted
	ReplyTo  string // XEP-0461: id of the message this one replies to
	Files    []File // files shared with the message (XEP-0363 URL, XEP-0066 OOB)
	// Answer is a submitted XEP-0004 form answering Question QuestionID.
	QuestionID string
	Answer     map[string][]string
	// ReceiptRequested is true when the sender asked for an XEP-0184 receipt.
	ReceiptRequested bool
}

// File is a file reference passed across the chat boundary.
type File struct {
	URL       string // where the receiving side can fetch it
	Name      string
	MediaType string
	Size      int64  // bytes, 0 when unknown
	SHA256    string // hex, when known
}

// Message is one outbound chat message from an endpoint.
type Message struct {
	Endpoint string // bare JID of the sending endpoint
	Resource string // sending resource (a backend channel), if any
	To       string // recipient JID
	ID       string // stable id for correlation and de-duplication; the messaging service makes one when empty
	Thread   string
	Body     string
	ReplyTo  string // XEP-0461 id being replied to
	Files    []File
	Question *Question // an XEP-0004 form asking for a structured answer
	// Store asks for offline storage (XEP-0334 store hint).
	Store bool
	// Nick is the display name of the person the message speaks for (an
	// IM network user relayed by a connector; XEP-0172), untrusted text.
	Nick string
}

// Question is a structured question rendered as an XEP-0004 form.
type Question struct {
	ID           string
	Title        string
	Instructions string
	Fields       []QuestionField
}

// QuestionField is one form field: Type is an XEP-0004 field type
// (boolean, list-single, list-multi, text-single, text-multi, fixed).
type QuestionField struct {
	Var      string
	Type     string
	Label    string
	Desc     string
	Options  []string
	Required bool
}

// Ack reports that the turn ID sent by To to Endpoint was delivered.
type Ack struct {
	Endpoint string
	Resource string
	To       string
	ID       string
}

// Activity is an endpoint's chat state toward one peer.
type Activity struct {
	Endpoint string
	Resource string
	To       string
	State    ChatState
}

// Refusals a Conversant may return; the messaging service words the reply.
var (
	ErrChatUnavailable = errors.New("this agent cannot chat right now")
	ErrChatTooLarge    = errors.New("message too large")
	ErrChatRateLimited = errors.New("too many messages; slow down")
)

// ErrChatRefused is what Chat.Send returns when the recipient has not
// consented to messages from the endpoint (it never wrote, and neither the
// operator's configuration nor ChatConsent names it) or bounced an earlier
// one as blocked. Retrying does not help until the recipient writes.
var ErrChatRefused = errors.New("the recipient does not accept messages from this agent")

// ChatConsent is an optional interface of a Conversant that originates
// messages to JIDs that did not write first (an inbox, an owner). The
// operator's configuration of those JIDs is their consent (a closed
// deployment policy, as the spec's Security Considerations allow).
type ChatConsent interface {
	// ChatRecipients lists the bare JIDs the backend may message from
	// endpoint without their writing first.
	ChatRecipients(endpoint string) []string
}
