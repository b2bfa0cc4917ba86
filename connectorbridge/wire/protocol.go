package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentgw/agentgw/backendkit"
)

// Protocol family constants (common protocol §1).
const (
	CardSchema       = "xagent.connector/v1"
	DescriptorSchema = "xagent.connection/v2"
	// descriptorSchemaV1 is accepted on the wire and normalised (§12).
	descriptorSchemaV1 = "xagent.connection/v1"
	PacketSchema       = "xagent.connector.packet/v1"
	Subprotocol        = "xagent.connector.packet.v1"
	ProtocolVersion    = "3.0"
)

// Standard profiles.
const (
	ProfileIMv1     = "xagent.im.v1"
	ProfileIMv2     = "xagent.im.v2"
	ProfileDevicev1 = "xagent.device.v1"
)

// Admission window for the connector's protocol version: the Card, the
// health answer and the hello ack must all fall inside [min, current].
var (
	minProtocol     = ProtoVersion{3, 0}
	currentProtocol = ProtoVersion{3, 0}
)

// standardProfileTargets is the catalog of target types each standard
// profile allows (§4.1: a declared profile must intersect target_types).
var standardProfileTargets = map[string][]string{
	ProfileIMv1:     {"im"},
	ProfileIMv2:     {"im"},
	ProfileDevicev1: {"device"},
}

var targetTypes = set("im", "email", "calendar", "ticket", "device")

// Descriptor connection.status values (§9).
var connectionStatuses = set("created", "authenticating", "connected", "degraded", "offline", "expired", "revoked", "error")

// authenticatedStatuses are the connection states in which the channel is
// signed in: offline and error "do not mean signed out" (§9).
var authenticatedStatuses = set("connected", "degraded", "offline", "error")

// activeStatuses are the states in which tools can be called.
var activeStatuses = set("connected", "degraded")

var toolStatuses = set("available", "unavailable", "denied_by_target", "requires_reauth", "not_supported")
var permissionStates = set("unknown", "granted", "denied", "requires_reauth")

// Auth status values of auth.start.ack and auth.status.ack (§8.8, §8.10).
var authStatuses = set("pending", "scanned", "authenticated", "unauthenticated", "expired", "qr_refresh_required", "failed")

// KnownAuthStatus reports whether s is one of those status values.
func KnownAuthStatus(s string) bool { return authStatuses[s] }

func set(v ...string) map[string]bool {
	m := make(map[string]bool, len(v))
	for _, s := range v {
		m[s] = true
	}
	return m
}

// Card is the Connector Card, xagent.connector/v1.
type Card struct {
	Schema          string        `json:"schema"`
	ProtocolVersion string        `json:"protocol_version"`
	Build           *Build        `json:"build,omitempty"`
	ConnectorCardID string        `json:"connector_card_id"`
	Connector       CardConnector `json:"connector"`
	Supports        Supports      `json:"supports"`
	Tools           []CardTool    `json:"tools"`
	AuthFlows       []AuthFlow    `json:"auth_flows,omitempty"`
	Security        *Security     `json:"security,omitempty"`
}

// Build is the build stamp that the Card and /health must agree on.
type Build struct {
	Version   string `json:"version,omitempty"`
	GitTag    string `json:"git_tag,omitempty"`
	GitRev    string `json:"git_rev,omitempty"`
	BuildTime string `json:"build_time,omitempty"`
}

func (b *Build) Equal(o *Build) bool {
	if b == nil || o == nil {
		return b == nil && o == nil
	}
	return *b == *o
}

// CardConnector is the Card's connector object.
type CardConnector struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Vendor      string `json:"vendor,omitempty"`
	Description string `json:"description,omitempty"`
}

// Supports is the Card's static capability declaration.
type Supports struct {
	UserChannelMode string   `json:"user_channel_mode,omitempty"`
	TargetTypes     []string `json:"target_types"`
	Targets         []Target `json:"targets,omitempty"`
	Profiles        []string `json:"profiles"`
}

// Target is one supports.targets entry.
type Target struct {
	TargetType string `json:"target_type"`
	Provider   string `json:"provider"`
	Label      string `json:"label"`
}

// CardTool is one tool declaration of the Card.
type CardTool struct {
	ToolID          string          `json:"tool_id"`
	Profile         string          `json:"profile"`
	Title           string          `json:"title,omitempty"`
	Description     string          `json:"description,omitempty"`
	RelatedSkillIDs []string        `json:"related_skill_ids,omitempty"`
	InputSchema     json.RawMessage `json:"input_schema"`
	OutputSchema    json.RawMessage `json:"output_schema,omitempty"`
}

