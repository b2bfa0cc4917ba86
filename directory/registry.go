package directory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentgw/agentgw/directory/dirdb"
)

// Registry is the directory: the Admin operations write through to a
// dirdb.Driver (store/sqlite in production), and the Reader
// operations answer from an immutable in-memory snapshot that is swapped
// atomically after every committed change, so readers never lock or touch
// the database.
//
// Changes made by another process on the same store (the `agentgw admin`
// command) become visible when Watch notices the change generation move.
type Registry struct {
	store dirdb.Driver
	log   *slog.Logger

	// With a Fetcher the index holds no manifests; they are parsed on use
	// and kept in cache (nil when every manifest is resident).
	fetch dirdb.Fetcher
	cache *manifestCache

	snap atomic.Pointer[snapshot]

	writeMu sync.Mutex // serializes this process's admin writes
	loadMu  sync.Mutex // serializes snapshot rebuilds

	kickOnce sync.Once
	kick     chan struct{} // see Kick

	rc atomic.Pointer[refChecker]

	domain atomic.Pointer[string] // hosted domain; nil accepts any

	cbMu      sync.Mutex
	callbacks []func()
}

type refChecker struct{ ReferenceChecker }

var (
	_ Reader = (*Registry)(nil)
	_ Admin  = (*Registry)(nil)
)

// NewRegistry loads the directory from the driver d. Stored versions that no longer
// load (corrupt bytes, hash mismatch) are logged by endpoint and version and
// left out of the index.
func NewRegistry(ctx context.Context, d dirdb.Driver, log *slog.Logger) (*Registry, error) {
	if d == nil {
		panic("directory: NewRegistry with a nil driver")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{store: d, log: log}
	if f, ok := d.(dirdb.Fetcher); ok {
		r.fetch = f
		r.cache = newManifestCache(ManifestCacheSize)
	}
	r.snap.Store(emptySnapshot)
	// The first load parses every stored manifest, and with the default
	// GOGC the garbage of a large directory roughly doubles the process's
	// footprint, which the runtime then returns to the OS only slowly.
	// Collect harder while loading, and hand the garbage back afterwards.
	// Over a Fetcher the load keeps only the compact index and its garbage
	// is one row's bytes at a time, so the default pacing is cheaper: at 20
	// the collector ran every few MB and dominated a 100,000-endpoint start.
	if r.fetch == nil {
		gc := debug.SetGCPercent(20)
		defer debug.SetGCPercent(gc)
	}
	_, err := r.refresh(ctx, nil)
	debug.FreeOSMemory()
	if err != nil {
		return nil, err
	}
	return r, nil
}

// SetDomain restricts Register to endpoints below domain (the component
// domain): the server routes only that domain to the gateway, so an
// endpoint elsewhere would be listed with nobody answering for it.
func (r *Registry) SetDomain(domain string) {
	d := strings.ToLower(domain)
	r.domain.Store(&d)
}

// SetReferenceChecker installs the task engine's view of retained tasks.
// Until one is installed no version is referenced.
func (r *Registry) SetReferenceChecker(rc ReferenceChecker) {
	if rc == nil {
		r.rc.Store(nil)
		return
	}
	r.rc.Store(&refChecker{rc})
}

// OnChange registers f to run after every change this Registry observes:
// its own commits and, through Watch, any change of the store's change
// generation (directory or trust changes by another process). f runs
// synchronously on the changing goroutine and must not block; it should
// only signal.
func (r *Registry) OnChange(f func()) {
	if f == nil {
		panic("directory: OnChange with a nil func")
	}
	r.cbMu.Lock()
	r.callbacks = append(r.callbacks, f)
	r.cbMu.Unlock()
}

func (r *Registry) notify() {
	r.cbMu.Lock()
	cbs := append([]func(){}, r.callbacks...)
	r.cbMu.Unlock()
	for _, f := range cbs {
		f()
	}
}

// Kick makes Watch poll now rather than at its next tick: the store
// announced a change (in cluster mode, a NOTIFY from another member).
func (r *Registry) Kick() {
	select {
	case r.kickCh() <- struct{}{}:
	default:
	}
}

func (r *Registry) kickCh() chan struct{} {
	r.kickOnce.Do(func() { r.kick = make(chan struct{}, 1) })
	return r.kick
}

// Watch polls the store's change generation every interval and reloads the
// index when it moved. It returns when ctx is done; run it in its own
// goroutine. Poll errors are logged and retried on the next tick.
func (r *Registry) Watch(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	kick := r.kickCh()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		gen, err := r.store.Generation(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("directory: polling the change generation failed", "err", err)
			}
			continue
		}
		if gen == r.snap.Load().gen {
			continue
		}
		changed, err := r.refresh(ctx, nil)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("directory: reloading the index failed", "err", err)
			}
			continue
		}
		if changed {
			r.notify()
		}
	}
}

