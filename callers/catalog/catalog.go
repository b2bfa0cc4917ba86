// Package catalog implements what every XMPP caller front (`agentgw mcp`,
// `agentgw a2a`) needs to know which agents its account can see: gateway
// discovery, paging each gateway's directory, pinning every endpoint's
// active manifest (hash-checked, reused while unchanged), the catalog
// changes gateways push on their urn:agentgw:catalog:0 node, and the
// refresh that ties them together. A front turns each pinned endpoint into
// what it presents (MCP tools, A2A Agent Cards) with its own Build
// function; the catalog keeps that value while the pin is unchanged.
//
// It also names the one Client interface the fronts use; the XMPP agent
// client *agentclient.Client implements it.
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
)

// Client is the part of the XMPP agent client the fronts use;
// *agentclient.Client implements it. When a Client also has the catalog
// push side (SubscribeCatalog and OnCatalogChange, as *agentclient.Client
// does), the catalog subscribes to every gateway it lists and refreshes on
// every pushed change.
type Client interface {
	JID() jid.JID
	FindGateways(ctx context.Context, server jid.JID) ([]jid.JID, error)
	AllItems(ctx context.Context, to jid.JID, node string, pageSize int) ([]agentclient.Item, error)
	Endpoint(ctx context.Context, ep jid.JID) (*agentclient.EndpointInfo, error)
	GetManifest(ctx context.Context, ep jid.JID, version string) (*agentclient.Manifest, error)
	Invoke(ctx context.Context, ep jid.JID, req *agentclient.InvokeRequest) (*agentclient.Accepted, error)
	Follow(ctx context.Context, ep jid.JID, acc *agentclient.Accepted, opts agentclient.CallOptions) (*agentclient.Outcome, error)
	Subscribe(ep jid.JID, taskID string) (<-chan agentclient.Event, func())
	State(ctx context.Context, ep jid.JID, taskID string) (*agentclient.TaskState, error)
	Result(ctx context.Context, ep jid.JID, taskID string) (*agentclient.TaskResult, error)
	Cancel(ctx context.Context, ep jid.JID, taskID string, expectedRevision int64, reason *string) (int64, error)
	ProvideInput(ctx context.Context, ep jid.JID, taskID, requestID string, expectedRevision int64, input json.RawMessage) (int64, error)
}

var _ Client = (*agentclient.Client)(nil)

// watcher is the optional push side of a Client: agentgw's catalog change
// PubSub node (catalogpush on the gateway).
type watcher interface {
	SubscribeCatalog(ctx context.Context, gw jid.JID) error
	OnCatalogChange(func(agentclient.CatalogChange))
}

var _ watcher = (*agentclient.Client)(nil)

// Options configure a Catalog. The zero value is usable.
type Options struct {
	// Gateways are the directories to list. Empty means the gateways the
	// account's server advertises in disco#items (re-discovered on every
	// refresh; the last good answer is used while discovery fails).
	Gateways []jid.JID
	// DirectoryPageSize is the RSM page size for directory listings
	// (default 50).
	DirectoryPageSize int
	// Concurrency bounds parallel endpoint queries during a refresh
	// (default 8).
	Concurrency int
	// Logger receives diagnostics (default slog.Default()).
	Logger *slog.Logger
}

// Endpoint is one endpoint pinned to its active manifest.
type Endpoint struct {
	JID      jid.JID // bare
	Info     *agentclient.EndpointInfo
	Manifest *agentclient.Manifest
	// Delegation: the endpoint accepts agentgw's delegation-depth
	// extension.
	Delegation bool
}

// entry is a pin and what the front built from it.
type entry[T any] struct {
	ep  *Endpoint
	val T
}

// Catalog is the set of endpoints an account can see, each pinned to its
// active manifest, with the front's value T built from each pin.
type Catalog[T any] struct {
	c     Client
	opts  Options
	log   *slog.Logger
	build func(*Endpoint) T

	refreshMu sync.Mutex // one Refresh at a time

	mu        sync.Mutex
	gateways  []jid.JID            // last good discovered gateways
	listed    map[string][]string  // gateway → endpoints of its last good listing
	endpoints map[string]*entry[T] // bare JID → pin
	loaded    time.Time            // end of the last refresh that saw no push
	pushed    uint64               // catalog changes pushed so far
	kick      chan struct{}
}

