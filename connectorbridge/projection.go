package connectorbridge

import (
	"encoding/json"
	"strings"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
)

// maxVendor bounds the agent vendor (the other limits are backendkit's).
const maxVendor = 256

// MetaKey is the tool _meta member that carries the connector facts of a
// projected tool.
const MetaKey = "org.agentgw/xagent-connector"

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
	doc := backendkit.ManifestDoc{ManifestSpecVersion: "0", Tools: []backendkit.ManifestTool{}}
	doc.Agent.JID = o.Endpoint
	doc.Agent.Name = firstNonEmpty(o.Name, card.ConnectorCardID)
	doc.Agent.Name = wire.TruncateRunes(doc.Agent.Name, backendkit.MaxAgentName)
	doc.Agent.Title = wire.TruncateRunes(firstNonEmpty(o.Title, card.Connector.Name), backendkit.MaxAgentTitle)
	doc.Agent.Vendor = wire.TruncateRunes(card.Connector.Vendor, maxVendor)
	doc.Agent.Description = describe(firstNonEmpty(o.Description, card.Connector.Description), skill)
	implVersion := card.Connector.Version
	if card.Build != nil && card.Build.Version != "" {
		implVersion = card.Build.Version
	}
	doc.Implementation = &backendkit.ManifestImpl{
		Name:    wire.TruncateRunes(card.Connector.Name, backendkit.MaxImplField),
		Version: wire.TruncateRunes(implVersion, backendkit.MaxImplField),
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
		mt := backendkit.ManifestTool{
			Name:        t.ToolID,
			Title:       wire.TruncateRunes(t.Title, backendkit.MaxToolTitle),
			Description: wire.TruncateRunes(t.Description, backendkit.MaxToolDescription),
			InputSchema: in,
			Ext:         &backendkit.ToolExt{SupportsProgress: true, SupportsCancellation: true},
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

	// The version is the connector's plus the digest of the manifest and
	// of the build stamp and protocol that the manifest does not show.
	build, _ := json.Marshal(card.Build)
	raw, err := backendkit.Stamp(&doc, firstNonEmpty(o.Version, card.Connector.Version), build, []byte(card.ProtocolVersion))
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
	if len([]rune(desc)) > backendkit.MaxAgentDescription {
		desc = wire.TruncateRunes(desc, backendkit.MaxAgentDescription-1) + "…"
	}
	return desc
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