// refresh rebuilds the snapshot from the store, reusing every version the
// current snapshot (or fresh) already describes: a version's content never
// changes, so only new versions are read. It reports whether the
// generation moved.
func (r *Registry) refresh(ctx context.Context, fresh *Manifest) (bool, error) {
	r.loadMu.Lock()
	defer r.loadMu.Unlock()
	old := r.snap.Load()
	var freshRef *verRef
	if fresh != nil {
		freshRef = &verRef{version: fresh.Version, hash: fresh.Hash, name: fresh.Agent.Name, title: fresh.Agent.Title}
		if r.cache == nil {
			freshRef.m = fresh
		} else {
			r.cache.put(cacheKey(fresh.Endpoint, fresh.Version, fresh.Hash), fresh)
		}
	}
	have := func(endpoint, version, hash string) *verRef {
		if fresh != nil && fresh.Endpoint == endpoint && fresh.Version == version && fresh.Hash == hash {
			return freshRef
		}
		if e := old.endpoints[endpoint]; e != nil {
			if v := e.version(version); v != nil && v.hash == hash {
				return v
			}
		}
		return nil
	}
	// Repeated version strings ("1.0.0") are stored once.
	intern := map[string]string{}
	interned := func(v string) string {
		if w, ok := intern[v]; ok {
			return w
		}
		intern[v] = v
		return v
	}
	loaded := make(map[[2]string]*verRef)
	gen, rows, err := r.store.Load(ctx,
		func(e, v, h string) bool { return have(e, v, h) == nil },
		func(row dirdb.Version) error {
			ref, err := r.loadRef(row)
			if err != nil {
				r.log.Error("directory: a stored manifest version does not load; it is left out of the index",
					"endpoint", row.Endpoint, "version", row.Version, "err", err)
				return nil
			}
			ref.version = interned(ref.version)
			loaded[[2]string{row.Endpoint, row.Version}] = ref
			return nil
		})
	if err != nil {
		return false, err
	}
	if gen == old.gen && old != emptySnapshot {
		return false, nil
	}
	if len(loaded) == 0 && unchanged(old, rows) {
		// The generation moved for something else (a trust change): share
		// the index, only the generation is new.
		s := *old
		s.gen = gen
		r.snap.Store(&s)
		return true, nil
	}
	s := &snapshot{gen: gen, endpoints: make(map[string]*endpointIndex, len(old.endpoints)+1)}
	for _, row := range rows {
		v := have(row.Endpoint, row.Version, row.Hash)
		if v == nil {
			if v = loaded[[2]string{row.Endpoint, row.Version}]; v == nil {
				continue // logged above
			}
		}
		e := s.endpoints[row.Endpoint]
		if e == nil {
			// The key string is shared with old's when the endpoint was
			// known, so a reload allocates no new endpoint strings.
			key := row.Endpoint
			if oe := old.endpoints[key]; oe != nil {
				if i := old.find(key); i >= 0 {
					key = old.jids[i]
				}
			}
			e = &endpointIndex{versions: make([]*verRef, 0, 1)}
			s.endpoints[key] = e
		}
		e.versions = append(e.versions, v)
		if row.Active {
			e.active = v
		}
	}
	s.buildList(old)
	r.snap.Store(s)
	return true, nil
}

