// Package wire holds the OpenAgentNetwork Connector Protocol v1 wire
// shapes the gateway consumes (docs: shared/references/oan-protocol.md):
// the event envelope of §5.1 with its eight event types, the
// responseConstraints hint, and the checks that make a hostile envelope a
// clear error instead of a crash. Every string it returns is bounded;
// errors name the field, never its value.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentgw/agentgw/internal/ijson"
)

// ProtocolVersion is OAN_PROTOCOL_VERSION.
const ProtocolVersion = 1

// Namespace and Event are the Socket.IO namespace and event name.
const (
	Namespace = "/oan"
	Event     = "oan:event"
	// BasePath is the REST base path every endpoint is relative to.
	BasePath = "/api/v1"
	// KeyPrefix starts every connector API key.
	KeyPrefix = "gofers_"
)

// Event types (§5.2).
const (
	TypeGoferMessage   = "gofer_message"
	TypeGoferQuestion  = "gofer_question"
	TypeSessionSummary = "session_summary"
	TypePairProposed   = "pair_proposed"
	TypeMatchRequest   = "match_request"
	TypeMatchDecided   = "match_decided"
	TypeRelayMessage   = "relay_message"
	TypeSystemNotice   = "system_notice"
)

var knownTypes = map[string]bool{
	TypeGoferMessage: true, TypeGoferQuestion: true, TypeSessionSummary: true, TypePairProposed: true,
	TypeMatchRequest: true, TypeMatchDecided: true, TypeRelayMessage: true, TypeSystemNotice: true,
}

// Sources (§7). Only platform and own_gofer are trusted.
const (
	SourcePlatform         = "platform"
	SourceOwnGofer         = "own_gofer"
	SourceCounterpartGofer = "counterpart_gofer"
	SourceCounterpartParty = "counterpart_party"
)

// Trusted reports whether content with this source may be treated as
// coming from OAN or the account's own Gofer. Unknown sources are not.
func Trusted(source string) bool { return source == SourcePlatform || source == SourceOwnGofer }

// Limits on one envelope.
const (
	MaxEnvelopeBytes = 256 << 10
	MaxIDBytes       = 128
	MaxContentRunes  = 16000
	MaxEnumOptions   = 64
	MaxOptionRunes   = 256
	MaxSchemaBytes   = 32 << 10
	// MaxSeq is the largest seq accepted: a PostgreSQL bigint.
	MaxSeq = 1<<63 - 1
)

var envLimits = ijson.Limits{MaxBytes: MaxEnvelopeBytes, MaxDepth: 32, MaxMembers: 1000, MaxStringBytes: 64 << 10, MaxValues: 20000}

// Envelope is one validated OanEventEnvelope.
type Envelope struct {
	V              int
	Seq            uint64 // numeric: "9" < "10"
	EventID        string
	Type           string
	GoferID        string
	ChatID         string
	ThreadID       string
	ConversationID string
	Source         string
	Constraints    *Constraints
	ConstraintsErr error // a constraints hint that could not be read
	Reply          *Reply
	CreatedAt      string
	Payload        map[string]any
	// Raw is the envelope as received (bounded by MaxEnvelopeBytes).
	Raw json.RawMessage
}

// Reply is the envelope's reply target, already checked against the
// account's own resources (CheckReply).
type Reply struct {
	Method string
	Path   string
}

// Constraints is the frozen responseConstraints shape.
type Constraints struct {
	Format      string // freestyle, boolean, enum, json_schema
	EnumOptions []string
	JSONSchema  json.RawMessage
	MaxLength   int // 0: unlimited
}

// ParseSeq parses a stringified bigint cursor. It accepts only decimal
// digits without sign or leading zeros (except "0"), up to MaxSeq.
func ParseSeq(s string) (uint64, error) {
	if s == "" || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, errors.New("seq is not a decimal cursor")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("seq is not a decimal cursor")
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > MaxSeq {
		return 0, errors.New("seq is out of range")
	}
	return n, nil
}

// FormatSeq is ParseSeq's inverse.
func FormatSeq(n uint64) string { return strconv.FormatUint(n, 10) }

