package dirxmpp

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/xep/dataform"
	"github.com/agentgw/agentgw/xep/rsm"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// infoQuery starts a disco#info reply, echoing the queried node.
func infoQuery(node string) *xmltree.Element {
	q := xmltree.New(ns.DiscoInfo, "query")
	if node != "" {
		q.SetAttr("node", node)
	}
	return q
}

// identity builds a disco identity. name is an XML copy of a manifest
// string, sanitized (U+FFFD) because the manifest may hold characters XML
// cannot carry; the exact text is in the manifest's JSON.
func identity(typ, name string) *xmltree.Element {
	id := xmltree.New(ns.DiscoInfo, "identity", "category", ns.CategoryAutomation)
	if name != "" {
		id.SetAttr("name", xmltree.Sanitize(name))
	}
	return id.SetAttr("type", typ)
}

func features(q *xmltree.Element, vars ...string) {
	for _, v := range vars {
		q.Add(xmltree.New(ns.DiscoInfo, "feature", "var", v))
	}
}

// gatewayInfo answers disco#info at the gateway and at its directory node.
//
// urn:xmpp:agent-api:0#admin is advertised only to administrators: the
// feature is implemented for them alone, and the spec lets a deployment
// keep administration out of what it advertises federatively.
// urn:xmpp:agent-api:0#self-register is advertised only when Self
// Registration is configured, and only to the accounts it is offered to.
func (s *service) gatewayInfo(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
	node := iq.Payload.AttrValue("node")
	q := infoQuery(node)
	switch node {
	case "":
		q.Add(identity(ns.TypeGateway, s.GatewayName))
		features(q, ns.DiscoInfo, ns.DiscoItems, ns.Search, ns.Data, ns.Directory)
		if s.Admin != nil && s.Policy.IsAdmin(requester(iq)) {
			features(q, ns.APIAdmin)
		}
		s.SelfRegister.feature(q, requester(iq))
		features(q, ns.Ping, ns.RSM)
		features(q, s.GatewayFeatures...)
		if s.GatewayNodes != nil {
			features(q, s.GatewayNodes.Features(requester(iq))...)
		}
	case ns.Directory:
		q.Add(identity(ns.TypeDirectory, ""))
		features(q, ns.DiscoInfo, ns.DiscoItems, ns.RSM)
	default:
		if s.GatewayNodes != nil {
			if q, ok := s.GatewayNodes.NodeInfo(requester(iq), node); ok {
				return q, nil
			}
		}
		return nil, agentproto.ErrItemNotFound()
	}
	return q, nil
}

// parseRSM reads the <set/> under a query, mapping malformed input to
// bad-request.
func parseRSM(q *xmltree.Element) (rsm.Query, error) {
	sets := q.ChildrenNamed(ns.RSM, "set")
	if len(sets) > 1 {
		return rsm.None, agentproto.ErrBadRequest("At most one result set request is allowed.")
	}
	var set *xmltree.Element
	if len(sets) == 1 {
		set = sets[0]
	}
	rq, err := rsm.Parse(set)
	if err != nil {
		return rsm.None, agentproto.ErrBadRequest("The result set request is malformed.")
	}
	return rq, nil
}

// pageQuery converts an RSM request into the directory's form. A
// count-only request (max 0) asks for one item, which the caller drops.
func pageQuery(rq rsm.Query) (directory.PageQuery, bool) {
	limit := rq.Limit(DefaultPageSize, PageCeiling)
	countOnly := limit == 0
	if countOnly {
		limit = 1
	}
	return directory.PageQuery{
		Max:       limit,
		After:     rq.After,
		Before:    rq.Before,
		HasBefore: rq.HasBefore,
		Index:     rq.Index,
	}, countOnly
}

func pageSet(p directory.Page, countOnly bool) *xmltree.Element {
	if countOnly || len(p.Items) == 0 {
		return rsm.Element("", "", -1, p.Count)
	}
	return rsm.Element(p.First, p.Last, p.FirstIndex, p.Count)
}

