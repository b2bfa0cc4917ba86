package taskstest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/tasks"
)

// ToolSpec describes a tool for Manifest. Schemas are JSON text.
type ToolSpec struct {
	Name         string
	InputSchema  string // default {"type":"object"}
	OutputSchema string // "" for none
	Ext          directory.ToolExt
}

// Manifest builds a registered manifest with canonical bytes and hash, as
// the directory would hold it.
func Manifest(endpoint, version string, tools ...ToolSpec) *directory.Manifest {
	local := endpoint
	if i := strings.IndexByte(endpoint, '@'); i > 0 {
		local = endpoint[:i]
	}
	doc := map[string]any{
		"manifestSpecVersion": "0",
		"agent":               map[string]any{"jid": endpoint, "name": local, "version": version},
	}
	m := &directory.Manifest{Endpoint: endpoint, Version: version,
		Agent: directory.Agent{JID: endpoint, Name: local, Version: version}}
	var list []any
	for _, ts := range tools {
		in := ts.InputSchema
		if in == "" {
			in = `{"type":"object"}`
		}
		inCanon, inVal := mustCanon(in)
		tool := map[string]any{"name": ts.Name, "inputSchema": inVal}
		t := directory.Tool{Name: ts.Name, InputSchema: inCanon, InputHash: ijson.Hash(inCanon), Ext: ts.Ext}
		if ts.OutputSchema != "" {
			outCanon, outVal := mustCanon(ts.OutputSchema)
			tool["outputSchema"] = outVal
			t.OutputSchema, t.OutputHash = outCanon, ijson.Hash(outCanon)
		}
		ext := map[string]any{}
		if ts.Ext.ApprovalRequired {
			ext["approvalRequired"] = true
		}
		if len(ts.Ext.RequiredPermissions) > 0 {
			var ps []any
			for _, p := range ts.Ext.RequiredPermissions {
				ps = append(ps, p)
			}
			ext["requiredPermissions"] = ps
		}
		if ts.Ext.MaximumTimeoutSeconds > 0 {
			ext["maximumTimeoutSeconds"] = float64(ts.Ext.MaximumTimeoutSeconds)
		}
		if ts.Ext.DefaultTimeoutSeconds > 0 {
			ext["defaultTimeoutSeconds"] = float64(ts.Ext.DefaultTimeoutSeconds)
		}
		if len(ext) > 0 {
			tool["urn:xmpp:agent-api:0"] = ext
		}
		t.Canonical, _ = ijson.Canonical(tool)
		m.Tools = append(m.Tools, t)
		list = append(list, tool)
	}
	if list == nil {
		list = []any{}
	}
	doc["tools"] = list
	canon, err := ijson.Canonical(doc)
	if err != nil {
		panic(err)
	}
	m.Canonical, m.Hash = canon, ijson.Hash(canon)
	return m
}

func mustCanon(s string) ([]byte, any) {
	c, v, err := ijson.Canonicalize([]byte(s), ijson.Limits{})
	if err != nil {
		panic(fmt.Sprintf("taskstest: bad schema JSON: %v", err))
	}
	return c, v
}

// Directory is an in-memory directory.Reader.
type Directory struct {
	mu       sync.RWMutex
	versions map[string]map[string]*directory.Manifest
	active   map[string]string
}

var _ directory.Reader = (*Directory)(nil)

// NewDirectory returns an empty directory.
func NewDirectory() *Directory {
	return &Directory{versions: map[string]map[string]*directory.Manifest{}, active: map[string]string{}}
}

// Add registers m and, if activate, makes it the endpoint's active version.
func (d *Directory) Add(m *directory.Manifest, activate bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.versions[m.Endpoint] == nil {
		d.versions[m.Endpoint] = map[string]*directory.Manifest{}
	}
	d.versions[m.Endpoint][m.Version] = m
	if activate {
		d.active[m.Endpoint] = m.Version
	}
}

// Activate sets the active version ("" deactivates).
func (d *Directory) Activate(endpoint, version string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if version == "" {
		delete(d.active, endpoint)
		return
	}
	d.active[endpoint] = version
}

// Remove forgets a version.
func (d *Directory) Remove(endpoint, version string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.versions[endpoint], version)
	if d.active[endpoint] == version {
		delete(d.active, endpoint)
	}
}

func (d *Directory) Manifest(endpoint, version string) (*directory.Manifest, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	m, ok := d.versions[endpoint][version]
	return m, ok
}

func (d *Directory) Active(endpoint string) (*directory.Manifest, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	v, ok := d.active[endpoint]
	if !ok {
		return nil, false
	}
	m, ok := d.versions[endpoint][v]
	return m, ok
}