// New makes a Catalog over c. build turns a freshly pinned endpoint into
// the front's value; it runs during Refresh, concurrently for different
// endpoints. Call Refresh to discover endpoints.
func New[T any](c Client, opts Options, build func(*Endpoint) T) *Catalog[T] {
	if opts.DirectoryPageSize <= 0 {
		opts.DirectoryPageSize = 50
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cat := &Catalog[T]{
		c: c, opts: opts, log: opts.Logger, build: build,
		listed: map[string][]string{}, endpoints: map[string]*entry[T]{}, kick: make(chan struct{}, 1),
	}
	if w, ok := c.(watcher); ok {
		// A pushed activation or deactivation makes the catalog stale at
		// once and wakes Watch, so hosts hear of it within a fraction of a
		// second; polling stays the fallback for gateways without the node
		// and for changes it does not carry (grants, new gateways).
		w.OnCatalogChange(func(ch agentclient.CatalogChange) {
			cat.log.Debug("catalog change pushed", "gateway", ch.Gateway.String(), "endpoint", ch.Endpoint, "active", ch.Active)
			cat.mu.Lock()
			cat.pushed++
			cat.loaded = time.Time{}
			cat.mu.Unlock()
			cat.Soon()
		})
	}
	return cat
}

// Soon asks Watch for an early refresh (for example after a call hinted at
// a stale pin).
func (cat *Catalog[T]) Soon() {
	select {
	case cat.kick <- struct{}{}:
	default:
	}
}

// Watch calls refresh every interval (never when every <= 0) and whenever
// a change is pushed or Soon is called, until ctx is done.
func (cat *Catalog[T]) Watch(ctx context.Context, every time.Duration, refresh func(context.Context)) {
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-cat.kick:
		}
		refresh(ctx)
	}
}

// Fresh reports whether the last refresh ended less than ttl ago and no
// change was pushed since.
func (cat *Catalog[T]) Fresh(ttl time.Duration) bool {
	cat.mu.Lock()
	defer cat.mu.Unlock()
	return time.Since(cat.loaded) < ttl
}

// Get returns the value built for the endpoint with bare JID bare.
func (cat *Catalog[T]) Get(bare string) (T, bool) {
	cat.mu.Lock()
	defer cat.mu.Unlock()
	if e := cat.endpoints[bare]; e != nil {
		return e.val, true
	}
	var zero T
	return zero, false
}

// Snapshot returns the values of every pinned endpoint by bare JID.
func (cat *Catalog[T]) Snapshot() map[string]T {
	cat.mu.Lock()
	defer cat.mu.Unlock()
	return cat.snapshot(cat.endpoints)
}

func (cat *Catalog[T]) snapshot(eps map[string]*entry[T]) map[string]T {
	out := make(map[string]T, len(eps))
	for k, e := range eps {
		out[k] = e.val
	}
	return out
}

// Refresh rediscovers gateways, pages their directories, pins the active
// manifest of every listed endpoint, then (re)subscribes to the gateways'
// catalog nodes. It returns the new snapshot, or nil when nothing was
// refreshed (no gateway known, or ctx done). A gateway whose listing fails
// keeps its last good listing and an endpoint that cannot be reached its
// last pin, and the error says so beside a non-nil snapshot; an endpoint
// that answers item-not-found, is hidden or cannot run tasks is dropped.
func (cat *Catalog[T]) Refresh(ctx context.Context) (map[string]T, error) {
	cat.refreshMu.Lock()
	defer cat.refreshMu.Unlock()

	gws, err := cat.sources(ctx)
	if err != nil {
		return nil, err
	}
	cat.mu.Lock()
	prevListed, prevEPs, pushed := cat.listed, cat.endpoints, cat.pushed
	cat.mu.Unlock()

	listed := map[string][]string{}
	var order []string
	seen := map[string]bool{}
	var listErrs []error
	for _, gw := range gws {
		key := gw.String()
		eps, err := cat.list(ctx, gw)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			listErrs = append(listErrs, fmt.Errorf("listing %s: %w", key, err))
			eps = prevListed[key]
		}
		listed[key] = eps
		for _, ep := range eps {
			if !seen[ep] {
				seen[ep] = true
				order = append(order, ep)
			}
		}
	}

	entries := make([]*entry[T], len(order))
	sem := make(chan struct{}, cat.opts.Concurrency)
	var wg sync.WaitGroup
	for i, ep := range order {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			entries[i] = cat.pin(ctx, ep, prevEPs[ep])
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	eps := map[string]*entry[T]{}
	for i, e := range entries {
		if e != nil {
			eps[order[i]] = e
		}
	}
	cat.mu.Lock()
	cat.listed = listed
	cat.endpoints = eps
	if cat.pushed == pushed { // a change pushed meanwhile keeps it stale
		cat.loaded = time.Now()
	}
	snap := cat.snapshot(eps)
	cat.mu.Unlock()
	cat.subscribe(ctx, gws)
	return snap, errors.Join(listErrs...)
}