// gatewayItems lists the endpoints visible to the requester. Items carry no
// node: each is an addressable entity of its own.
func (s *service) gatewayItems(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
	node := iq.Payload.AttrValue("node")
	if node != "" && node != ns.Directory {
		if s.GatewayNodes != nil {
			if q, ok := s.GatewayNodes.NodeItems(requester(iq), s.domain.String(), node); ok {
				return q, nil
			}
		}
		return nil, agentproto.ErrItemNotFound()
	}
	rq, err := parseRSM(iq.Payload)
	if err != nil {
		return nil, err
	}
	pq, countOnly := pageQuery(rq)
	page := s.Reader.List(s.visible(requester(iq)), pq)
	q := xmltree.New(ns.DiscoItems, "query")
	if node != "" {
		q.SetAttr("node", node)
	}
	if !countOnly {
		for _, e := range page.Items {
			it := xmltree.New(ns.DiscoItems, "item", "jid", e.JID)
			if e.Name != "" {
				it.SetAttr("name", xmltree.Sanitize(e.Name))
			}
			q.Add(it)
		}
	}
	return q.Add(pageSet(page, countOnly)), nil
}

// endpointFeatures are the endpoint-wide features, the task layer's
// included. vcard-temp and RSM are implemented here, so they are
// advertised as well.
func (s *service) endpointFeatures(ep string) []string {
	vars := []string{ns.DiscoInfo, ns.DiscoItems, ns.RSM, ns.Endpoint, ns.APIManifest, ns.APISchema}
	if s.TaskFeatures != nil {
		for _, f := range s.TaskFeatures(ep) {
			if !slices.Contains(vars, f) {
				vars = append(vars, f)
			}
		}
	}
	if s.Nodes != nil {
		for _, f := range s.Nodes.Features(ep) {
			if !slices.Contains(vars, f) {
				vars = append(vars, f)
			}
		}
	}
	if s.ChatFeatures != nil {
		for _, f := range s.ChatFeatures(ep) {
			if !slices.Contains(vars, f) {
				vars = append(vars, f)
			}
		}
	}
	return append(vars, ns.VCard)
}

// endpointInfo answers disco#info at an endpoint: node-less for the
// endpoint itself, or for one of its tool-collection and tool nodes.
// urn:xmpp:agent-endpoint:0 is a feature, never a node.
func (s *service) endpointInfo(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
	ep := endpointOf(iq)
	node := iq.Payload.AttrValue("node")
	if node == "" {
		m, ok := s.Reader.Active(ep)
		if !ok {
			return nil, agentproto.ErrItemNotFound()
		}
		return s.endpointInfoReply(ep, m), nil
	}
	if ver, ok := strings.CutPrefix(node, CapsNode+"#"); ok {
		// XEP-0115: the caps node answers like the endpoint itself, for
		// the current ver only.
		m, ok := s.Reader.Active(ep)
		if !ok {
			return nil, agentproto.ErrItemNotFound()
		}
		q := s.endpointInfoReply(ep, m)
		if CapsVer(q) != ver {
			return nil, agentproto.ErrItemNotFound()
		}
		return q.SetAttr("node", node), nil
	}
	if v, ok := directory.ParseToolsNode(node); ok {
		if _, ok := s.Reader.Manifest(ep, v); !ok {
			return nil, agentproto.ErrItemNotFound()
		}
		q := infoQuery(node)
		q.Add(identity(ns.TypeToolCollection, ""))
		features(q, ns.DiscoInfo, ns.DiscoItems, ns.RSM)
		return q, nil
	}
	m, t, err := s.tool(ep, node)
	if err != nil {
		if s.Nodes != nil {
			if q, ok := s.Nodes.NodeInfo(requester(iq), ep, node); ok {
				return q, nil
			}
		}
		return nil, err
	}
	return s.toolInfoReply(ep, node, m, t), nil
}

