package dirxmpp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/testkit/goldentest"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// The spec's example manifest (Endpoint Registration, Manifest Model).
const weatherManifest = `{
  "manifestSpecVersion": "0",
  "agent": {
    "jid": "weather@agents.example",
    "name": "weather",
    "title": "Weather Agent",
    "description": "Provides weather forecasts.",
    "version": "1.4.0",
    "vendor": "Example"
  },
  "implementation": {"name":"example-weather","version":"3.2.1"},
  "mcpProtocolVersion": "2025-11-25",
  "tools": [{
    "name": "forecast.get",
    "title": "Get Forecast",
    "description": "Gets a forecast for one city.",
    "inputSchema": {
      "type": "object",
      "properties": { "city": { "type": "string" } },
      "required": ["city"],
      "additionalProperties": false
    },
    "outputSchema": {
      "type": "object",
      "properties": { "summary": { "type": "string" } },
      "required": ["summary"]
    },
    "annotations": {
      "readOnlyHint": true,
      "destructiveHint": false,
      "idempotentHint": true,
      "openWorldHint": true
    },
    "execution": {"taskSupport":"optional"},
    "urn:xmpp:agent-api:0": {
      "supportsProgress": true,
      "supportsCancellation": true,
      "defaultTimeoutSeconds": 30,
      "maximumTimeoutSeconds": 120,
      "requiredPermissions": ["weather.read"],
      "approvalRequired": false,
      "tags": ["weather", "forecast"]
    }
  }]
}`

// The spec's hash vector: the tool-less weather manifest.
const toollessManifest = `{"agent":{"jid":"weather@agents.example","name":"weather","version":"1.4.0"},"manifestSpecVersion":"0","tools":[]}`

const toollessHash = "K2/YdwvIBAlfUIeZHiNCyiYA4m4W2wrEOqXQDoQyXp4="

const calendarManifest = `{"manifestSpecVersion":"0","agent":{"jid":"calendar@agents.example","name":"calendar","title":"Calendar Agent","version":"2.0"},"tools":[]}`

// notes has tools whose hints are partly or wholly absent, several tools to
// page over, a vCard-worthy profile, and a multi-line description.
const notesManifest = `{"manifestSpecVersion":"0","agent":{"jid":"notes@agents.example","name":"notes",
 "description":"Keeps notes.\nSecond line.","version":"7","homepage":"https://notes.example/","avatarUrl":"https://notes.example/a.png"},
 "tools":[
  {"name":"zeta","inputSchema":{"type":"object"}},
  {"name":"alpha","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false},
   "urn:xmpp:agent-api:0":{"supportsProgress":true,"supportsInput":true}},
  {"name":"Beta","title":"Beta Tool","inputSchema":{"type":"object"}},
  {"name":"é","inputSchema":{"type":"object"}},
  {"name":"mid","inputSchema":{"type":"object"}}
 ]}`

