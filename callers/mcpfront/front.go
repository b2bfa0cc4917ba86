// Package mcpfront implements the MCP front of the XMPP agent gateway: an MCP
// server that logs into XMPP as one ordinary account and presents every
// agent tool that account can see as an MCP tool.
//
// Authorization stays XMPP's: the account's bare JID is the principal for
// discovery and invocation, whatever host connects. Discovery pages the
// directories of the configured gateways (or of the gateways the account's
// server lists), pins each endpoint's active manifest (hash-checked), and
// turns each tool into an MCP tool named by [NameStyle]. A tools/call runs
// as an XMPP task with a fresh request-id; progress, input requests and
// cancellation are bridged, lost events are recovered through task-state,
// and the terminal result is passed through. docs/mcp-front.md documents
// the mapping and its semantic losses.
package mcpfront

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/catalog"
	"github.com/agentgw/agentgw/internal/schema"
)

// Client is the part of the XMPP agent client the front uses, the one
// interface of the caller fronts; *agentclient.Client implements it.
type Client = catalog.Client

// Options configure a Front. The zero value is usable.
type Options struct {
	// Gateways are the directories to list. Empty means the gateways the
	// account's server advertises in disco#items (re-discovered on every
	// refresh).
	Gateways []jid.JID
	// Refresh is the interval of the rediscovery poll. Zero means 30s; a
	// negative value disables polling (Refresh can still be called).
	Refresh time.Duration
	// DirectoryPageSize is the RSM page size for directory listings
	// (default 50).
	DirectoryPageSize int
	// ListPageSize is the tools/list page size (default: the SDK's, 1000).
	ListPageSize int
	// Names selects the tool-name style (default NamesMCP).
	Names NameStyle
	// CancelWait bounds the wait for an XMPP task to settle after the
	// front asked to cancel it (default 15s).
	CancelWait time.Duration
	// RecoverAfter is how long a call waits without lifecycle events
	// before it queries task-state (default: agentclient's, 5s).
	RecoverAfter time.Duration
	// Concurrency bounds parallel endpoint queries during a refresh
	// (default 8).
	Concurrency int
	// Implementation is reported to hosts (default name "agentgw").
	Implementation *mcp.Implementation
	// Logger receives diagnostics (default slog.Default()). In stdio mode
	// it must not write to stdout.
	Logger *slog.Logger
}

// Front is the MCP server in front of the XMPP agents.
type Front struct {
	c    Client
	opts Options
	log  *slog.Logger
	srv  *mcp.Server
	key  []byte // signs multi round-trip request state
	cat  *catalog.Catalog[*endpointState]

	refreshMu sync.Mutex // one Refresh (and apply) at a time

	mu     sync.Mutex
	tools  map[string]*binding // MCP name → binding
	notify mcp.Connection      // stdio: where task status notifications go

	known    knownTasks                             // failed task lookups
	watchers atomic.Int64                           // tasks being watched
	sessions map[*mcp.ServerSession]context.Context // under mu
}

// endpointState is one endpoint's pinned active manifest, reduced to the
// tools the front can present.
type endpointState struct {
	jid     jid.JID
	version string
	hash    string
	tools   []*binding // name and mcpTool not yet assigned
	// delegation: the endpoint accepts agentgw's delegation-depth extension.
	delegation bool
}

// binding ties an MCP tool to one XMPP tool at an exact version and
// manifest hash.
type binding struct {
	name    string
	ep      jid.JID
	tool    agentclient.ManifestTool
	version string
	hash    string
	// delegation: the endpoint accepts the delegation-depth extension.
	delegation bool
	input      *schema.Schema
	outOK      bool // the output schema can be shown to MCP hosts
	mcpTool    *mcp.Tool
	print      string // what hosts see, to detect change
}