// AuthFlow is one auth_flows entry.
type AuthFlow struct {
	ID          string      `json:"id"`
	TargetType  string      `json:"target_type"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description,omitempty"`
	Fields      []AuthField `json:"fields,omitempty"`
}

// AuthField is one field of a form flow.
type AuthField struct {
	Name         string `json:"name"`
	Label        string `json:"label"`
	InputType    string `json:"input_type"`
	Required     bool   `json:"required,omitempty"`
	Placeholder  string `json:"placeholder,omitempty"`
	HelpText     string `json:"help_text,omitempty"`
	Secret       bool   `json:"secret,omitempty"`
	DefaultValue string `json:"default_value,omitempty"`
}

// Sensitive reports whether the field's value must never be echoed.
func (f AuthField) Sensitive() bool { return f.Secret || f.InputType == "password" }

// Security is the Card's security declaration.
type Security struct {
	TrustLevel     string   `json:"trust_level,omitempty"`
	APIKeyRequired bool     `json:"api_key_required,omitempty"`
	DataClasses    []string `json:"data_classes,omitempty"`
}

// Tool returns the card tool with this id.
func (c *Card) Tool(id string) (*CardTool, bool) {
	for i := range c.Tools {
		if c.Tools[i].ToolID == id {
			return &c.Tools[i], true
		}
	}
	return nil, false
}

// Flow returns the auth flow with this id.
func (c *Card) Flow(id string) (*AuthFlow, bool) {
	for i := range c.AuthFlows {
		if c.AuthFlows[i].ID == id {
			return &c.AuthFlows[i], true
		}
	}
	return nil, false
}

func (c *Card) hasProfile(p string) bool {
	for _, x := range c.Supports.Profiles {
		if x == p {
			return true
		}
	}
	return false
}

// ProtoVersion is a parsed "major.minor" protocol version.
type ProtoVersion struct{ major, minor int }

func (v ProtoVersion) Less(o ProtoVersion) bool {
	return v.major < o.major || (v.major == o.major && v.minor < o.minor)
}

func (v ProtoVersion) String() string { return strconv.Itoa(v.major) + "." + strconv.Itoa(v.minor) }