// ParseEnvelope validates one envelope. An unknown type, a version other
// than 1, a missing or malformed seq or eventId, or an oversized document
// is an error; unknown extra members are ignored (the envelope is
// additive-only, §9).
func ParseEnvelope(data []byte) (*Envelope, error) {
	v, err := ijson.Parse(data, envLimits)
	if err != nil {
		if ijson.IsLimit(err) {
			return nil, errors.New("envelope exceeds the size limits")
		}
		return nil, errors.New("envelope is not valid JSON")
	}
	return envelopeOf(v, data)
}

// ParseEnvelopeValue validates an already parsed envelope (one item of a
// GET /events page).
func ParseEnvelopeValue(v any) (*Envelope, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, errors.New("envelope is not valid JSON")
	}
	if len(raw) > MaxEnvelopeBytes {
		return nil, errors.New("envelope exceeds the size limits")
	}
	return envelopeOf(v, raw)
}

func envelopeOf(v any, raw []byte) (*Envelope, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("envelope is not an object")
	}
	e := &Envelope{Raw: append(json.RawMessage(nil), raw...)}
	ver, ok := m["v"].(float64)
	if !ok || ver != ProtocolVersion {
		return nil, errors.New("envelope v is not protocol version 1")
	}
	e.V = ProtocolVersion
	seq, ok := m["seq"].(string)
	if !ok {
		return nil, errors.New("envelope seq is missing or not a string")
	}
	n, err := ParseSeq(seq)
	if err != nil {
		return nil, errors.New("envelope seq is not a decimal cursor")
	}
	e.Seq = n
	if e.Seq == 0 {
		return nil, errors.New("envelope seq is zero")
	}
	if e.EventID, ok = idField(m, "eventId", true); !ok {
		return nil, errors.New("envelope eventId is missing or malformed")
	}
	t, _ := m["type"].(string)
	if !knownTypes[t] {
		return nil, errors.New("envelope type is not one of the eight v1 types")
	}
	e.Type = t
	for _, f := range []struct {
		name string
		dst  *string
	}{{"goferId", &e.GoferID}, {"chatId", &e.ChatID}, {"threadId", &e.ThreadID}, {"conversationId", &e.ConversationID}} {
		s, ok := idField(m, f.name, false)
		if !ok {
			return nil, fmt.Errorf("envelope %s is malformed", f.name)
		}
		*f.dst = s
	}
	e.Source, _ = m["source"].(string)
	if len(e.Source) > 64 {
		e.Source = "unknown"
	}
	e.CreatedAt, _ = m["createdAt"].(string)
	if len(e.CreatedAt) > 64 {
		e.CreatedAt = ""
	}
	if p, ok := m["payload"]; ok && p != nil {
		pm, ok := p.(map[string]any)
		if !ok {
			return nil, errors.New("envelope payload is not an object")
		}
		e.Payload = pm
	} else {
		e.Payload = map[string]any{}
	}
	if r, ok := m["reply"]; ok && r != nil {
		rm, ok := r.(map[string]any)
		if !ok {
			return nil, errors.New("envelope reply is not an object")
		}
		method, _ := rm["method"].(string)
		path, _ := rm["path"].(string)
		if method != "POST" || path == "" || len(path) > 512 {
			return nil, errors.New("envelope reply is malformed")
		}
		e.Reply = &Reply{Method: method, Path: path}
	}
	if rc, ok := m["responseConstraints"]; ok && rc != nil {
		e.Constraints, e.ConstraintsErr = parseConstraints(rc)
	}
	return e, nil
}

// idField reads an identifier: printable ASCII without '/', '?', '#',
// '%', '\\' or whitespace, at most MaxIDBytes. Absent is fine unless
// required.
func idField(m map[string]any, name string, required bool) (string, bool) {
	v, present := m[name]
	if !present || v == nil {
		return "", !required
	}
	s, ok := v.(string)
	if !ok || !ValidID(s) {
		return "", false
	}
	return s, true
}