// loadRef describes one stored version for the index. Without a Fetcher
// the manifest is parsed and kept; with one only its agent name and title
// are read, after the hash and key checks.
func (r *Registry) loadRef(row dirdb.Version) (*verRef, error) {
	if r.fetch == nil {
		m, err := loadStored(row)
		if err != nil {
			return nil, err
		}
		return &verRef{version: m.Version, hash: m.Hash, name: m.Agent.Name, title: m.Agent.Title, m: m}, nil
	}
	name, title, err := storedAgent(row)
	if err != nil {
		return nil, err
	}
	return &verRef{version: row.Version, hash: row.Hash, name: name, title: title}, nil
}

// manifest returns the parsed manifest of v, from the index, the cache or
// the store. A version removed meanwhile, or whose stored bytes no longer
// parse, is reported missing (the latter logged).
func (r *Registry) manifest(endpoint string, v *verRef) (*Manifest, bool) {
	if v.m != nil {
		return v.m, true
	}
	key := cacheKey(endpoint, v.version, v.hash)
	if m := r.cache.get(key); m != nil {
		return m, true
	}
	c, err := r.fetch.Canonical(context.Background(), endpoint, v.version)
	if err != nil {
		if !errors.Is(err, dirdb.ErrNotFound) {
			r.log.Warn("directory: reading a manifest version failed", "endpoint", endpoint, "version", v.version, "err", err)
		}
		return nil, false
	}
	m, err := loadStored(dirdb.Version{Endpoint: endpoint, Version: v.version, Hash: v.hash, Canonical: c})
	if err != nil {
		r.log.Error("directory: a stored manifest version does not load", "endpoint", endpoint, "version", v.version, "err", err)
		return nil, false
	}
	r.cache.put(key, m)
	return m, true
}

// unchanged reports whether rows describe exactly old's versions and active
// pointers.
func unchanged(old *snapshot, rows []dirdb.Version) bool {
	n := 0
	for _, row := range rows {
		e := old.endpoints[row.Endpoint]
		if e == nil {
			return false
		}
		v := e.version(row.Version)
		if v == nil || v.hash != row.Hash || (e.active == v) != row.Active {
			return false
		}
		n++
	}
	for _, e := range old.endpoints {
		n -= len(e.versions)
	}
	return n == 0
}

// loadStored re-reads stored canonical bytes. They were fully validated at
// registration; tool schemas are not compiled again (the task engine
// compiles them on use), but the bytes must still be canonical and match
// the stored hash and key.
func loadStored(row dirdb.Version) (*Manifest, error) {
	m, err := parseManifest(row.Canonical, false)
	if err != nil {
		return nil, err
	}
	if m.Hash != row.Hash || m.Endpoint != row.Endpoint || m.Version != row.Version || string(m.Canonical) != string(row.Canonical) {
		return nil, errors.New("stored bytes do not match the stored key and hash")
	}
	// m.Canonical equals row.Canonical and the tools' slices point into it;
	// row.Canonical is dropped.
	return m, nil
}

// Reader.

// Manifest returns a registered, not removed version. endpoint must be a
// normalized bare JID (as parsed stanza addresses are). The result is
// shared and must not be modified.
func (r *Registry) Manifest(endpoint, version string) (*Manifest, bool) {
	if e := r.snap.Load().endpoints[endpoint]; e != nil {
		if v := e.version(version); v != nil {
			return r.manifest(endpoint, v)
		}
	}
	return nil, false
}

// Active returns the endpoint's active version.
func (r *Registry) Active(endpoint string) (*Manifest, bool) {
	if e := r.snap.Load().endpoints[endpoint]; e != nil && e.active != nil {
		return r.manifest(endpoint, e.active)
	}
	return nil, false
}