// canonical is RFC 8785 for the fixtures above: ASCII keys, small
// integers and plain strings, where sorted encoding/json output coincides.
func canonical(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// buildManifest turns manifest JSON into the directory's model, as the
// registry would.
func buildManifest(t testing.TB, raw string) *directory.Manifest {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	canon := canonical(t, doc)
	agent := doc["agent"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	m := &directory.Manifest{
		Endpoint:  str(agent, "jid"),
		Version:   str(agent, "version"),
		Canonical: canon,
		Hash:      hashOf(canon),
		Agent: directory.Agent{
			JID: str(agent, "jid"), Name: str(agent, "name"), Title: str(agent, "title"),
			Description: str(agent, "description"), Version: str(agent, "version"),
			Vendor: str(agent, "vendor"), Homepage: str(agent, "homepage"), AvatarURL: str(agent, "avatarUrl"),
		},
	}
	for _, raw := range doc["tools"].([]any) {
		tm := raw.(map[string]any)
		tool := directory.Tool{Name: str(tm, "name"), Title: str(tm, "title"), Description: str(tm, "description")}
		tool.InputSchema = canonical(t, tm["inputSchema"])
		tool.InputHash = hashOf(tool.InputSchema)
		if os, ok := tm["outputSchema"]; ok {
			tool.OutputSchema = canonical(t, os)
			tool.OutputHash = hashOf(tool.OutputSchema)
		}
		if an, ok := tm["annotations"].(map[string]any); ok {
			hint := func(k string) *bool {
				if b, ok := an[k].(bool); ok {
					return &b
				}
				return nil
			}
			tool.Annotations = directory.Annotations{
				ReadOnly: hint("readOnlyHint"), Destructive: hint("destructiveHint"),
				Idempotent: hint("idempotentHint"), OpenWorld: hint("openWorldHint"),
			}
		}
		if ext, ok := tm[ns.API].(map[string]any); ok {
			tool.Ext.SupportsProgress, _ = ext["supportsProgress"].(bool)
			tool.Ext.SupportsCancellation, _ = ext["supportsCancellation"].(bool)
			tool.Ext.SupportsInput, _ = ext["supportsInput"].(bool)
		}
		tool.Canonical = canonical(t, tm)
		m.Tools = append(m.Tools, tool)
	}
	return m
}

// fakeDir is an in-memory directory.Reader and directory.Admin.
type fakeDir struct {
	t        testing.TB
	mu       sync.Mutex
	versions map[string]map[string]*directory.Manifest
	active   map[string]string
}

var (
	_ directory.Reader = (*fakeDir)(nil)
	_ directory.Admin  = (*fakeDir)(nil)
)

func newFakeDir(t testing.TB, manifests ...string) *fakeDir {
	d := &fakeDir{t: t, versions: map[string]map[string]*directory.Manifest{}, active: map[string]string{}}
	for _, raw := range manifests {
		m := d.add(buildManifest(t, raw))
		d.active[m.Endpoint] = m.Version
	}
	return d
}

func (d *fakeDir) add(m *directory.Manifest) *directory.Manifest {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.versions[m.Endpoint] == nil {
		d.versions[m.Endpoint] = map[string]*directory.Manifest{}
	}
	d.versions[m.Endpoint][m.Version] = m
	return m
}

func (d *fakeDir) Manifest(ep, v string) (*directory.Manifest, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.versions[ep][v]
	return m, ok
}

func (d *fakeDir) Active(ep string) (*directory.Manifest, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.active[ep]
	if !ok {
		return nil, false
	}
	return d.versions[ep][v], true
}

func (d *fakeDir) Exists(ep string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.versions[ep]) > 0
}

func (d *fakeDir) List(visible func(string) bool, q directory.PageQuery) directory.Page {
	return d.page(visible, func(*directory.Manifest) bool { return true }, q)
}

func (d *fakeDir) Search(visible func(string) bool, nick string, q directory.PageQuery) directory.Page {
	n := strings.ToLower(nick)
	return d.page(visible, func(m *directory.Manifest) bool {
		local, _, _ := strings.Cut(m.Endpoint, "@")
		for _, s := range []string{local, m.Agent.Name, m.Agent.Title} {
			if strings.Contains(strings.ToLower(s), n) {
				return true
			}
		}
		return false
	}, q)
}

func (d *fakeDir) page(visible func(string) bool, match func(*directory.Manifest) bool, q directory.PageQuery) directory.Page {
	d.mu.Lock()
	var eps []string
	ms := map[string]*directory.Manifest{}
	for ep, v := range d.active {
		m := d.versions[ep][v]
		if visible(ep) && match(m) {
			eps = append(eps, ep)
			ms[ep] = m
		}
	}
	d.mu.Unlock()
	sort.Strings(eps)
	max := q.Max
	if max <= 0 {
		max = 50
	}
	lo, hi := 0, 0
	switch {
	case q.Index >= 0:
		lo = min(q.Index, len(eps))
		hi = min(lo+max, len(eps))
	case q.HasBefore:
		hi = len(eps)
		if q.Before != "" {
			hi = sort.SearchStrings(eps, q.Before)
		}
		lo = max0(hi - max)
	case q.After != "":
		lo = sort.Search(len(eps), func(i int) bool { return eps[i] > q.After })
		hi = min(lo+max, len(eps))
	default:
		hi = min(max, len(eps))
	}
	p := directory.Page{Count: len(eps), FirstIndex: lo}
	for _, ep := range eps[lo:hi] {
		p.Items = append(p.Items, directory.Entry{JID: ep, Name: ms[ep].DisplayName()})
	}
	if len(p.Items) > 0 {
		p.First, p.Last = p.Items[0].JID, p.Items[len(p.Items)-1].JID
	}
	return p
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

func (d *fakeDir) Register(_ context.Context, raw []byte) (*directory.Manifest, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, &directory.ValidationError{Reason: "not JSON"}
	}
	if doc["manifestSpecVersion"] != "0" {
		return nil, &directory.ValidationError{Reason: "/manifestSpecVersion: unsupported"}
	}
	if len(raw) > 1<<20 {
		return nil, directory.ErrTooLarge
	}
	m := buildManifest(d.t, string(raw))
	if old, ok := d.Manifest(m.Endpoint, m.Version); ok {
		if old.Hash != m.Hash {
			return nil, directory.ErrConflict
		}
		return old, nil
	}
	return d.add(m), nil
}

func (d *fakeDir) Activate(_ context.Context, ep, v, hash string) error {
	m, ok := d.Manifest(ep, v)
	if !ok {
		return directory.ErrNotFound
	}
	if m.Hash != hash {
		return directory.ErrHashMismatch
	}
	d.mu.Lock()
	d.active[ep] = v
	d.mu.Unlock()
	return nil
}

func (d *fakeDir) Deactivate(_ context.Context, ep string) error {
	if !d.Exists(ep) {
		return directory.ErrNotFound
	}
	d.mu.Lock()
	delete(d.active, ep)
	d.mu.Unlock()
	return nil
}

func (d *fakeDir) Status(_ context.Context, ep string) (*directory.Status, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	vs := d.versions[ep]
	if len(vs) == 0 {
		return nil, directory.ErrNotFound
	}
	st := &directory.Status{Endpoint: ep, Active: d.active[ep]}
	for v, m := range vs {
		st.Versions = append(st.Versions, directory.VersionStatus{Version: v, Hash: m.Hash, Active: v == st.Active, Removable: v != st.Active})
	}
	slices.SortFunc(st.Versions, func(a, b directory.VersionStatus) int { return strings.Compare(a.Version, b.Version) })
	return st, nil
}

func (d *fakeDir) RemoveVersion(_ context.Context, ep, v string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.versions[ep][v]; !ok {
		return directory.ErrNotFound
	}
	if d.active[ep] == v {
		return directory.ErrActive
	}
	delete(d.versions[ep], v)
	return nil
}

func (d *fakeDir) RemoveEndpoint(_ context.Context, ep string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.versions[ep]) == 0 {
		return directory.ErrNotFound
	}
	delete(d.versions, ep)
	delete(d.active, ep)
	return nil
}

