// Package a2afront implements `agentgw a2a`: an A2A 1.0 and 0.3 server that logs
// into XMPP as one ordinary account and presents every agent that account
// can see as an A2A agent, one Agent Card per endpoint.
//
// The task lifecycle is bridged, not flattened: an A2A task is the XMPP
// task (same id), message/send and message/stream invoke with the A2A
// messageId as the replay key, status updates follow the lifecycle events,
// input-required carries the question, a follow-up message answers it,
// tasks/cancel cancels, and tasks/get and tasks/resubscribe read the XMPP
// task-state, so they work after any reconnect. Authorization stays
// XMPP's: the account's bare JID is the principal. docs/a2a.md has the
// mapping and what it loses.
package a2afront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	v1a2a "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/a2abridge/a2amap"
	"github.com/agentgw/agentgw/a2abridge/cardsig"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/catalog"
)

// Client is the part of the XMPP agent client the front uses, the one
// interface of the caller fronts; *agentclient.Client implements it.
type Client = catalog.Client

// Options configure a Front.
type Options struct {
	// BaseURL is the public URL prefix the cards advertise
	// (e.g. "http://127.0.0.1:8090"). Required.
	BaseURL string
	// Gateways are the directories to list; empty means the gateways the
	// account's server advertises.
	Gateways []jid.JID
	// Refresh is how long a discovered catalog is reused (default 30s).
	Refresh time.Duration
	// DirectoryPageSize is the RSM page size (default 50).
	DirectoryPageSize int
	// RecoverAfter is how long a stream waits without lifecycle events
	// before it reads task-state (default 5s).
	RecoverAfter time.Duration
	// CancelWait bounds how long tasks/cancel waits for the task to settle
	// (default 15s).
	CancelWait time.Duration
	// BlockingWait bounds a blocking message/send (default 10 minutes).
	BlockingWait time.Duration
	// MaxRequestBytes bounds a JSON-RPC request body (default 1 MiB).
	MaxRequestBytes int64
	// Version is reported in the cards' provider metadata.
	Version string
	// CardSigner signs every served card (A2A 1.0 §8.4); nil serves them
	// unsigned.
	CardSigner *cardsig.Signer
	// Push turns push notifications on (an outbox file is required).
	Push PushOptions
	// OAuth, when set, makes the cards declare the issuer's OpenID Connect
	// scheme (the front is a resource server, Users) in place of the
	// static bearer.
	OAuth  *OAuthScheme
	Logger *slog.Logger
}

// Front serves the account's XMPP agents over A2A.
type Front struct {
	c    Client
	opts Options
	log  *slog.Logger
	cat  *catalog.Catalog[*agent] // bare JID → pinned agent
	// tasks indexes the tasks started here (ListTasks, context ids).
	tasks *taskIndex
	// push delivers push notifications (nil: not offered).
	push *pusher
	// ctx bounds background work (push watchers); Serve's.
	ctx context.Context
}

// agent is one endpoint pinned to its active manifest.
type agent struct {
	jid     jid.JID
	info    *agentclient.EndpointInfo
	version string
	hash    string
	tools   []agentclient.ManifestTool
	card    *a2a.AgentCard
	// cardJSON is the served card: the 0.3 card with the 1.0 fields beside
	// it (supportedInterfaces), read by clients of either version.
	cardJSON json.RawMessage
	// card10 is the A2A 1.0 card alone (1.0 fields only), served to a
	// request with A2A-Version: 1.0: a 1.0 client verifies its signature
	// over exactly the fields it knows.
	card10 json.RawMessage
}