// ActiveVersion returns the version and hash of the endpoint's active
// version without loading its manifest (for callers that scan the whole
// directory, such as catalog change detection).
func (r *Registry) ActiveVersion(endpoint string) (version, hash string, ok bool) {
	if e := r.snap.Load().endpoints[endpoint]; e != nil && e.active != nil {
		return e.active.version, e.active.hash, true
	}
	return "", "", false
}

// Exists reports whether the endpoint has any registered version.
func (r *Registry) Exists(endpoint string) bool {
	return r.snap.Load().endpoints[endpoint] != nil
}

// List pages the active endpoints that visible accepts (nil accepts all),
// ordered octetwise by bare JID. visible is called once per active
// endpoint, because Count covers all pages. Max is cut to MaxPageSize;
// FirstIndex is meaningful only when Items is non-empty.
func (r *Registry) List(visible func(endpoint string) bool, q PageQuery) Page {
	return r.snap.Load().list(visible, q)
}

// Search is List restricted to endpoints whose localpart, agent.name or
// agent.title contains nick after Unicode full case folding (so "STRASSE"
// finds "Straße"). An empty nick lists every visible endpoint.
func (r *Registry) Search(visible func(endpoint string) bool, nick string, q PageQuery) Page {
	return r.snap.Load().search(visible, nick, q)
}

// Generation returns the change generation the in-memory index reflects.
func (r *Registry) Generation() int64 { return r.snap.Load().gen }

// Admin.

// Register validates raw (ParseManifest) and stores it as an immutable
// version. After SetDomain, an agent.jid outside that domain is
// ErrForeignDomain. Identical content is idempotent; different content under an
// existing or tombstoned version is ErrConflict. Registration does not
// activate.
func (r *Registry) Register(ctx context.Context, raw []byte) (*Manifest, error) {
	m, err := ParseManifest(raw)
	if err != nil {
		return nil, err
	}
	if d := r.domain.Load(); d != nil {
		if i := strings.LastIndexByte(m.Endpoint, '@'); i < 0 || m.Endpoint[i+1:] != *d {
			return nil, fmt.Errorf("%w: %s is not below %s", ErrForeignDomain, m.Endpoint, *d)
		}
	}
	err = r.write(ctx, m, func() (bool, error) {
		return r.store.Register(ctx, m.Endpoint, m.Version, m.Hash, m.Canonical)
	})
	if err != nil {
		return nil, err
	}
	if have, ok := r.Manifest(m.Endpoint, m.Version); ok && have.Hash == m.Hash {
		return have, nil
	}
	return m, nil
}

// Activate selects an existing version after checking its hash
// (ErrNotFound, ErrHashMismatch).
func (r *Registry) Activate(ctx context.Context, endpoint, version, hash string) error {
	ep, err := NormalizeEndpoint(endpoint)
	if err != nil {
		return err
	}
	return r.write(ctx, nil, func() (bool, error) {
		return r.store.Activate(ctx, ep, version, hash)
	})
}

// Deactivate clears the active-version pointer; manifests stay.
func (r *Registry) Deactivate(ctx context.Context, endpoint string) error {
	ep, err := NormalizeEndpoint(endpoint)
	if err != nil {
		return err
	}
	return r.write(ctx, nil, func() (bool, error) {
		return r.store.Deactivate(ctx, ep)
	})
}

// Status reports the active version and every registered version in
// registration order, each with whether RemoveVersion would accept it now.
func (r *Registry) Status(ctx context.Context, endpoint string) (*Status, error) {
	ep, err := NormalizeEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	vs, err := r.store.Versions(ctx, ep)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, ErrNotFound
	}
	st := &Status{Endpoint: ep, Versions: make([]VersionStatus, len(vs))}
	for i, v := range vs {
		referenced := false
		if !v.Active {
			if referenced, err = r.referenced(ep, v.Version); err != nil {
				return nil, err
			}
		}
		st.Versions[i] = VersionStatus{Version: v.Version, Hash: v.Hash, Active: v.Active, Removable: !v.Active && !referenced}
		if v.Active {
			st.Active = v.Version
		}
	}
	return st, nil
}