// ValidID reports whether s is safe as one path segment and a log field.
func ValidID(s string) bool {
	if s == "" || len(s) > MaxIDBytes || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("/?#%\\\"'<>", c) >= 0 {
			return false
		}
	}
	return true
}

func parseConstraints(v any) (*Constraints, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("responseConstraints is not an object")
	}
	c := &Constraints{}
	c.Format, _ = m["format"].(string)
	switch c.Format {
	case "", "freestyle":
		c.Format = "freestyle"
	case "boolean":
	case "enum":
		opts, ok := m["enumOptions"].([]any)
		if !ok || len(opts) == 0 || len(opts) > MaxEnumOptions {
			return nil, errors.New("responseConstraints enumOptions is missing or too long")
		}
		seen := map[string]bool{}
		for _, o := range opts {
			s, ok := o.(string)
			if !ok || s == "" || utf8.RuneCountInString(s) > MaxOptionRunes || seen[s] {
				return nil, errors.New("responseConstraints enumOptions holds an invalid option")
			}
			seen[s] = true
			c.EnumOptions = append(c.EnumOptions, s)
		}
	case "json_schema":
		sch, ok := m["jsonSchema"].(map[string]any)
		if !ok {
			return nil, errors.New("responseConstraints jsonSchema is missing or not an object")
		}
		raw, err := json.Marshal(sch)
		if err != nil || len(raw) > MaxSchemaBytes {
			return nil, errors.New("responseConstraints jsonSchema is too large")
		}
		c.JSONSchema = raw
	default:
		return nil, errors.New("responseConstraints format is unknown")
	}
	if ml, ok := m["maxLength"]; ok && ml != nil {
		f, ok := ml.(float64)
		if !ok || f < 1 || f > 1e6 || f != float64(int(f)) {
			return nil, errors.New("responseConstraints maxLength is invalid")
		}
		c.MaxLength = int(f)
	}
	return c, nil
}

// Str reads a bounded string member of a payload ("" when absent or not
// a string), cut to max runes.
func Str(p map[string]any, name string, max int) string {
	s, _ := p[name].(string)
	return Truncate(s, max)
}

// Truncate cuts s to at most max runes, dropping invalid UTF-8 and
// control characters other than newline and tab.
func Truncate(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n >= max {
			b.WriteString("…")
			break
		}
		if r == utf8.RuneError || (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
			continue
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// CheckReply checks a reply target against what the envelope may ask the
// connector to POST to: a relative path under BasePath, without "..",
// "//", a scheme, a query or a fragment, naming only the resource the
// envelope itself concerns (§5.2). It returns the path relative to
// BasePath. Anything else is refused: a hostile envelope must not steer
// the connector's credentials at another account's resources or host.
func CheckReply(e *Envelope) (string, error) {
	if e.Reply == nil {
		return "", errors.New("the event expects no reply")
	}
	p := e.Reply.Path
	if !strings.HasPrefix(p, BasePath+"/") || strings.Contains(p, "//") || strings.ContainsAny(p, "?#%\\ \t\r\n") {
		return "", errors.New("reply path is not a relative API path")
	}
	rel := strings.TrimPrefix(p, BasePath)
	segs := strings.Split(strings.TrimPrefix(rel, "/"), "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", errors.New("reply path is not a clean API path")
		}
	}
	want := ""
	switch e.Type {
	case TypeGoferMessage, TypeGoferQuestion:
		if e.GoferID != "" {
			want = "/gofers/" + e.GoferID + "/chat/messages"
		}
	case TypeMatchRequest:
		if id := Str(e.Payload, "requestId", MaxIDBytes); ValidID(id) {
			want = "/match-requests/" + id + "/decision"
		}
	case TypePairProposed:
		if e.ThreadID != "" {
			want = "/threads/" + e.ThreadID + "/pair/confirm"
		}
	case TypeRelayMessage:
		if e.ConversationID != "" {
			want = "/conversations/" + e.ConversationID + "/messages"
		}
	}
	if want == "" || rel != want {
		return "", errors.New("reply path does not name the event's own resource")
	}
	return rel, nil
}
