package agentclient

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// FindGateways asks the server for its items and keeps those whose
// disco#info advertises the agent directory feature (never guessing from
// names, as the spec requires).
func (c *Client) FindGateways(ctx context.Context, server jid.JID) ([]jid.JID, error) {
	items, err := c.AllItems(ctx, server, "", 0)
	if err != nil {
		return nil, fmt.Errorf("listing the server's services: %w", err)
	}
	var out []jid.JID
	for _, it := range items {
		j, err := jid.Parse(it.JID)
		if err != nil {
			continue
		}
		info, err := c.Info(ctx, j, "")
		if err != nil {
			continue
		}
		if info.Features[ns.Directory] {
			out = append(out, j)
		}
	}
	return out, nil
}

// EndpointInfo is an endpoint's disco#info with its information form.
type EndpointInfo struct {
	JID           string
	Name          string // identity name
	ServerName    string
	ServerTitle   string
	Description   string
	Version       string
	ManifestHash  string
	ColdStart     bool
	ReplaySeconds int
	Features      map[string]bool
	IsEndpoint    bool // identity automation/agent-endpoint present
}

// Endpoint queries an endpoint's information.
func (c *Client) Endpoint(ctx context.Context, ep jid.JID) (*EndpointInfo, error) {
	info, err := c.Info(ctx, ep, "")
	if err != nil {
		return nil, err
	}
	out := &EndpointInfo{JID: ep.String(), Features: info.Features, IsEndpoint: info.HasIdentity(ns.CategoryAutomation, ns.TypeEndpoint)}
	for _, id := range info.Identities {
		if id.Type == ns.TypeEndpoint {
			out.Name = id.Name
		}
	}
	f := info.Forms[ns.EndpointInfo]
	first := func(k string) string {
		if v := f[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	out.ServerName = first("server_name")
	out.ServerTitle = first("server_title")
	out.Description = strings.Join(f["description"], "\n")
	out.Version = first("version")
	out.ManifestHash = first("manifest_hash_value")
	out.ColdStart = first("cold_start_supported") == "1" || first("cold_start_supported") == "true"
	out.ReplaySeconds, _ = strconv.Atoi(first("request_replay_seconds"))
	return out, nil
}

// Manifest is a retrieved, hash-checked manifest.
type Manifest struct {
	Version string
	Hash    string
	JSON    []byte // exactly the canonical bytes received
	Doc     ManifestDoc
}

// ManifestDoc is the part of a manifest the client reads.
type ManifestDoc struct {
	Agent struct {
		JID         string `json:"jid"`
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Version     string `json:"version"`
	} `json:"agent"`
	Tools []ManifestTool `json:"tools"`
}

// ManifestTool is one tool, with its raw schemas.
type ManifestTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Execution    json.RawMessage `json:"execution,omitempty"`
	Meta         json.RawMessage `json:"_meta,omitempty"`
	Ext          *struct {
		SupportsProgress     bool `json:"supportsProgress"`
		SupportsCancellation bool `json:"supportsCancellation"`
		SupportsInput        bool `json:"supportsInput"`
	} `json:"urn:xmpp:agent-api:0,omitempty"`
}

// Tool finds a tool by exact name.
func (m *Manifest) Tool(name string) (*ManifestTool, bool) {
	for i := range m.Doc.Tools {
		if m.Doc.Tools[i].Name == name {
			return &m.Doc.Tools[i], true
		}
	}
	return nil, false
}

// MaxJSONBytes bounds manifests and schemas the client accepts.
const MaxJSONBytes = 4 << 20

// GetManifest retrieves the active manifest (version "") or an exact
// version, and checks that the bytes hash to the advertised value.
func (c *Client) GetManifest(ctx context.Context, ep jid.JID, version string) (*Manifest, error) {
	req := xmltree.New(ns.API, "manifest-request")
	if version != "" {
		req.SetAttr("version", version)
	}
	p, err := c.iq(ctx, "get", ep, req)
	if err != nil {
		return nil, err
	}
	if !p.Is(ns.API, "manifest") {
		return nil, errors.New("agentclient: manifest-request result has no manifest")
	}
	m := &Manifest{Version: p.AttrValue("version")}
	h := p.Child(ns.Hashes, "hash")
	js := p.Child(ns.API, "json")
	if h == nil || js == nil || h.AttrValue("algo") != ns.HashAlgo {
		return nil, errors.New("agentclient: manifest lacks a sha-256 hash or json")
	}
	if len(js.Text) > MaxJSONBytes {
		return nil, errors.New("agentclient: manifest larger than the client accepts")
	}
	m.Hash = h.Text
	m.JSON = []byte(js.Text)
	if HashOf(m.JSON) != m.Hash {
		return nil, ErrHashMismatch
	}
	if err := json.Unmarshal(m.JSON, &m.Doc); err != nil {
		return nil, fmt.Errorf("agentclient: manifest JSON: %w", err)
	}
	if version != "" && m.Version != version {
		return nil, errors.New("agentclient: manifest version differs from the one requested")
	}
	return m, nil
}

// HashOf is the XEP-0300 base64 SHA-256 of b.
func HashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Schema is a retrieved, hash-checked tool schema.
type Schema struct {
	Tool, Version, Direction string
	ManifestHash, SchemaHash string
	JSON                     []byte
}

// GetSchema retrieves a tool's input or output schema pinned to a version
// and manifest hash.
func (c *Client) GetSchema(ctx context.Context, ep jid.JID, tool, version, direction, manifestHash string) (*Schema, error) {
	req := xmltree.New(ns.API, "schema-request", "direction", direction, "tool", tool, "version", version)
	req.Add(xmltree.New(ns.Hashes, "hash", "algo", ns.HashAlgo).WithText(manifestHash))
	p, err := c.iq(ctx, "get", ep, req)
	if err != nil {
		return nil, err
	}
	if !p.Is(ns.API, "schema") {
		return nil, errors.New("agentclient: schema-request result has no schema")
	}
	s := &Schema{Tool: p.AttrValue("tool"), Version: p.AttrValue("version"), Direction: p.AttrValue("direction")}
	if mh := p.Child(ns.API, "manifest-hash"); mh != nil {
		if h := mh.Child(ns.Hashes, "hash"); h != nil {
			s.ManifestHash = h.Text
		}
	}
	if sh := p.Child(ns.API, "schema-hash"); sh != nil {
		if h := sh.Child(ns.Hashes, "hash"); h != nil {
			s.SchemaHash = h.Text
		}
	}
	js := p.Child(ns.API, "json")
	if js == nil || s.SchemaHash == "" {
		return nil, errors.New("agentclient: schema lacks json or hash")
	}
	s.JSON = []byte(js.Text)
	if HashOf(s.JSON) != s.SchemaHash {
		return nil, ErrHashMismatch
	}
	if s.ManifestHash != manifestHash {
		return nil, errors.New("agentclient: schema is pinned to another manifest hash")
	}
	return s, nil
}

// ToolItems lists the tool nodes of a version's tool collection.
func (c *Client) ToolItems(ctx context.Context, ep jid.JID, version string) ([]Item, error) {
	return c.AllItems(ctx, ep, ns.ToolsNodePrefix+"#"+version, 50)
}

// SearchPage submits a jabber:iq:search form for nick at the gateway.
func (c *Client) SearchPage(ctx context.Context, gw jid.JID, nick string, max int, after string) (*Page, error) {
	q := xmltree.New(ns.Search, "query")
	x := xmltree.New(ns.Data, "x", "type", "submit")
	x.Add(xmltree.New(ns.Data, "field", "type", "hidden", "var", "FORM_TYPE").Add(xmltree.New(ns.Data, "value").WithText(ns.Search)))
	x.Add(xmltree.New(ns.Data, "field", "var", "nick").Add(xmltree.New(ns.Data, "value").WithText(nick)))
	q.Add(x)
	if max > 0 || after != "" {
		q.Add(rsmRequest(max, after))
	}
	p, err := c.iq(ctx, "set", gw, q)
	if err != nil {
		return nil, err
	}
	page := &Page{Count: -1}
	if p == nil {
		return page, nil
	}
	if rx := p.Child(ns.Data, "x"); rx != nil {
		for _, item := range rx.ChildrenNamed(ns.Data, "item") {
			f := formFields(item)
			it := Item{}
			if v := f["jid"]; len(v) > 0 {
				it.JID = v[0]
			}
			if v := f["nick"]; len(v) > 0 {
				it.Name = v[0]
			}
			page.Items = append(page.Items, it)
		}
	}
	parseRSMResult(p.Child(ns.RSM, "set"), page)
	return page, nil
}