func (s *service) endpointInfoReply(ep string, m *directory.Manifest) *xmltree.Element {
	q := infoQuery("")
	q.Add(identity(ns.TypeEndpoint, m.DisplayName()))
	features(q, s.endpointFeatures(ep)...)
	fields := []dataform.Field{
		{Var: "server_name", Values: []string{m.Agent.Name}},
		{Var: "server_title", Values: []string{m.DisplayName()}},
	}
	if m.Agent.Description != "" {
		fields = append(fields, dataform.Field{Var: "description", Values: multiline(m.Agent.Description)})
	}
	cold := s.ColdStart != nil && s.ColdStart(ep)
	fields = append(fields,
		dataform.Field{Var: "version", Values: []string{m.Version}},
		dataform.Field{Var: "manifest_hash_algo", Values: []string{ns.HashAlgo}},
		dataform.Field{Var: "manifest_hash_value", Values: []string{m.Hash}},
		dataform.Field{Var: "cold_start_supported", Values: []string{dataform.Bool(cold)}},
		dataform.Field{Var: "request_replay_seconds", Values: []string{strconv.Itoa(s.ReplaySeconds)}},
	)
	form := dataform.Form{Type: dataform.TypeResult, FormType: ns.EndpointInfo, Fields: fields}
	return q.Add(form.Element())
}

// multiline splits a text-multi value into one <value/> per line, as
// XEP-0004 carries it; a one-line text stays one value.
func multiline(s string) []string { return strings.Split(s, "\n") }

// tool resolves a tool node of endpoint ep. Anything that is not a
// well-formed node of a registered version and tool is item-not-found.
func (s *service) tool(ep, node string) (*directory.Manifest, *directory.Tool, error) {
	v, name, err := directory.ParseToolNode(node)
	if err != nil {
		return nil, nil, agentproto.ErrItemNotFound()
	}
	m, ok := s.Reader.Manifest(ep, v)
	if !ok {
		return nil, nil, agentproto.ErrItemNotFound()
	}
	t, ok := m.Tool(name)
	if !ok {
		return nil, nil, agentproto.ErrItemNotFound()
	}
	return m, t, nil
}

// toolTaskFeatures are the task features effective for one tool: the
// endpoint must advertise the feature and the pinned tool must declare it.
func (s *service) toolTaskFeatures(ep string, t *directory.Tool) []string {
	if s.TaskFeatures == nil {
		return nil
	}
	epf := s.TaskFeatures(ep)
	var out []string
	for _, c := range []struct {
		feature  string
		declared bool
	}{
		{ns.TaskProgress, t.Ext.SupportsProgress},
		{ns.TaskCancel, t.Ext.SupportsCancellation},
		{ns.TaskInput, t.Ext.SupportsInput},
	} {
		if c.declared && slices.Contains(epf, c.feature) {
			out = append(out, c.feature)
		}
	}
	return out
}

func (s *service) toolInfoReply(ep, node string, m *directory.Manifest, t *directory.Tool) *xmltree.Element {
	q := infoQuery(node)
	name := t.Title
	if name == "" {
		name = t.Name
	}
	q.Add(identity(ns.TypeTool, name))
	features(q, ns.DiscoInfo, ns.Tool)
	features(q, s.toolTaskFeatures(ep, t)...)
	fields := []dataform.Field{{Var: "name", Values: []string{t.Name}}}
	if t.Title != "" {
		fields = append(fields, dataform.Field{Var: "title", Values: []string{t.Title}})
	}
	if t.Description != "" {
		fields = append(fields, dataform.Field{Var: "description", Values: multiline(t.Description)})
	}
	fields = append(fields,
		dataform.Field{Var: "api_version", Values: []string{m.Version}},
		dataform.Field{Var: "input_schema_hash_algo", Values: []string{ns.HashAlgo}},
		dataform.Field{Var: "input_schema_hash_value", Values: []string{t.InputHash}},
	)
	if t.OutputSchema != nil && t.OutputHash != "" {
		fields = append(fields,
			dataform.Field{Var: "output_schema_hash_algo", Values: []string{ns.HashAlgo}},
			dataform.Field{Var: "output_schema_hash_value", Values: []string{t.OutputHash}},
		)
	}
	// Absent hints stay absent: an absent field means unknown.
	for _, h := range []struct {
		v string
		b *bool
	}{
		{"read_only", t.Annotations.ReadOnly},
		{"destructive", t.Annotations.Destructive},
		{"idempotent", t.Annotations.Idempotent},
		{"open_world", t.Annotations.OpenWorld},
	} {
		if h.b != nil {
			fields = append(fields, dataform.Field{Var: h.v, Values: []string{dataform.Bool(*h.b)}})
		}
	}
	form := dataform.Form{Type: dataform.TypeResult, FormType: ns.ToolInfo, Fields: fields}
	return q.Add(form.Element())
}

