package dirxmpp

import (
	"context"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// manifest answers <manifest-request/>: the active version, or the exact
// version asked for, as the canonical bytes that were hashed.
func (s *service) manifest(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
	ep := endpointOf(iq)
	version, pinned := iq.Payload.LookupAttr("version")
	if pinned && !ids.ValidVersion(version) {
		return nil, agentproto.ErrBadRequest("The version attribute is malformed.")
	}
	m, ok := s.Reader.Active(ep)
	if pinned {
		m, ok = s.Reader.Manifest(ep, version)
	}
	if !ok {
		return nil, agentproto.ErrItemNotFound()
	}
	reply := xmltree.New(ns.API, "manifest", "media-type", ns.MediaJSON, "version", m.Version)
	return reply.Add(
		hashElement(m.Hash),
		xmltree.New(ns.API, "json").WithText(string(m.Canonical)),
	), nil
}

// schema answers <schema-request/> with the exact canonical schema bytes of
// one tool of one pinned version. The manifest hash must select that
// version's registered content, or the reply is conflict.
func (s *service) schema(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
	p := iq.Payload
	tool, hasTool := p.LookupAttr("tool")
	version, hasVersion := p.LookupAttr("version")
	direction, hasDirection := p.LookupAttr("direction")
	switch {
	case !hasTool || !hasVersion || !hasDirection:
		return nil, agentproto.ErrBadRequest("The tool, version and direction attributes are required.")
	case tool == "":
		return nil, agentproto.ErrBadRequest("The tool name is empty.")
	case !ids.ValidVersion(version):
		return nil, agentproto.ErrBadRequest("The version attribute is malformed.")
	case direction != "input" && direction != "output":
		return nil, agentproto.ErrBadRequest("The direction must be input or output.")
	}
	hash, err := parseHash(p)
	if err != nil {
		return nil, err
	}
	ep := endpointOf(iq)
	m, ok := s.Reader.Manifest(ep, version)
	if !ok {
		return nil, agentproto.ErrItemNotFound()
	}
	if hash != m.Hash {
		return nil, agentproto.ErrConflict("The manifest hash does not match the registered version.")
	}
	t, ok := m.Tool(tool)
	if !ok {
		return nil, agentproto.ErrItemNotFound()
	}
	body, schemaHash := t.InputSchema, t.InputHash
	if direction == "output" {
		body, schemaHash = t.OutputSchema, t.OutputHash
	}
	if body == nil {
		return nil, agentproto.ErrItemNotFound()
	}
	reply := xmltree.New(ns.API, "schema",
		"direction", direction,
		"media-type", ns.MediaSchemaJSON,
		"tool", t.Name,
		"version", m.Version)
	return reply.Add(
		xmltree.New(ns.API, "manifest-hash").Add(hashElement(m.Hash)),
		xmltree.New(ns.API, "schema-hash").Add(hashElement(schemaHash)),
		xmltree.New(ns.API, "json").WithText(string(body)),
	), nil
}

// vcard answers XEP-0054 requests at an endpoint with the manifest's public
// profile fields only: display name, description, homepage and avatar URL.
// The URLs are passed on, never dereferenced. The texts are sanitized XML
// copies (U+FFFD for what XML cannot carry); the URLs are ASCII by the
// manifest rules.
func (s *service) vcard(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
	m, ok := s.Reader.Active(endpointOf(iq))
	if !ok {
		return nil, agentproto.ErrItemNotFound()
	}
	v := xmltree.New(ns.VCard, "vCard")
	v.Add(xmltree.New(ns.VCard, "FN").WithText(xmltree.Sanitize(m.DisplayName())))
	if m.Agent.Description != "" {
		v.Add(xmltree.New(ns.VCard, "DESC").WithText(xmltree.Sanitize(m.Agent.Description)))
	}
	if m.Agent.Homepage != "" {
		v.Add(xmltree.New(ns.VCard, "URL").WithText(m.Agent.Homepage))
	}
	if m.Agent.AvatarURL != "" {
		v.Add(xmltree.New(ns.VCard, "PHOTO").Add(xmltree.New(ns.VCard, "EXTVAL").WithText(m.Agent.AvatarURL)))
	}
	return v, nil
}

// vcardSet answers a XEP-0054 vCard update, which is a request of the right
// type that the gateway refuses: endpoint profiles come from manifests.
func vcardSet(context.Context, component.IQ) (*xmltree.Element, error) {
	return nil, agentproto.ErrNotAllowed("An agent endpoint's vCard cannot be changed.")
}