// New makes a Front.
func New(c Client, opts Options) (*Front, error) {
	if _, err := url.Parse(opts.BaseURL); err != nil || opts.BaseURL == "" {
		return nil, fmt.Errorf("a2a front: a base URL is required")
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 30 * time.Second
	}
	if opts.DirectoryPageSize <= 0 {
		opts.DirectoryPageSize = 50
	}
	if opts.RecoverAfter <= 0 {
		opts.RecoverAfter = 5 * time.Second
	}
	if opts.CancelWait <= 0 {
		opts.CancelWait = 15 * time.Second
	}
	if opts.BlockingWait <= 0 {
		opts.BlockingWait = 10 * time.Minute
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &Front{c: c, opts: opts, log: opts.Logger, tasks: newTaskIndex(0), ctx: context.Background()}
	if opts.Push.Enabled {
		p, err := newPusher(f, opts.Push)
		if err != nil {
			return nil, err
		}
		f.push = p
		// The front's store keeps the task index too.
		f.tasks.db, f.tasks.log = opts.Push.Store, opts.Logger
	}
	// A pushed activation or deactivation makes the catalog stale at once:
	// the next card or call refreshes it (issue 20's node).
	f.cat = catalog.New(c, catalog.Options{
		Gateways: opts.Gateways, DirectoryPageSize: opts.DirectoryPageSize, Logger: opts.Logger,
	}, f.agent)
	return f, nil
}

// errUnknownAgent is returned for an agent the account cannot see.
var errUnknownAgent = errors.New("no such agent")

// lookup returns the pinned agent, refreshing the catalog when it is stale
// or does not know the JID.
func (f *Front) lookup(ctx context.Context, bare string) (*agent, error) {
	a, _ := f.cat.Get(bare)
	if a != nil && f.cat.Fresh(f.opts.Refresh) {
		return a, nil
	}
	if err := f.Refresh(ctx); err != nil && a == nil {
		return nil, err
	}
	if a, _ = f.cat.Get(bare); a == nil {
		return nil, errUnknownAgent
	}
	return a, nil
}

// Agents lists the pinned agents' cards as served, sorted by JID.
func (f *Front) Agents(ctx context.Context) ([]json.RawMessage, error) {
	if !f.cat.Fresh(f.opts.Refresh) {
		if err := f.Refresh(ctx); err != nil {
			f.log.Warn("agent discovery failed; serving the last known agents", "error", err)
		}
	}
	agents := f.cat.Snapshot()
	keys := make([]string, 0, len(agents))
	for k := range agents {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]json.RawMessage, 0, len(keys))
	for _, k := range keys {
		out = append(out, agents[k].cardJSON)
	}
	return out, nil
}

// Refresh rediscovers the visible endpoints and pins their manifests
// (the catalog), reusing an agent whose advertised version and hash are
// unchanged.
func (f *Front) Refresh(ctx context.Context) error {
	_, err := f.cat.Refresh(ctx)
	return err
}

// agent makes the A2A agent of a freshly pinned endpoint.
func (f *Front) agent(e *catalog.Endpoint) *agent {
	a := &agent{jid: e.JID, info: e.Info, version: e.Manifest.Version, hash: e.Manifest.Hash, tools: e.Manifest.Doc.Tools}
	a.card = f.card(a, e.Manifest)
	a.cardJSON = f.unionCard(a)
	a.card10 = f.card10(a)
	return a
}

// cardURL is where an agent's JSON-RPC interface is served (both
// versions, told apart by the A2A-Version header).
func (f *Front) cardURL(bare string) string {
	return f.opts.BaseURL + "/agents/" + url.PathEscape(bare)
}

// restURL is where an agent's HTTP+JSON interface is served.
func (f *Front) restURL(bare string) string { return f.cardURL(bare) + "/rest" }

