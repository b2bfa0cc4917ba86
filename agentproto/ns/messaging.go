package ns

// The Human Messaging profile (the spec's "Human Messaging Profile") and
// the XEPs it builds on.
const (
	ChatStates    = "http://jabber.org/protocol/chatstates" // XEP-0085
	Receipts      = "urn:xmpp:receipts"                     // XEP-0184
	Hints         = "urn:xmpp:hints"                        // XEP-0334
	StanzaID      = "urn:xmpp:sid:0"                        // XEP-0359 (origin-id, stanza-id)
	Reply         = "urn:xmpp:reply:0"                      // XEP-0461
	OOB           = "jabber:x:oob"                          // XEP-0066 (XEP-0363 URLs are shared this way)
	Nick          = "http://jabber.org/protocol/nick"       // XEP-0172
	BlockingError = "urn:xmpp:blocking:errors"              // XEP-0191 <blocked/> in an error
	Client        = "jabber:client"
)

// ChatQuestionForm is the FORM_TYPE of the XEP-0004 forms an endpoint
// sends to ask a structured question in a chat; its hidden question_id
// field correlates the submitted answer.
const ChatQuestionForm = "urn:agentgw:chat-question:0"
