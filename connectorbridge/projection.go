package connectorbridge

import (
	"encoding/json"
	"strings"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
)

// Manifest limits of the spec's normative schema.
const (
	maxAgentName        = 128
	maxAgentTitle       = 256
	maxAgentDescription = 4096
	maxVendor           = 256
	maxImplField        = 128
	maxToolTitle        = 256
	maxToolDescription  = 8192
)

// MetaKey is the tool _meta member that carries the connector facts of a
// projected tool.
const MetaKey = "org.agentgw/xagent-connector"

type manifestDoc struct {
	ManifestSpecVersion string         `json:"manifestSpecVersion"`
	Agent               manifestAgent  `json:"agent"`
	Implementation      *manifestImpl  `json:"implementation,omitempty"`
	Tools               []manifestTool `json:"tools"`
}

type manifestAgent struct {
	JID         string `json:"jid"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version"`
	Vendor      string `json:"vendor,omitempty"`
}

type manifestImpl struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type manifestTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Meta         map[string]any  `json:"_meta,omitempty"`
	Ext          *toolExt        `json:"urn:xmpp:agent-api:0,omitempty"`
}

type toolExt struct {
	SupportsProgress     bool `json:"supportsProgress"`
	SupportsCancellation bool `json:"supportsCancellation"`
}

// toolMeta is the _meta[MetaKey] object of one tool.
type toolMeta struct {
	ConnectorCardID string   `json:"connectorCardId"`
	Profile         string   `json:"profile"`
	RelatedSkillIDs []string `json:"relatedSkillIds,omitempty"`
	SkillName       string   `json:"skillName,omitempty"`
}

// projection is the result of projecting Card + Skill + Descriptor.
type projection struct {
	manifest []byte
	version  string
	tools    []string
}

// project builds the agent manifest. Tools come from the Card in Card
// order, restricted to those the Descriptor reports available with a
// target permission that is not denied, on a profile the channel enabled
// (architecture §7). agent.version is the connector.version (or the
// operator's version) plus a digest of everything else, so any change of
// Card, build, Skill or tool availability yields a new version and an
// unchanged state yields the same one.
func project(o *Options, card *wire.Card, skill transport.Skill, desc *wire.Descriptor) (*projection, error) {
	doc := manifestDoc{ManifestSpecVersion: "0", Tools: []manifestTool{}}
	doc.Agent.JID = o.Endpoint
	doc.Agent.Name = firstNonEmpty(o.Name, card.ConnectorCardID)
	doc.Agent.Name = wire.TruncateRunes(doc.Agent.Name, maxAgentName)
	doc.Agent.Title = wire.TruncateRunes(firstNonEmpty(o.Title, card.Connector.Name), maxAgentTitle)
	doc.Agent.Vendor = wire.TruncateRunes(card.Connector.Vendor, maxVendor)
	doc.Agent.Description = describe(firstNonEmpty(o.Description, card.Connector.Description), skill)
	implVersion := card.Connector.Version
	if card.Build != nil && card.Build.Version != "" {
		implVersion = card.Build.Version
	}
	doc.Implementation = &manifestImpl{
		Name:    wire.TruncateRunes(card.Connector.Name, maxImplField),
		Version: wire.TruncateRunes(implVersion, maxImplField),
	}

	avail := desc.AvailableTools()
	enabled := map[string]bool{}
	if desc != nil {
		for _, p := range desc.Connection.Profiles {
			enabled[p] = true
		}
	}
	var names []string
	for _, t := range card.Tools {
		if !avail[t.ToolID] || !enabled[t.Profile] {
			continue
		}
		in, err := stripChannelArg(t.InputSchema)
		if err != nil {
			return nil, err
		}
		mt := manifestTool{
			Name:        t.ToolID,
			Title:       wire.TruncateRunes(t.Title, maxToolTitle),
			Description: wire.TruncateRunes(t.Description, maxToolDescription),
			InputSchema: in,
			Ext:         &toolExt{SupportsProgress: true, SupportsCancellation: true},
			Meta: map[string]any{MetaKey: toolMeta{
				ConnectorCardID: card.ConnectorCardID,
				Profile:         t.Profile,
				RelatedSkillIDs: t.RelatedSkillIDs,
				SkillName:       skill.Name,
			}},
		}
		if len(t.OutputSchema) > 0 && string(t.OutputSchema) != "null" {
			mt.OutputSchema = t.OutputSchema
		}
		doc.Tools = append(doc.Tools, mt)
		names = append(names, t.ToolID)
	}

	// Digest the manifest with the version empty, plus the build stamp
	// and protocol that the manifest does not show; then stamp it.
	unversioned, err := marshalNoEscape(doc)
	if err != nil {
		return nil, err
	}
	build, _ := json.Marshal(card.Build)
	digest := backendkit.VersionDigest(unversioned, build, []byte(card.ProtocolVersion))
	doc.Agent.Version = versionPrefix(firstNonEmpty(o.Version, card.Connector.Version)) + "-" + digest
	raw, err := marshalNoEscape(doc)
	if err != nil {
		return nil, err
	}
	return &projection{manifest: raw, version: doc.Agent.Version, tools: names}, nil
}

func firstNonEmpty(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

// describe joins the description and the Skill text within the 4096
// character limit; the Skill is cut, marked with an ellipsis, if needed.
func describe(desc string, skill transport.Skill) string {
	desc = strings.TrimSpace(desc)
	if skill.Text != "" {
		head := "Connector Skill"
		if skill.Name != "" {
			head += " " + skill.Name
		}
		if desc != "" {
			desc += "\n\n"
		}
		desc += head + ":\n" + strings.TrimSpace(skill.Text)
	}
	if len([]rune(desc)) > maxAgentDescription {
		desc = wire.TruncateRunes(desc, maxAgentDescription-1) + "…"
	}
	return desc
}

// maxVersionPrefix leaves room for "-" and the digest within the 64
// characters of a version.
const maxVersionPrefix = 64 - 1 - 2*backendkit.DigestBytes

// versionPrefix maps a connector version onto [A-Za-z0-9._~-], leaving
// room for the digest within 64 characters.
func versionPrefix(v string) string {
	var b strings.Builder
	for i := 0; i < len(v) && b.Len() < maxVersionPrefix; i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '~', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}

// stripChannelArg removes the reserved connector_channel_id from an input
// schema: the gateway, not the caller, chooses the channel, and injects it
// into the envelope and the arguments.
func stripChannelArg(raw json.RawMessage) (json.RawMessage, error) {
	var s map[string]json.RawMessage
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(s["properties"], &props); err != nil {
		return nil, err
	}
	delete(props, "connector_channel_id")
	p, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	s["properties"] = p
	var req []string
	if err := json.Unmarshal(s["required"], &req); err != nil {
		return nil, err
	}
	kept := req[:0]
	for _, r := range req {
		if r != "connector_channel_id" {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		delete(s, "required")
	} else {
		r, err := json.Marshal(kept)
		if err != nil {
			return nil, err
		}
		s["required"] = r
	}
	return marshalNoEscape(s)
}

// injectChannel sets connector_channel_id in the call's arguments to the
// bound channel, overriding anything the caller sent.
func injectChannel(args json.RawMessage, chID string) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &m); err != nil {
			return nil, err
		}
		if m == nil {
			m = map[string]json.RawMessage{}
		}
	}
	id, _ := json.Marshal(chID)
	m["connector_channel_id"] = id
	return marshalNoEscape(m)
}
