package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
)

// xAgent IM Profile v2 (seeds/000 §8, §11, §13; seeds/001 §4.2): complete
// chat messages both ways, message acks and activity state on the data
// plane; file bytes only through the Transfer Plane. The seeds name the
// packets but not every field, so the payloads below are this gateway's
// reading, documented in docs/messaging.md ("xAgent IM Profile v2").

// IM v2 packet types.
const (
	TypeChatMessage     = "chat.message"
	TypeChatMessageAck  = "chat.message.ack"
	TypeChatDelta       = "chat.message.delta"
	TypeChatActivity    = "chat.activity"
	CodeChatRejected    = "chat_message_rejected"
	CodeChatRateLimited = "chat_rate_limited"
	CodeChatBusy        = "chat_backlog_full"
	CodeChatExpired     = "chat_message_expired"
	CodeChatUnavailable = "chat_unavailable"
	// CodeChatUndeliverable is the final failure of a message the gateway
	// had accepted: the inbox did not take it before it expired or the
	// bounce bound was reached (docs/messaging.md).
	CodeChatUndeliverable = "chat_message_undeliverable"
)

// RetryLater reports whether a chat refusal code means "send the same
// message again later" (error.retryable), as opposed to a final refusal.
func RetryLater(code string) bool {
	switch code {
	case CodeChatRateLimited, CodeChatBusy, CodeChatUnavailable, "connector_channel_not_owned":
		return true
	}
	return false
}

// Limits on one chat message. They bound what the gateway stores and
// relays; a message beyond them is refused with a clear ack error.
const (
	MaxChatText     = 64 << 10 // bytes of text
	MaxChatFiles    = 8
	MaxFileName     = 255
	MaxMessageID    = 128
	MaxConversation = 128
	MaxSenderName   = 128
)

// ChatFile is one file reference of a chat.message. Inbound (connector to
// xAgent) it carries download_url (absolute or relative to the base URL)
// and may carry file_ref; outbound it carries the file_ref that
// POST /files/uploads returned.
type ChatFile struct {
	FileRef     string `json:"file_ref,omitempty"`
	DownloadURL string `json:"download_url,omitempty"`
	Filename    string `json:"filename,omitempty"`
	FileType    string `json:"file_type,omitempty"`
	MimeType    string `json:"mime_type,omitempty"`
	ByteSize    int64  `json:"byte_size,omitempty"`
	SHA256      string `json:"sha256,omitempty"`
}