// New makes a Front for an XMPP agent client. Call Refresh (Run does) to
// discover tools.
func New(c Client, opts Options) *Front {
	if opts.Refresh == 0 {
		opts.Refresh = 30 * time.Second
	}
	if opts.CancelWait <= 0 {
		opts.CancelWait = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	impl := opts.Implementation
	if impl == nil {
		impl = &mcp.Implementation{Name: "agentgw", Title: "XMPP agents (agentgw)", Version: "0"}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("front: no randomness: " + err.Error())
	}
	f := &Front{c: c, opts: opts, log: opts.Logger, key: key, tools: map[string]*binding{}}
	f.cat = catalog.New(c, catalog.Options{
		Gateways: opts.Gateways, DirectoryPageSize: opts.DirectoryPageSize,
		Concurrency: opts.Concurrency, Logger: opts.Logger,
	}, f.endpoint)
	f.srv = mcp.NewServer(impl, &mcp.ServerOptions{
		PageSize: opts.ListPageSize,
		Logger:   opts.Logger,
		// Tools are advertised (with list_changed) even while none are
		// visible yet, so hosts keep listening for changes.
		Capabilities: &mcp.ServerCapabilities{
			Tools:      &mcp.ToolCapabilities{ListChanged: true},
			Extensions: map[string]any{ExtTasks: map[string]any{}},
		},
		Instructions: "Tools of XMPP agents visible to " + catalog.PrincipalOf(c).String() +
			". Each tool's _meta[\"" + MetaTool + "\"] names its XMPP endpoint and pinned version.",
	})
	f.srv.AddReceivingMiddleware(f.middleware)
	f.registerTaskMethods()
	return f
}

// Server is the MCP server, for transports the front does not run itself.
func (f *Front) Server() *mcp.Server { return f.srv }

// Run discovers tools, keeps them fresh, and serves one MCP session on t
// (for example &mcp.StdioTransport{}) until it ends or ctx is done.
func (f *Front) Run(ctx context.Context, t mcp.Transport) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.initial(ctx)
	go f.poll(ctx)
	return f.srv.Run(ctx, taskTransport{Transport: t, f: f})
}

// initial runs the first discovery; its failure leaves an empty tool list
// that the poll fills in later.
func (f *Front) initial(ctx context.Context) {
	if _, err := f.Refresh(ctx); err != nil {
		f.log.Warn("initial discovery failed; serving without tools until a refresh succeeds", "error", err)
	}
}

// poll refreshes on the interval, when a gateway pushes a catalog change,
// and early when a call hinted at a stale pin.
func (f *Front) poll(ctx context.Context) {
	f.cat.Watch(ctx, f.opts.Refresh, func(ctx context.Context) {
		if _, err := f.Refresh(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("refreshing the agent tools failed", "error", err)
		}
	})
}

// soon asks the poll loop for an early refresh.
func (f *Front) soon() { f.cat.Soon() }