// card10 is the agent's A2A 1.0 card, signed.
func (f *Front) card10(a *agent) json.RawMessage {
	c := a2av0.ToV1AgentCard(a.card)
	bare := a.jid.String()
	c.SupportedInterfaces = []*v1a2a.AgentInterface{
		{URL: f.cardURL(bare), ProtocolBinding: v1a2a.TransportProtocolJSONRPC, ProtocolVersion: "1.0"},
		{URL: f.restURL(bare), ProtocolBinding: v1a2a.TransportProtocolHTTPJSON, ProtocolVersion: "1.0"},
		{URL: f.cardURL(bare), ProtocolBinding: v1a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3"},
	}
	out, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	return f.sign(bare, out)
}

// sign signs a card when the front has a key.
func (f *Front) sign(bare string, card []byte) json.RawMessage {
	if f.opts.CardSigner == nil {
		return card
	}
	signed, err := f.opts.CardSigner.Sign(card)
	if err != nil {
		f.log.Warn("signing an agent card failed; serving it unsigned", "agent", bare, "error", err.Error())
		return card
	}
	return signed
}

// unionCard is the card as served: the 0.3 card (url, preferredTransport,
// protocolVersion 0.3.0) plus A2A 1.0's supportedInterfaces, one entry per
// binding and version. A 1.0 client picks a 1.0 interface; a 0.3 client
// reads the 0.3 fields it knows and ignores the rest.
func (f *Front) unionCard(a *agent) json.RawMessage {
	b, err := json.Marshal(a.card)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	bare := a.jid.String()
	m["supportedInterfaces"] = []map[string]any{
		{"url": f.cardURL(bare), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
		{"url": f.restURL(bare), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
		{"url": f.cardURL(bare), "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
	}
	// 1.0 names the security requirement list securityRequirements.
	name, scopes := f.scheme()
	m["securityRequirements"] = []map[string]any{{"schemes": map[string]any{name: map[string]any{"list": scopes}}}}
	out, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return f.sign(bare, out)
}

// card builds an agent's A2A Agent Card: one skill per tool, and the
// schemas, JID and manifest pin in agentgw's card extension.
func (f *Front) card(a *agent, m *agentclient.Manifest) *a2a.AgentCard {
	d := m.Doc.Agent
	name := d.Title
	if name == "" {
		name = d.Name
	}
	if name == "" {
		name = a.jid.String()
	}
	skillSchemas := map[string]any{}
	var skills []a2a.AgentSkill
	for _, t := range a.tools {
		title := t.Title
		if title == "" {
			title = t.Name
		}
		skills = append(skills, a2a.AgentSkill{
			ID: t.Name, Name: title, Description: t.Description, Tags: []string{"xmpp-tool"},
			InputModes: []string{"application/json", "text/plain"}, OutputModes: []string{"application/json", "text/plain"},
		})
		s := map[string]any{"inputSchema": json.RawMessage(t.InputSchema)}
		if len(t.OutputSchema) > 0 {
			s["outputSchema"] = json.RawMessage(t.OutputSchema)
		}
		if t.Ext != nil {
			s["supportsProgress"], s["supportsCancellation"], s["supportsInput"] = t.Ext.SupportsProgress, t.Ext.SupportsCancellation, t.Ext.SupportsInput
		}
		skillSchemas[t.Name] = s
	}
	return &a2a.AgentCard{
		Name: name, Description: d.Description, URL: f.cardURL(a.jid.String()), Version: a.version,
		ProtocolVersion: a2amap.ProtocolVersion, PreferredTransport: a2a.TransportProtocolJSONRPC,
		Capabilities: a2a.AgentCapabilities{
			Streaming:         true,
			PushNotifications: f.push != nil,
			Extensions: []a2a.AgentExtension{{
				URI:         a2amap.ExtensionURI,
				Description: "The XMPP agent behind this card: its JID, pinned manifest and each skill's JSON Schemas.",
				Params: map[string]any{
					"jid": a.jid.String(), "manifestVersion": a.version, "manifestHash": a.hash, "skills": skillSchemas,
				},
			}},
		},
		DefaultInputModes:  []string{"application/json", "text/plain"},
		DefaultOutputModes: []string{"application/json", "text/plain"},
		Skills:             skills,
		SecuritySchemes:    f.securitySchemes(),
		Security:           f.security(),
		Provider:           &a2a.AgentProvider{Org: "agentgw (XMPP agent gateway) " + f.opts.Version, URL: "xmpp:" + a.jid.String()},
	}
}

// OAuthScheme is what the cards say of a front that is an OAuth 2.1
// resource server.
type OAuthScheme struct {
	// Issuer is the authorization server (an OpenID Connect issuer).
	Issuer string
	// Scopes are required in every token.
	Scopes []string
}

// scheme is the name of the cards' one security scheme and its scopes.
func (f *Front) scheme() (string, []string) {
	if f.opts.OAuth == nil {
		return "bearer", []string{}
	}
	scopes := append([]string{}, f.opts.OAuth.Scopes...)
	return "oauth", scopes
}

func (f *Front) securitySchemes() a2a.NamedSecuritySchemes {
	if o := f.opts.OAuth; o != nil {
		return a2a.NamedSecuritySchemes{"oauth": a2a.OpenIDConnectSecurityScheme{
			OpenIDConnectURL: strings.TrimSuffix(o.Issuer, "/") + "/.well-known/openid-configuration",
			Description:      "An access token of this issuer for this front (audience: the front's URL); the caller acts as the JID the token names.",
		}}
	}
	return a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{
		Scheme: "bearer", Description: "The token agentgw a2a was started with.",
	}}
}

func (f *Front) security() []a2a.SecurityRequirements {
	name, scopes := f.scheme()
	return []a2a.SecurityRequirements{{a2a.SecuritySchemeName(name): a2a.SecuritySchemeScopes(scopes)}}
}