// RemoveVersion removes one inactive version that no retained task
// references (ErrActive, ErrReferenced, ErrNotFound), leaving a permanent
// tombstone.
//
// The reference check and the delete are not one transaction with task
// admission. The task engine should close that window by checking, inside
// its admission transaction, that the directory_versions row still exists
// (same SQLite file).
func (r *Registry) RemoveVersion(ctx context.Context, endpoint, version string) error {
	ep, err := NormalizeEndpoint(endpoint)
	if err != nil {
		return err
	}
	return r.write(ctx, nil, func() (bool, error) {
		vs, err := r.store.Versions(ctx, ep)
		if err != nil {
			return false, err
		}
		found := false
		for _, v := range vs {
			if v.Version == version {
				found = true
				if v.Active {
					return false, ErrActive
				}
			}
		}
		if !found {
			return false, ErrNotFound
		}
		if ref, err := r.referenced(ep, version); err != nil {
			return false, err
		} else if ref {
			return false, ErrReferenced
		}
		return true, r.store.RemoveVersion(ctx, ep, version)
	})
}

// RemoveEndpoint deactivates the endpoint and removes all its versions,
// only if no retained task references any of them (ErrReferenced).
func (r *Registry) RemoveEndpoint(ctx context.Context, endpoint string) error {
	ep, err := NormalizeEndpoint(endpoint)
	if err != nil {
		return err
	}
	return r.write(ctx, nil, func() (bool, error) {
		for attempt := 0; ; attempt++ {
			vs, err := r.store.Versions(ctx, ep)
			if err != nil {
				return false, err
			}
			if len(vs) == 0 {
				return false, ErrNotFound
			}
			names := make([]string, len(vs))
			for i, v := range vs {
				names[i] = v.Version
				if ref, err := r.referenced(ep, v.Version); err != nil {
					return false, err
				} else if ref {
					return false, ErrReferenced
				}
			}
			err = r.store.RemoveEndpoint(ctx, ep, names)
			if errors.Is(err, dirdb.ErrChanged) && attempt < 3 {
				continue // another process registered meanwhile; check again
			}
			return err == nil, err
		}
	})
}

func (r *Registry) referenced(endpoint, version string) (bool, error) {
	rc := r.rc.Load()
	if rc == nil {
		return false, nil
	}
	ref, err := rc.VersionReferenced(endpoint, version)
	if err != nil {
		return false, fmt.Errorf("directory: checking task references: %w", err)
	}
	return ref, nil
}

// write runs one admin change under writeMu, then, outside the lock, makes
// a committed change visible to this process's readers before returning
// (read-your-writes) and runs the OnChange callbacks, so a callback may call
// back into the Registry. A failed reload after a commit is logged, not
// returned; Watch retries it.
func (r *Registry) write(ctx context.Context, fresh *Manifest, op func() (changed bool, err error)) error {
	r.writeMu.Lock()
	changed, err := op()
	r.writeMu.Unlock()
	if err != nil {
		return mapStoreErr(err)
	}
	if !changed {
		return nil
	}
	if _, err := r.refresh(context.WithoutCancel(ctx), fresh); err != nil {
		r.log.Error("directory: reloading the index after a change failed", "err", err)
	}
	r.notify()
	return nil
}

func mapStoreErr(err error) error {
	switch {
	case errors.Is(err, dirdb.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, dirdb.ErrConflict), errors.Is(err, dirdb.ErrChanged):
		return ErrConflict
	case errors.Is(err, dirdb.ErrHashMismatch):
		return ErrHashMismatch
	case errors.Is(err, dirdb.ErrActive):
		return ErrActive
	}
	return err
}