// Tools returns the current MCP tool names, sorted.
func (f *Front) Tools() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.tools))
	for n := range f.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Refresh rediscovers gateways, endpoints and active manifests (the
// catalog), and updates the MCP tool set. Hosts get
// notifications/tools/list_changed only when a tool was added or removed,
// or what hosts see of one changed (which includes its pinned version and
// manifest hash). A gateway or endpoint that cannot be reached keeps its
// last known tools; one that answers item-not-found loses them.
func (f *Front) Refresh(ctx context.Context) (changed bool, err error) {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	eps, err := f.cat.Refresh(ctx)
	if eps == nil {
		return false, err
	}
	return f.apply(eps), err
}

// endpoint reduces a freshly pinned endpoint to the tools the front can
// present; the catalog keeps it while the pin is unchanged.
func (f *Front) endpoint(e *catalog.Endpoint) *endpointState {
	st := &endpointState{jid: e.JID, version: e.Manifest.Version, hash: e.Manifest.Hash, delegation: e.Delegation}
	for _, t := range e.Manifest.Doc.Tools {
		b, err := newBinding(st, t)
		if err != nil {
			f.log.Warn("tool cannot be presented over MCP; skipped", "endpoint", e.JID.String(), "tool", safeText(t.Name, 128), "reason", err.Error())
			continue
		}
		st.tools = append(st.tools, b)
	}
	return st
}

// newBinding checks that a manifest tool can be an MCP tool.
func newBinding(st *endpointState, t agentclient.ManifestTool) (*binding, error) {
	if err := mcpObjectSchema(t.InputSchema); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	in, err := schema.CompileInput(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	b := &binding{ep: st.jid, tool: t, version: st.version, hash: st.hash, delegation: st.delegation, input: in}
	b.outOK = len(t.OutputSchema) > 0 && mcpObjectSchema(t.OutputSchema) == nil
	return b, nil
}

// mcpObjectSchema checks what MCP hosts require of tool schemas (the TS
// SDK rejects the whole tools/list otherwise): a JSON object with "type":
// "object", "properties" an object of objects, "required" strings.
func mcpObjectSchema(raw json.RawMessage) error {
	var s struct {
		Type       any             `json:"type"`
		Properties json.RawMessage `json:"properties"`
		Required   json.RawMessage `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return errors.New("not a JSON object")
	}
	if s.Type != "object" {
		return errors.New(`root is not "type": "object"`)
	}
	if len(s.Properties) > 0 {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(s.Properties, &props); err != nil {
			return errors.New("properties is not an object")
		}
		for _, p := range props {
			if !isObjectJSON(p) {
				return errors.New("a property schema is not an object")
			}
		}
	}
	if len(s.Required) > 0 {
		var req []string
		if err := json.Unmarshal(s.Required, &req); err != nil {
			return errors.New("required is not a list of strings")
		}
	}
	return nil
}

// toolMeta is MetaTool of an MCP tool.
type toolMeta struct {
	Endpoint     string          `json:"endpoint"`
	Tool         string          `json:"tool"`
	Version      string          `json:"version"`
	ManifestHash string          `json:"manifestHash"`
	Execution    json.RawMessage `json:"execution,omitempty"`
	// OutputSchemaOmitted is set when the manifest's output schema has no
	// object root, which MCP revisions before 2026-07-28 cannot carry.
	OutputSchemaOmitted bool `json:"outputSchemaOmitted,omitempty"`
}

// mcpTool builds what hosts see of b.
func (b *binding) buildTool() {
	t := &mcp.Tool{
		Name:        b.name,
		Title:       b.tool.Title,
		Description: b.tool.Description,
		InputSchema: json.RawMessage(b.tool.InputSchema),
	}
	if b.outOK {
		t.OutputSchema = json.RawMessage(b.tool.OutputSchema)
	}
	if len(b.tool.Annotations) > 0 {
		var a mcp.ToolAnnotations
		if json.Unmarshal(b.tool.Annotations, &a) == nil {
			t.Annotations = &a
		}
	}
	meta := mcp.Meta{}
	var orig map[string]json.RawMessage
	if len(b.tool.Meta) > 0 && json.Unmarshal(b.tool.Meta, &orig) == nil {
		for k, v := range orig {
			meta[k] = v
		}
	}
	// execution.taskSupport is added per protocol revision by the
	// middleware (tasks.go); the manifest's own value is kept here.
	meta[MetaTool] = toolMeta{
		Endpoint: b.ep.String(), Tool: b.tool.Name, Version: b.version, ManifestHash: b.hash,
		Execution: b.tool.Execution, OutputSchemaOmitted: len(b.tool.OutputSchema) > 0 && !b.outOK,
	}
	t.Meta = meta
	b.mcpTool = t
	p, _ := json.Marshal(t)
	b.print = string(p)
}

// apply names the tools of eps, then adds, replaces and removes MCP tools
// so the server matches. It reports whether anything changed.
func (f *Front) apply(eps map[string]*endpointState) bool {
	var refs []toolRef
	all := map[toolRef]*binding{}
	for _, st := range eps {
		for _, b := range st.tools {
			r := toolRef{Endpoint: st.jid.String(), Tool: b.tool.Name}
			refs = append(refs, r)
			all[r] = b
		}
	}
	names := assignNames(refs, f.opts.Names)
	next := map[string]*binding{}
	for r, b := range all {
		nb := *b
		nb.name = names[r]
		nb.buildTool()
		next[nb.name] = &nb
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	var remove []string
	for name := range f.tools {
		if _, ok := next[name]; !ok {
			remove = append(remove, name)
		}
	}
	changed := len(remove) > 0
	if len(remove) > 0 {
		sort.Strings(remove)
		f.srv.RemoveTools(remove...)
	}
	for name, nb := range next {
		if cur, ok := f.tools[name]; ok && cur.print == nb.print && cur.hash == nb.hash {
			next[name] = cur
			continue
		}
		if !f.addTool(nb) {
			delete(next, name)
			if _, had := f.tools[name]; had {
				f.srv.RemoveTools(name)
			}
		}
		changed = true
	}
	f.tools = next
	return changed
}

// addTool registers b; the SDK panics on schemas it rejects, which must
// cost one tool, not the process.
func (f *Front) addTool(b *binding) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			f.log.Warn("the MCP SDK rejected a tool; skipped", "tool", b.name, "endpoint", b.ep.String())
			ok = false
		}
	}()
	f.srv.AddTool(b.mcpTool, f.handler(b))
	return true
}