// memGrants is an in-memory federation.GrantStore, so the tests use the
// real GrantTable that the gateway installs.
type memGrants []federation.Grant

func (m memGrants) Grant(context.Context, federation.Grant) error { return nil }
func (m memGrants) Revoke(context.Context, string, string, federation.Scope) (bool, error) {
	return false, nil
}
func (m memGrants) List(context.Context) ([]federation.Grant, error) { return m, nil }
func (m memGrants) Generation(context.Context) (int64, error)        { return 1, nil }

const (
	domain    = "agents.example"
	juliet    = "juliet@example.net/phone"
	adminUser = "admin@example.net/console"
	romeo     = "romeo@partner.example/pda" // remote, no grants
	mercutio  = "mercutio@friend.example/x" // remote, granted visibility of weather
)

func testPolicy() *federation.Policy {
	p := federation.New([]string{"example.net"}, []string{"admin@example.net"}, map[string]federation.EndpointRule{
		"secret@agents.example": {VisibleTo: []string{"boss@example.net"}},
	})
	table, err := federation.NewGrantTable(context.Background(), memGrants{
		{Principal: "mercutio@friend.example", Endpoint: "weather@agents.example", Scope: federation.ScopeVisibility},
	})
	if err != nil {
		panic(err)
	}
	p.SetGrants(table)
	return p
}

// taskFeatures is what a task layer with progress and cancellation but no
// input support would report.
func taskFeatures(string) []string { return []string{ns.Task, ns.TaskProgress, ns.TaskCancel} }