// ChatSender names the person on the IM network; display text only.
type ChatSender struct {
	ID          string `json:"id,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
}

// ChatMessage is the chat.message payload. The sender is read where the
// seeds put it (seeds/000 §8.21: sender_id and display_name at the top of
// the payload) and, failing that, from a "sender" object; DecodeChatMessage
// leaves the result in Sender.
type ChatMessage struct {
	MessageID      string     `json:"message_id"`
	ConversationID string     `json:"conversation_id,omitempty"`
	SenderID       string     `json:"sender_id,omitempty"`
	DisplayName    string     `json:"display_name,omitempty"`
	Sender         ChatSender `json:"sender,omitempty"`
	Text           string     `json:"text,omitempty"`
	Files          []ChatFile `json:"files,omitempty"`
	ReplyTo        string     `json:"reply_to_message_id,omitempty"`
	// ExpiresAt is the connector's expiry (Unix ms); 0 leaves it to the
	// gateway's default.
	ExpiresAt int64 `json:"expires_at,omitempty"`
}

// ChatAck is the chat.message.ack payload, both ways.
type ChatAck struct {
	MessageID string `json:"message_id"`
	Status    string `json:"status"` // accepted (xAgent took it), delivered (on the IM network)
}

// ChatActivity is the chat.activity payload.
type ChatActivity struct {
	ConversationID string `json:"conversation_id,omitempty"`
	State          string `json:"state"`
}

// chatError is a fixed reason; it never quotes the payload.
type chatError string

func (e chatError) Error() string { return "chat.message: " + string(e) }

// ErrChatTooLarge reports text or files beyond the limits.
var ErrChatTooLarge = errors.New("chat.message: too large")

// DecodeChatMessage parses and checks an inbound chat.message payload.
// Text is kept as data; characters XML cannot carry are replaced so the
// XMPP side never fails on them.
func DecodeChatMessage(raw json.RawMessage) (*ChatMessage, error) {
	var m ChatMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, chatError("payload is not a valid object")
	}
	switch {
	case !ValidWireID(m.MessageID) || len(m.MessageID) > MaxMessageID:
		return nil, chatError("message_id is missing or malformed")
	case m.ConversationID != "" && (!ValidWireID(m.ConversationID) || len(m.ConversationID) > MaxConversation):
		return nil, chatError("conversation_id is malformed")
	case len(m.Text) > MaxChatText, len(m.Files) > MaxChatFiles:
		return nil, ErrChatTooLarge
	case strings.TrimSpace(m.Text) == "" && len(m.Files) == 0:
		return nil, chatError("a message needs text or a file")
	case m.ReplyTo != "" && !ValidWireID(m.ReplyTo):
		return nil, chatError("reply_to_message_id is malformed")
	}
	m.Text = XMLSafe(m.Text)
	if m.DisplayName != "" {
		m.Sender.DisplayName = m.DisplayName
	}
	if m.SenderID != "" {
		m.Sender.ID = m.SenderID
	}
	m.DisplayName, m.SenderID = "", ""
	m.Sender.DisplayName = XMLSafe(truncate(m.Sender.DisplayName, MaxSenderName))
	m.Sender.ID = XMLSafe(truncate(m.Sender.ID, MaxSenderName))
	for i := range m.Files {
		f := &m.Files[i]
		if f.DownloadURL == "" {
			return nil, chatError("a file needs download_url")
		}
		if len(f.DownloadURL) > 2048 || f.ByteSize < 0 {
			return nil, chatError("a file reference is malformed")
		}
		f.Filename = SafeFilename(f.Filename)
		f.MimeType = safeToken(f.MimeType, 127)
		f.FileType = safeToken(f.FileType, 32)
	}
	return &m, nil
}

// XMLSafe replaces the characters XML 1.0 cannot carry (most C0 controls,
// surrogates, U+FFFE/FFFF) and invalid UTF-8 with U+FFFD.
func XMLSafe(s string) string {
	ok := true
	for _, r := range s {
		if !xmlChar(r) {
			ok = false
			break
		}
	}
	if ok && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !xmlChar(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String()
}

func xmlChar(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return true // already the replacement (or invalid UTF-8, rewritten by the range)
	case r == 0x9 || r == 0xA || r == 0xD:
		return true
	case r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

// SafeFilename keeps a display name for a file: no path, no controls,
// bounded; "file" when nothing is left.
func SafeFilename(s string) string {
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		s = s[i+1:]
	}
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f || !xmlChar(r) || r == utf8.RuneError {
			continue
		}
		b.WriteRune(r)
	}
	s = strings.TrimSpace(truncate(b.String(), MaxFileName))
	if s == "" || s == "." || s == ".." {
		return "file"
	}
	return s
}

func safeToken(s string, max int) string {
	if len(s) > max {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c > '~' || c == '"' || c == '<' || c == '>' {
			return ""
		}
	}
	return s
}

// Truncate cuts s to at most max bytes on a rune boundary.
func Truncate(s string, max int) string { return truncate(s, max) }

// truncate cuts s to at most max bytes on a rune boundary.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}

// ChatState maps IM v2 activity states onto XEP-0085 chat states.
func ChatState(state string) (string, bool) {
	switch state {
	case "typing", "composing":
		return "composing", true
	case "paused":
		return "paused", true
	case "active", "online":
		return "active", true
	case "idle", "inactive":
		return "inactive", true
	case "gone", "left":
		return "gone", true
	}
	return "", false
}