// sources returns the gateways to list.
func (cat *Catalog[T]) sources(ctx context.Context) ([]jid.JID, error) {
	if len(cat.opts.Gateways) > 0 {
		return cat.opts.Gateways, nil
	}
	gws, err := cat.c.FindGateways(ctx, cat.c.JID().Domain())
	cat.mu.Lock()
	defer cat.mu.Unlock()
	if err != nil {
		if cat.gateways != nil {
			cat.log.Warn("gateway discovery failed; using the last known gateways", "error", err)
			return cat.gateways, nil
		}
		return nil, fmt.Errorf("discovering gateways: %w", err)
	}
	cat.gateways = gws
	return gws, nil
}

// list pages a gateway's directory and returns its endpoint bare JIDs.
func (cat *Catalog[T]) list(ctx context.Context, gw jid.JID) ([]string, error) {
	items, err := cat.c.AllItems(ctx, gw, "", cat.opts.DirectoryPageSize)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range items {
		j, err := jid.Parse(it.JID)
		if err != nil || j.Localpart() == "" {
			continue
		}
		out = append(out, j.Bare().String())
	}
	return out, nil
}

// pin pins an endpoint's active manifest, reusing prev when the advertised
// version, hash and delegation support are unchanged. It returns nil for
// an endpoint that is gone, hidden or cannot run tasks, and prev when the endpoint cannot be reached.
func (cat *Catalog[T]) pin(ctx context.Context, ep string, prev *entry[T]) *entry[T] {
	j, err := jid.Parse(ep)
	if err != nil {
		return nil
	}
	gone := func(err error) *entry[T] {
		if agentclient.Condition(err) == "item-not-found" {
			return nil
		}
		if prev != nil {
			cat.log.Warn("endpoint unreachable; keeping its last known manifest", "endpoint", ep, "error", err)
		}
		return prev
	}
	info, err := cat.c.Endpoint(ctx, j)
	if err != nil {
		return gone(err)
	}
	if !info.Features[ns.Task] {
		return nil
	}
	delegation := info.Features[ns.Delegation]
	if prev != nil && info.Version != "" && prev.ep.Manifest.Version == info.Version &&
		prev.ep.Manifest.Hash == info.ManifestHash && prev.ep.Delegation == delegation {
		return prev
	}
	m, err := cat.c.GetManifest(ctx, j, "")
	if err != nil {
		return gone(err)
	}
	if aj, err := jid.Parse(m.Doc.Agent.JID); err != nil || !aj.Bare().Equal(j.Bare()) {
		cat.log.Warn("manifest names another agent; ignoring the endpoint", "endpoint", ep)
		return nil
	}
	e := &entry[T]{ep: &Endpoint{JID: j.Bare(), Info: info, Manifest: m, Delegation: delegation}}
	e.val = cat.build(e.ep)
	return e
}

// subscribe subscribes to the catalog node of every gateway listed.
// Gateways keep subscriptions in memory, so this follows every refresh:
// cheap, idempotent, and it re-subscribes after a gateway restart. A
// gateway without the node answers an error, which is ignored (polling
// covers it).
func (cat *Catalog[T]) subscribe(ctx context.Context, gws []jid.JID) {
	w, ok := cat.c.(watcher)
	if !ok {
		return
	}
	for _, gw := range gws {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := w.SubscribeCatalog(sctx, gw)
		cancel()
		if err != nil && ctx.Err() == nil {
			cat.log.Debug("catalog subscription refused; polling only", "gateway", gw.String(), "error", err)
		}
	}
}