// ParseProtocol parses a protocol version; an omitted value parses as 1.0
// (§8.2) and is then below the admission floor.
func ParseProtocol(s string) (ProtoVersion, error) {
	if s == "" {
		return ProtoVersion{1, 0}, nil
	}
	maj, min, found := strings.Cut(s, ".")
	if !found {
		min = "0"
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil || a < 0 || b < 0 || len(maj) > 4 || len(min) > 4 {
		return ProtoVersion{}, errors.New("protocol_version is not a major.minor number")
	}
	return ProtoVersion{a, b}, nil
}

// CheckProtocol enforces the local admission window. The error quotes the
// version only after it parsed as two small numbers.
func CheckProtocol(what, s string) error {
	v, err := ParseProtocol(s)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if v.Less(minProtocol) {
		return fmt.Errorf("%s: protocol_version %s is below the admission floor %s", what, v, minProtocol)
	}
	if currentProtocol.Less(v) {
		return fmt.Errorf("%s: protocol_version %s is newer than this gateway's %s", what, v, currentProtocol)
	}
	return nil
}

// ValidateBaseURL checks the connector base URL rules of §3 and returns
// it normalised without a trailing slash, so endpoints append cleanly.
func ValidateBaseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("connector base_url is empty")
	}
	if len(raw) > 2048 {
		return nil, errors.New("connector base_url is longer than 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("connector base_url does not parse as a URL")
	}
	switch u.Scheme {
	case "http", "https":
	default:
		return nil, errors.New("connector base_url scheme must be http or https")
	}
	if u.Opaque != "" {
		return nil, errors.New("connector base_url must be hierarchical (scheme://host/...)")
	}
	if u.Hostname() == "" {
		return nil, errors.New("connector base_url needs a host")
	}
	if u.User != nil {
		return nil, errors.New("connector base_url must not carry userinfo")
	}
	if u.RawQuery != "" || u.ForceQuery {
		return nil, errors.New("connector base_url must not carry a query")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, errors.New("connector base_url must not carry a fragment")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// EndpointURL appends a fixed endpoint under the base URL's path prefix.
func EndpointURL(base *url.URL, path string) string {
	u := *base
	u.Path = base.Path + path
	return u.String()
}

// WSURL is the data-plane URL: the base with ws/wss and /ws appended.
func WSURL(base *url.URL) string {
	u := *base
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	u.Path = base.Path + "/ws"
	return u.String()
}

// validToolID: ASCII letters, digits, '_', '-', '.', at most 256 (§4.1).
func validToolID(s string) bool { return validChars(s, 256) }

// ValidWireID bounds the opaque identifiers the connector hands us
// (connector_id, channel ids, packet and request ids, auth session ids):
// non-empty, printable ASCII without spaces, at most 256 bytes.
func ValidWireID(s string) bool {
	if len(s) == 0 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// ValidCode is the shape of a stable machine-readable error code; anything
// else is replaced before it reaches a failure or a log line.
func ValidCode(s string) bool { return validChars(s, 64) }

// validChars: 1..max characters of [A-Za-z0-9_.-].
func validChars(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

func SafeCode(s string) string {
	if ValidCode(s) {
		return s
	}
	return "invalid_code"
}

// cardError collects Card problems; each reason is a fixed phrase plus
// identifiers that have already been checked for shape.
type cardError struct{ reasons []string }

func (e *cardError) add(format string, a ...any) {
	if len(e.reasons) < 20 {
		e.reasons = append(e.reasons, fmt.Sprintf(format, a...))
	}
}

func (e *cardError) Error() string {
	return "invalid Connector Card: " + strings.Join(e.reasons, "; ")
}

// ParseCard decodes and validates a Connector Card against every hard rule
// of §4.1. secrets are strings that must not occur anywhere in the Card
// (the system API key).
func ParseCard(raw []byte, secrets ...string) (*Card, error) {
	if !utf8.Valid(raw) {
		return nil, &cardError{reasons: []string{"not UTF-8"}}
	}
	for _, s := range secrets {
		if s != "" && backendkit.ContainsSecret(raw, s) {
			return nil, &cardError{reasons: []string{"the Card contains the system API key"}}
		}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, &cardError{reasons: []string{"not a JSON object"}}
	}
	e := &cardError{}
	if _, ok := top["server_base_url"]; ok {
		e.add("server_base_url must not appear in the Card")
	}
	var c Card
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, &cardError{reasons: []string{"a member has the wrong JSON type"}}
	}
	if c.Schema != CardSchema {
		e.add("schema must be %s", CardSchema)
	}
	if c.ProtocolVersion == "" {
		e.add("protocol_version must be declared explicitly")
	} else if err := CheckProtocol("card", c.ProtocolVersion); err != nil {
		e.add("%v", err)
	}
	if c.ConnectorCardID == "" {
		e.add("connector_card_id is required")
	} else if !validCardID(c.ConnectorCardID) {
		e.add("connector_card_id must be 1-128 characters of [A-Za-z0-9._-]")
	}
	if strings.TrimSpace(c.Connector.Name) == "" {
		e.add("connector.name is required")
	}
	if strings.TrimSpace(c.Connector.Version) == "" {
		e.add("connector.version is required")
	}
	if len(c.Supports.TargetTypes) == 0 {
		e.add("supports.target_types must be non-empty")
	}
	tt := map[string]bool{}
	for _, t := range c.Supports.TargetTypes {
		if !targetTypes[t] {
			e.add("supports.target_types has an unknown value (allowed: im, email, calendar, ticket, device)")
			continue
		}
		tt[t] = true
	}
	if len(c.Supports.Profiles) == 0 {
		e.add("supports.profiles must be non-empty")
	}
	seenProfile := map[string]bool{}
	for _, p := range c.Supports.Profiles {
		if p == "" || len(p) > 128 {
			e.add("supports.profiles has an empty or over-long entry")
			continue
		}
		if seenProfile[p] {
			e.add("supports.profiles lists a profile twice")
		}
		seenProfile[p] = true
		if allowed, std := standardProfileTargets[p]; std {
			ok := false
			for _, a := range allowed {
				ok = ok || tt[a]
			}
			if !ok {
				e.add("profile %s does not intersect supports.target_types", p)
			}
		}
	}
	switch c.Supports.UserChannelMode {
	case "", "single", "multiple":
	default:
		e.add("supports.user_channel_mode must be single or multiple")
	}
	seenTool := map[string]bool{}
	for i, t := range c.Tools {
		where := fmt.Sprintf("tools[%d]", i)
		if !validToolID(t.ToolID) {
			e.add("%s.tool_id must be 1-256 characters of [A-Za-z0-9_.-]", where)
		} else {
			if seenTool[t.ToolID] {
				e.add("%s.tool_id %s is not unique", where, t.ToolID)
			}
			seenTool[t.ToolID] = true
			where = "tool " + t.ToolID
		}
		if !seenProfile[t.Profile] {
			e.add("%s: profile is not in supports.profiles", where)
		}
		if err := checkInputSchema(t.InputSchema); err != "" {
			e.add("%s: input_schema %s", where, err)
		}
		if len(t.OutputSchema) > 0 && string(t.OutputSchema) != "null" {
			var o map[string]json.RawMessage
			if json.Unmarshal(t.OutputSchema, &o) != nil {
				e.add("%s: output_schema must be a JSON object", where)
			}
		}
		for _, s := range t.RelatedSkillIDs {
			if s == "" || len(s) > 128 {
				e.add("%s: related_skill_ids has an empty or over-long entry", where)
			}
		}
	}
	seenFlow := map[string]bool{}
	for i, f := range c.AuthFlows {
		where := fmt.Sprintf("auth_flows[%d]", i)
		if !ValidCode(f.ID) {
			e.add("%s.id must be 1-64 characters of [A-Za-z0-9_.-]", where)
		} else {
			if seenFlow[f.ID] {
				e.add("%s.id is not unique", where)
			}
			seenFlow[f.ID] = true
		}
		if f.TargetType == "" || f.Type == "" || strings.TrimSpace(f.Title) == "" {
			e.add("%s needs id, target_type, type and title", where)
		}
		if f.Type == "form" && len(f.Fields) == 0 {
			e.add("%s: a form flow needs at least one field", where)
		}
		if f.Type != "form" && len(f.Fields) > 0 {
			e.add("%s: fields apply only to form flows", where)
		}
		names := map[string]bool{}
		for _, fl := range f.Fields {
			if !ValidCode(fl.Name) {
				e.add("%s: a field name must be 1-64 characters of [A-Za-z0-9_.-]", where)
				continue
			}
			if names[fl.Name] {
				e.add("%s: field %s is not unique", where, fl.Name)
			}
			names[fl.Name] = true
			if fl.Label == "" || fl.InputType == "" {
				e.add("%s: field %s needs label and input_type", where, fl.Name)
			}
			if fl.Sensitive() && fl.DefaultValue != "" {
				e.add("%s: sensitive field %s must not have a default_value", where, fl.Name)
			}
		}
	}
	if len(e.reasons) > 0 {
		return nil, e
	}
	return &c, nil
}

func validCardID(s string) bool { return validChars(s, 128) }

// checkInputSchema applies the §4.1 input_schema rules and returns a fixed
// phrase, or "" when the schema is acceptable.
func checkInputSchema(raw json.RawMessage) string {
	var s map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || s == nil {
		return "must be a JSON object"
	}
	var typ string
	if json.Unmarshal(s["type"], &typ) != nil || typ != "object" {
		return "must be an object schema (type: object)"
	}
	var props map[string]json.RawMessage
	if json.Unmarshal(s["properties"], &props) != nil || props == nil {
		return "must declare properties with connector_channel_id"
	}
	if _, bad := props["connector_card_id"]; bad {
		return "must not declare a connector_card_id argument"
	}
	var ch map[string]json.RawMessage
	if json.Unmarshal(props["connector_channel_id"], &ch) != nil || ch == nil {
		return "must declare properties.connector_channel_id"
	}
	var chType string
	if json.Unmarshal(ch["type"], &chType) != nil || chType != "string" {
		return "properties.connector_channel_id must have type string"
	}
	var req []string
	if json.Unmarshal(s["required"], &req) != nil {
		return "required must be an array of strings containing connector_channel_id"
	}
	for _, r := range req {
		if r == "connector_channel_id" {
			return ""
		}
	}
	return "required must contain connector_channel_id"
}

// Descriptor is the Connection Descriptor, xagent.connection/v2.
type Descriptor struct {
	Schema     string           `json:"schema"`
	Connection DescConnection   `json:"connection"`
	Target     DescTarget       `json:"target"`
	Tools      []DescriptorTool `json:"tools,omitempty"`
}

// DescConnection is the descriptor's connection object.
type DescConnection struct {
	ConnectorCardID    string   `json:"connector_card_id"`
	ConnectorID        string   `json:"connector_id"`
	ConnectorChannelID string   `json:"connector_channel_id"`
	TargetType         string   `json:"target_type"`
	Profiles           []string `json:"profiles"`
	// Profile is the singular v1 member, folded into Profiles.
	Profile string `json:"profile,omitempty"`
	Status  string `json:"status"`
}

// DescTarget is display-level account information only.
type DescTarget struct {
	Provider    string `json:"provider"`
	Label       string `json:"label,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
	AccountHint string `json:"account_hint,omitempty"`
}

// DescriptorTool is the per-channel state of one Card tool.
type DescriptorTool struct {
	ToolID                string `json:"tool_id"`
	Status                string `json:"status"`
	TargetPermissionState string `json:"target_permission_state,omitempty"`
}

// Authenticated reports whether the channel is signed in (§9: offline and
// error are signed in but inactive).
func (d *Descriptor) Authenticated() bool {
	return d != nil && authenticatedStatuses[d.Connection.Status]
}

// Active reports whether tools can be called now.
func (d *Descriptor) Active() bool { return d != nil && activeStatuses[d.Connection.Status] }

// AvailableTools returns the tool ids that may be projected: status
// available and a target permission that is not denied.
func (d *Descriptor) AvailableTools() map[string]bool {
	out := map[string]bool{}
	if !d.Authenticated() {
		return out
	}
	for _, t := range d.Tools {
		if t.Status != "available" {
			continue
		}
		switch t.TargetPermissionState {
		case "denied", "requires_reauth":
			continue
		}
		out[t.ToolID] = true
	}
	return out
}

// ParseDescriptor decodes a descriptor and checks its identity against the
// card and the channel it arrived on (§9 hard validation). Tools absent
// from the Card are dropped, because they cannot be projected (§9).
func ParseDescriptor(raw json.RawMessage, card *Card, channelID string) (*Descriptor, []string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, errors.New("connection_descriptor is missing")
	}
	var d Descriptor
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, nil, errors.New("connection_descriptor is not a valid JSON object")
	}
	switch d.Schema {
	case DescriptorSchema:
	case descriptorSchemaV1:
		if len(d.Connection.Profiles) == 0 && d.Connection.Profile != "" {
			d.Connection.Profiles = []string{d.Connection.Profile}
		}
		d.Schema = DescriptorSchema
	default:
		return nil, nil, errors.New("connection_descriptor schema must be xagent.connection/v2")
	}
	d.Connection.Profile = ""
	c := d.Connection
	if c.ConnectorCardID != card.ConnectorCardID {
		return nil, nil, errors.New("connection_descriptor connector_card_id does not match the Card")
	}
	if !ValidWireID(c.ConnectorID) {
		return nil, nil, errors.New("connection_descriptor connector_id is missing or malformed")
	}
	if c.ConnectorChannelID != channelID {
		return nil, nil, errors.New("connection_descriptor connector_channel_id does not match the channel")
	}
	if !targetTypes[c.TargetType] {
		return nil, nil, errors.New("connection_descriptor target_type is not a known target type")
	}
	if len(c.Profiles) == 0 {
		return nil, nil, errors.New("connection_descriptor profiles must be non-empty")
	}
	seen := map[string]bool{}
	for _, p := range c.Profiles {
		if seen[p] {
			return nil, nil, errors.New("connection_descriptor profiles must be unique")
		}
		seen[p] = true
		if !card.hasProfile(p) {
			return nil, nil, errors.New("connection_descriptor enables a profile the Card does not declare")
		}
	}
	if d.Target.Provider == "" {
		return nil, nil, errors.New("connection_descriptor target.provider is required")
	}
	if !connectionStatuses[c.Status] {
		return nil, nil, errors.New("connection_descriptor connection.status is not a supported value")
	}
	var dropped []string
	tools := d.Tools[:0]
	seenTool := map[string]bool{}
	for _, t := range d.Tools {
		if t.ToolID == "" {
			return nil, nil, errors.New("connection_descriptor tools[].tool_id is required")
		}
		if !toolStatuses[t.Status] {
			return nil, nil, errors.New("connection_descriptor has a tool status that is not a supported value")
		}
		if t.TargetPermissionState == "" {
			t.TargetPermissionState = "unknown"
		}
		if !permissionStates[t.TargetPermissionState] {
			return nil, nil, errors.New("connection_descriptor has a target_permission_state that is not a supported value")
		}
		if _, ok := card.Tool(t.ToolID); !ok || seenTool[t.ToolID] {
			if validToolID(t.ToolID) {
				dropped = append(dropped, t.ToolID)
			} else {
				dropped = append(dropped, "(malformed id)")
			}
			continue
		}
		seenTool[t.ToolID] = true
		tools = append(tools, t)
	}
	d.Tools = tools
	return &d, dropped, nil
}

// TruncateRunes cuts s to at most max runes, for bounding
// connector-supplied text.
func TruncateRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max])
}

// HasProfile reports whether the channel enabled profile p.
func (d *Descriptor) HasProfile(p string) bool {
	if d == nil {
		return false
	}
	for _, q := range d.Connection.Profiles {
		if q == p {
			return true
		}
	}
	return false
}
