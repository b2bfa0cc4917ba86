// Package front implements `agentgw a2a`: an A2A 0.3.0 server that logs
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
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/a2abridge/a2amap"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
)

// Client is the part of the XMPP agent client the front uses;
// *agentclient.Client implements it.
type Client interface {
	JID() jid.JID
	FindGateways(ctx context.Context, server jid.JID) ([]jid.JID, error)
	AllItems(ctx context.Context, to jid.JID, node string, pageSize int) ([]agentclient.Item, error)
	Endpoint(ctx context.Context, ep jid.JID) (*agentclient.EndpointInfo, error)
	GetManifest(ctx context.Context, ep jid.JID, version string) (*agentclient.Manifest, error)
	Invoke(ctx context.Context, ep jid.JID, req *agentclient.InvokeRequest) (*agentclient.Accepted, error)
	Subscribe(ep jid.JID, taskID string) (<-chan agentclient.Event, func())
	State(ctx context.Context, ep jid.JID, taskID string) (*agentclient.TaskState, error)
	Result(ctx context.Context, ep jid.JID, taskID string) (*agentclient.TaskResult, error)
	Cancel(ctx context.Context, ep jid.JID, taskID string, expectedRevision int64, reason *string) (int64, error)
	ProvideInput(ctx context.Context, ep jid.JID, taskID, requestID string, expectedRevision int64, input json.RawMessage) (int64, error)
}

var _ Client = (*agentclient.Client)(nil)

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
	Logger  *slog.Logger
}

// Front serves the account's XMPP agents over A2A.
type Front struct {
	c    Client
	opts Options
	log  *slog.Logger

	refreshMu sync.Mutex
	mu        sync.Mutex
	loaded    time.Time
	pushed    uint64            // catalog changes pushed so far
	agents    map[string]*agent // bare JID → pinned agent
}

// agent is one endpoint pinned to its active manifest.
type agent struct {
	jid     jid.JID
	info    *agentclient.EndpointInfo
	version string
	hash    string
	tools   []agentclient.ManifestTool
	card    *a2a.AgentCard
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
	f := &Front{c: c, opts: opts, log: opts.Logger, agents: map[string]*agent{}}
	if cw, ok := c.(catalogWatcher); ok {
		// A pushed activation or deactivation makes the catalog stale at
		// once: the next card or call refreshes it (issue 20's node).
		cw.OnCatalogChange(func(agentclient.CatalogChange) {
			f.mu.Lock()
			f.pushed++
			f.loaded = time.Time{}
			f.mu.Unlock()
		})
	}
	return f, nil
}

// catalogWatcher is the optional push side of a Client (*agentclient.Client
// has it): the gateways' catalog change node.
type catalogWatcher interface {
	SubscribeCatalog(ctx context.Context, gw jid.JID) error
	OnCatalogChange(func(agentclient.CatalogChange))
}

// subscribe (re)subscribes to the gateways' catalog nodes, off the request
// path: gateways keep subscriptions in memory, so this follows every
// refresh; a gateway without the node refuses and TTL refresh covers it.
func (f *Front) subscribe(gws []jid.JID) {
	cw, ok := f.c.(catalogWatcher)
	if !ok {
		return
	}
	go func() {
		for _, gw := range gws {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := cw.SubscribeCatalog(ctx, gw); err != nil {
				f.log.Debug("catalog subscription refused; refreshing by TTL only", "gateway", gw.String(), "error", err)
			}
			cancel()
		}
	}()
}

// errUnknownAgent is returned for an agent the account cannot see.
var errUnknownAgent = errors.New("no such agent")

// lookup returns the pinned agent, refreshing the catalog when it is stale
// or does not know the JID.
func (f *Front) lookup(ctx context.Context, bare string) (*agent, error) {
	f.mu.Lock()
	a, fresh := f.agents[bare], time.Since(f.loaded) < f.opts.Refresh
	f.mu.Unlock()
	if a != nil && fresh {
		return a, nil
	}
	if err := f.Refresh(ctx); err != nil && a == nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if a = f.agents[bare]; a == nil {
		return nil, errUnknownAgent
	}
	return a, nil
}