// endpointItems answers disco#items at an endpoint. Node-less, it lists
// the active version's tool collection, so generic clients can browse from
// the endpoint to its tools. At a collection node it lists the version's
// tools ordered by UTF-8 name bytes, paged with the tool node as item ID.
// A tool node is a leaf and has no items.
func (s *service) endpointItems(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
	ep := endpointOf(iq)
	node := iq.Payload.AttrValue("node")
	if node == "" {
		m, ok := s.Reader.Active(ep)
		if !ok {
			return nil, agentproto.ErrItemNotFound()
		}
		q := xmltree.New(ns.DiscoItems, "query")
		q.Add(xmltree.New(ns.DiscoItems, "item", "jid", ep, "node", directory.ToolsNode(m.Version), "name", "Tools "+m.Version))
		return q, nil
	}
	if v, ok := directory.ParseToolsNode(node); ok {
		m, ok := s.Reader.Manifest(ep, v)
		if !ok {
			return nil, agentproto.ErrItemNotFound()
		}
		rq, err := parseRSM(iq.Payload)
		if err != nil {
			return nil, err
		}
		return s.toolItems(ep, node, m, rq)
	}
	if _, _, err := s.tool(ep, node); err != nil {
		if s.Nodes != nil {
			if q, ok := s.Nodes.NodeItems(requester(iq), ep, node); ok {
				return q, nil
			}
		}
		return nil, err
	}
	return xmltree.New(ns.DiscoItems, "query", "node", node), nil
}

var errCursor = errors.New("cursor is not a tool node of this collection")

// cursorName turns an RSM cursor (a tool node) into the tool name it
// positions at.
func cursorName(node, version string) (string, error) {
	v, name, err := directory.ParseToolNode(node)
	if err != nil || v != version {
		return "", errCursor
	}
	return name, nil
}

func (s *service) toolItems(ep, node string, m *directory.Manifest, rq rsm.Query) (*xmltree.Element, error) {
	tools := make([]*directory.Tool, len(m.Tools))
	for i := range m.Tools {
		tools[i] = &m.Tools[i]
	}
	// Go strings compare as UTF-8 bytes, which is the order the spec asks.
	slices.SortFunc(tools, func(a, b *directory.Tool) int { return strings.Compare(a.Name, b.Name) })
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	var err error
	if rq.HasAfter {
		if rq.After, err = cursorName(rq.After, m.Version); err != nil {
			return nil, agentproto.ErrItemNotFound()
		}
	}
	if rq.HasBefore && rq.Before != "" {
		if rq.Before, err = cursorName(rq.Before, m.Version); err != nil {
			return nil, agentproto.ErrItemNotFound()
		}
	}
	lo, hi := rq.Window(names, rq.Limit(DefaultPageSize, PageCeiling))
	q := xmltree.New(ns.DiscoItems, "query", "node", node)
	var first, last string
	for i, t := range tools[lo:hi] {
		n := directory.ToolNode(m.Version, t.Name)
		if i == 0 {
			first = n
		}
		last = n
		name := t.Title
		if name == "" {
			name = t.Name
		}
		q.Add(xmltree.New(ns.DiscoItems, "item", "jid", ep, "node", n, "name", xmltree.Sanitize(name)))
	}
	return q.Add(rsm.Element(first, last, lo, len(tools))), nil
}