// fakeSender records sent stanzas.
type fakeSender struct{ goldentest.Sender }

// take returns the stanzas sent since the last take, as strings.
func (s *fakeSender) take() []string {
	var out []string
	for _, el := range s.Take() {
		out = append(out, el.String())
	}
	return out
}

type harness struct {
	dir      *fakeDir
	router   *component.Router
	presence *Presence
	sender   *fakeSender
}

func newHarness(t testing.TB, dir *fakeDir) *harness {
	t.Helper()
	pol := testPolicy()
	dom := jid.MustParse(domain)
	r := component.NewRouter(dom, NewResolver(dir, pol), slog.New(slog.NewTextHandler(io.Discard, nil)))
	s := &fakeSender{}
	p := Register(r, Deps{
		Domain:        dom,
		GatewayName:   "Example Agent Gateway",
		Reader:        dir,
		Admin:         dir,
		Policy:        pol,
		TaskFeatures:  taskFeatures,
		ReplaySeconds: 86400,
		ColdStart:     func(string) bool { return true },
		Sender:        s,
		Log:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return &harness{dir: dir, router: r, presence: p, sender: s}
}

// iq builds an inbound IQ with payload parsed from XML.
func iq(t testing.TB, typ, from, to, payload string) component.IQ {
	t.Helper()
	p, err := xmltree.Parse([]byte(payload), xmltree.Limits{})
	if err != nil {
		t.Fatalf("payload: %v", err)
	}
	return component.IQ{ID: "q1", Type: typ, From: jid.MustParse(from), To: jid.MustParse(to), Payload: p}
}

func (h *harness) do(t testing.TB, typ, from, to, payload string) *xmltree.Element {
	t.Helper()
	return h.router.DispatchIQ(context.Background(), iq(t, typ, from, to, payload))
}

// condition returns the error condition of a reply, or "" for a result.
func condition(reply *xmltree.Element) string {
	if reply.AttrValue("type") != "error" {
		return ""
	}
	e := reply.Child(component.NSComponent, "error")
	for _, c := range e.Children {
		if c.Name.Space == ns.Stanzas && c.Name.Local != "text" {
			return c.Name.Local
		}
	}
	return "?"
}

func payload(t testing.TB, reply *xmltree.Element) *xmltree.Element {
	t.Helper()
	if reply.AttrValue("type") != "result" {
		t.Fatalf("reply is not a result: %s", reply)
	}
	if len(reply.Children) == 0 {
		return nil
	}
	return reply.Children[0]
}

// formValues maps the fields of the first data form under el.
func formValues(el *xmltree.Element) map[string][]string {
	x := el.Child(ns.Data, "x")
	out := map[string][]string{}
	for _, f := range x.ChildrenNamed(ns.Data, "field") {
		var vs []string
		for _, v := range f.ChildrenNamed(ns.Data, "value") {
			vs = append(vs, v.Text)
		}
		out[f.AttrValue("var")] = vs
	}
	return out
}

func featureVars(q *xmltree.Element) []string {
	var out []string
	for _, f := range q.ChildrenNamed(ns.DiscoInfo, "feature") {
		out = append(out, f.AttrValue("var"))
	}
	return out
}

func mustContain(t testing.TB, what string, list []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(list, w) {
			t.Errorf("%s %v lacks %q", what, list, w)
		}
	}
}

func mustLack(t testing.TB, what string, list []string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if slices.Contains(list, w) {
			t.Errorf("%s %v has %q", what, list, w)
		}
	}
}

func epJID(local string) string { return fmt.Sprintf("%s@%s", local, domain) }

// newRouterWithout registers the directory without an Admin.
func newRouterWithout(t testing.TB, dir *fakeDir) *component.Router {
	t.Helper()
	pol := testPolicy()
	dom := jid.MustParse(domain)
	r := component.NewRouter(dom, NewResolver(dir, pol), slog.New(slog.NewTextHandler(io.Discard, nil)))
	Register(r, Deps{Reader: dir, Policy: pol, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return r
}

func presence(t testing.TB, typ, from, to string) component.Presence {
	t.Helper()
	return component.Presence{Type: typ, From: jid.MustParse(from), To: jid.MustParse(to)}
}