// Agents lists the pinned agents' cards, sorted by JID.
func (f *Front) Agents(ctx context.Context) ([]*a2a.AgentCard, error) {
	f.mu.Lock()
	stale := time.Since(f.loaded) >= f.opts.Refresh
	f.mu.Unlock()
	if stale {
		if err := f.Refresh(ctx); err != nil {
			f.log.Warn("agent discovery failed; serving the last known agents", "error", err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.agents))
	for k := range f.agents {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*a2a.AgentCard, 0, len(keys))
	for _, k := range keys {
		out = append(out, f.agents[k].card)
	}
	return out, nil
}

// Refresh rediscovers the visible endpoints and pins their manifests,
// reusing an agent whose advertised version and hash are unchanged.
func (f *Front) Refresh(ctx context.Context) error {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	gws := f.opts.Gateways
	if len(gws) == 0 {
		var err error
		if gws, err = f.c.FindGateways(ctx, f.c.JID().Domain()); err != nil {
			return fmt.Errorf("discovering gateways: %w", err)
		}
	}
	f.mu.Lock()
	prev, pushed := f.agents, f.pushed
	f.mu.Unlock()
	next := map[string]*agent{}
	var errs []error
	for _, gw := range gws {
		items, err := f.c.AllItems(ctx, gw, "", f.opts.DirectoryPageSize)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", gw, err))
			for k, a := range prev { // keep what that gateway listed before
				if a.jid.Domain().Equal(gw.Domain()) {
					next[k] = a
				}
			}
			continue
		}
		for _, it := range items {
			j, err := jid.Parse(it.JID)
			if err != nil || j.Localpart() == "" {
				continue
			}
			bare := j.Bare().String()
			if a := f.load(ctx, j.Bare(), prev[bare]); a != nil {
				next[bare] = a
			}
		}
	}
	f.mu.Lock()
	f.agents = next
	if f.pushed == pushed { // a change pushed meanwhile keeps it stale
		f.loaded = time.Now()
	}
	f.mu.Unlock()
	f.subscribe(gws)
	return errors.Join(errs...)
}

// load pins one endpoint, or returns nil when it is gone or cannot run
// tasks; prev is kept when the endpoint is unreachable.
func (f *Front) load(ctx context.Context, j jid.JID, prev *agent) *agent {
	info, err := f.c.Endpoint(ctx, j)
	if err != nil {
		if agentclient.Condition(err) == "item-not-found" {
			return nil
		}
		return prev
	}
	if !info.Features[ns.Task] {
		return nil
	}
	if prev != nil && info.Version != "" && prev.version == info.Version && prev.hash == info.ManifestHash {
		return prev
	}
	m, err := f.c.GetManifest(ctx, j, "")
	if err != nil {
		return prev
	}
	if aj, err := jid.Parse(m.Doc.Agent.JID); err != nil || !aj.Bare().Equal(j) {
		f.log.Warn("manifest names another agent; ignoring the endpoint", "endpoint", j.String())
		return nil
	}
	a := &agent{jid: j, info: info, version: m.Version, hash: m.Hash, tools: m.Doc.Tools}
	a.card = f.card(a, m)
	return a
}

// cardURL is where an agent's JSON-RPC interface is served.
func (f *Front) cardURL(bare string) string {
	return f.opts.BaseURL + "/agents/" + url.PathEscape(bare)
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
			Streaming: true,
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
		SecuritySchemes: a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{
			Scheme: "bearer", Description: "The token agentgw a2a was started with.",
		}},
		Security: []a2a.SecurityRequirements{{"bearer": a2a.SecuritySchemeScopes{}}},
		Provider: &a2a.AgentProvider{Org: "agentgw (XMPP agent gateway) " + f.opts.Version, URL: "xmpp:" + a.jid.String()},
	}
}
