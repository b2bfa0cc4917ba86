package wire

import (
	"encoding/json"
	"errors"
	"strings"
)

// Packet is the data-plane envelope, xagent.connector.packet/v1 (§7).
type Packet struct {
	Schema             string          `json:"schema"`
	PacketID           string          `json:"packet_id"`
	RequestID          string          `json:"request_id,omitempty"`
	ReplyTo            string          `json:"reply_to,omitempty"`
	ConnectorChannelID string          `json:"connector_channel_id,omitempty"`
	Type               string          `json:"type"`
	Time               int64           `json:"time,omitempty"`
	Payload            json.RawMessage `json:"payload,omitempty"`
	Error              *PacketError    `json:"error,omitempty"`

	// ChannelScoped makes an empty connector_channel_id explicit on the
	// wire, as the first channel.open requires.
	ChannelScoped bool `json:"-"`
}

// PacketError is the envelope's error object.
type PacketError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
	// Retryable marks a refusal that may pass if the same packet is sent
	// again later (a rate limit, a full backlog, a store that is down).
	// The seeds' error model has code and message only (seeds/000 §7);
	// this member is the gateway's addition, the same word its task
	// failures use, and absent (false) on a final refusal.
	Retryable bool `json:"retryable,omitempty"`
}

// MarshalJSON writes connector_channel_id even when empty for user-level
// packets.
func (p Packet) MarshalJSON() ([]byte, error) {
	type wire Packet
	if p.ChannelScoped && p.ConnectorChannelID == "" {
		return json.Marshal(struct {
			wire
			ConnectorChannelID string `json:"connector_channel_id"`
		}{wire: wire(p)})
	}
	return json.Marshal(wire(p))
}

// Packet types the xAgent side sends or expects (§8).
const (
	TypeHello              = "connector.hello"
	TypeHelloAck           = "connector.hello.ack"
	TypeChannelOpen        = "channel.open"
	TypeChannelClose       = "channel.close"
	TypeAuthStart          = "auth.start"
	TypeAuthStatus         = "auth.status"
	TypeAuthCancel         = "auth.cancel"
	TypeAuthLogout         = "auth.logout"
	TypeDescriptorGet      = "connection.descriptor.get"
	TypeDescriptorPush     = "connection.descriptor.push"
	TypeToolInvoke         = "tool.invoke"
	TypeToolProgress       = "tool.progress.push"
	TypePing               = "ping"
	TypePong               = "pong"
	TypeError              = "error"
	TypeMessagePush        = "message.push"
	AckSuffix              = ".ack"
	CodeInvalidPacket      = "invalid_packet"
	CodeUnsupportedPacket  = "unsupported_packet"
	CodeChannelUnavailable = "connector_channel_unavailable"
)

// pushNeedsChannel lists connector-initiated packets that route to a user
// channel and so must carry connector_channel_id.
func pushNeedsChannel(typ string) bool {
	switch typ {
	case TypeDescriptorPush, TypeToolProgress, TypeMessagePush:
		return true
	}
	return strings.HasPrefix(typ, "chat.")
}

// ValidType: lowercase dotted names, bounded.
func ValidType(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// errEnvelope carries a fixed reason; it never quotes the packet.
type errEnvelope string

func (e errEnvelope) Error() string { return "invalid packet envelope: " + string(e) }

// DecodePacket parses one text message and validates the envelope (§7).
func DecodePacket(data []byte) (*Packet, error) {
	var p Packet
	if err := json.Unmarshal(data, &p); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, ErrMalformedJSON
		}
		return nil, errEnvelope("a member has the wrong JSON type")
	}
	switch {
	case p.Schema != PacketSchema:
		return nil, errEnvelope("schema is not " + PacketSchema)
	case !ValidWireID(p.PacketID):
		return nil, errEnvelope("packet_id is missing or malformed")
	case !ValidType(p.Type):
		return nil, errEnvelope("type is missing or malformed")
	case p.RequestID != "" && !ValidWireID(p.RequestID):
		return nil, errEnvelope("request_id is malformed")
	case p.ReplyTo != "" && !ValidWireID(p.ReplyTo):
		return nil, errEnvelope("reply_to is malformed")
	case p.ConnectorChannelID != "" && !ValidWireID(p.ConnectorChannelID):
		return nil, errEnvelope("connector_channel_id is malformed")
	case (strings.HasSuffix(p.Type, AckSuffix) || p.Type == TypePong || p.Type == TypePing) && p.RequestID == "":
		return nil, errEnvelope("a request or ack needs request_id")
	case pushNeedsChannel(p.Type) && p.ConnectorChannelID == "":
		return nil, errEnvelope("a user-level push needs connector_channel_id")
	case p.Type == TypeError && (p.Error == nil || p.Error.Code == ""):
		return nil, errEnvelope("an error packet needs error.code")
	}
	if p.Error != nil && !ValidCode(p.Error.Code) {
		p.Error.Code = "invalid_code"
	}
	return &p, nil
}

var ErrMalformedJSON = errors.New("malformed JSON")