func (d *Directory) Exists(endpoint string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.versions[endpoint]) > 0
}

func (d *Directory) List(visible func(string) bool, q directory.PageQuery) directory.Page {
	return directory.Page{}
}

func (d *Directory) Search(visible func(string) bool, nick string, q directory.PageQuery) directory.Page {
	return directory.Page{}
}

// Policy is a tasks.Authorizer over an explicit allow list of
// (principal, endpoint) pairs; "*" as endpoint allows every endpoint.
type Policy struct {
	mu    sync.RWMutex
	allow map[[2]string]bool
}

// NewPolicy allows principal on each "principal endpoint" pair given.
func NewPolicy(pairs ...[2]string) *Policy {
	p := &Policy{allow: map[[2]string]bool{}}
	for _, pr := range pairs {
		p.allow[pr] = true
	}
	return p
}

// Allow grants principal invocation of endpoint.
func (p *Policy) Allow(principal, endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allow[[2]string{principal, endpoint}] = true
}

// Revoke withdraws a grant.
func (p *Policy) Revoke(principal, endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.allow, [2]string{principal, endpoint})
}

func (p *Policy) CanInvoke(principal, endpoint string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.allow[[2]string{principal, endpoint}] || p.allow[[2]string{principal, "*"}]
}

// Approvals is a tasks.ApprovalPolicy over explicit grants.
type Approvals struct {
	mu       sync.RWMutex
	approved map[[3]string]bool
	perms    map[[2]string]bool
}

// NewApprovals returns an approval policy that grants nothing.
func NewApprovals() *Approvals {
	return &Approvals{approved: map[[3]string]bool{}, perms: map[[2]string]bool{}}
}

// Approve grants approval of one tool to principal.
func (a *Approvals) Approve(principal, endpoint, tool string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.approved[[3]string{principal, endpoint, tool}] = true
}

// Grant gives principal a permission.
func (a *Approvals) Grant(principal, perm string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.perms[[2]string{principal, perm}] = true
}

func (a *Approvals) Approved(principal, endpoint, tool string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.approved[[3]string{principal, endpoint, tool}]
}

func (a *Approvals) HasPermission(principal, perm string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.perms[[2]string{principal, perm}]
}

// Recorder is a tasks.Notifier that keeps every event and lets tests wait
// for one.
type Recorder struct {
	mu     sync.Mutex
	events []tasks.Event
	wake   chan struct{}
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{wake: make(chan struct{})} }

func (r *Recorder) Notify(ev tasks.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
}

// Events returns the events of a task ("" for all) in notification order.
func (r *Recorder) Events(taskID string) []tasks.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []tasks.Event
	for _, ev := range r.events {
		if taskID == "" || ev.TaskID == taskID {
			out = append(out, ev)
		}
	}
	return out
}

// Wait blocks until the task has an event of type typ (any type for "")
// and returns the first such event.
func (r *Recorder) Wait(ctx context.Context, taskID string, typ agentproto.EventType) (tasks.Event, error) {
	for {
		r.mu.Lock()
		for _, ev := range r.events {
			if ev.TaskID == taskID && (typ == "" || ev.Type == typ) {
				r.mu.Unlock()
				return ev, nil
			}
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return tasks.Event{}, fmt.Errorf("taskstest: no %q event for %s: %w", typ, taskID, ctx.Err())
		}
	}
}

// WaitRevision blocks until the task has an event at revision rev.
func (r *Recorder) WaitRevision(ctx context.Context, taskID string, rev int64) (tasks.Event, error) {
	for {
		r.mu.Lock()
		for _, ev := range r.events {
			if ev.TaskID == taskID && ev.Revision == rev {
				r.mu.Unlock()
				return ev, nil
			}
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return tasks.Event{}, fmt.Errorf("taskstest: no revision %d for %s: %w", rev, taskID, ctx.Err())
		}
	}
}

// Terminal waits for the task's terminal event.
func (r *Recorder) Terminal(ctx context.Context, taskID string) (tasks.Event, error) {
	for {
		r.mu.Lock()
		for _, ev := range r.events {
			if ev.TaskID == taskID && (ev.Type == agentproto.EventCompleted || ev.Type == agentproto.EventFailed || ev.Type == agentproto.EventCancelled) {
				r.mu.Unlock()
				return ev, nil
			}
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return tasks.Event{}, fmt.Errorf("taskstest: %s not settled: %w", taskID, ctx.Err())
		}
	}
}

// Field decodes one top-level member of a payload, for assertions.
func Field(payload []byte, name string) any {
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil
	}
	return m[name]
}
