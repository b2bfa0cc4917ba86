package dirxmpp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// realRouter wires the handlers to the real SQLite-backed Registry.
func realRouter(tb testing.TB) (*component.Router, *directory.Registry) {
	tb.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "agentgw.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	reg, err := directory.NewRegistry(ctx, sqlite.NewDirectory(db), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return routerOn(reg), reg
}

func routerOn(reg *directory.Registry) *component.Router {
	pol := testPolicy()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := component.NewRouter(jid.MustParse(domain), NewResolver(reg, pol), log)
	Register(r, Deps{
		GatewayName: "Example Agent Gateway", Reader: reg, Admin: reg, Policy: pol,
		TaskFeatures: taskFeatures, ReplaySeconds: 3600, Log: log,
	})
	return r
}

func dispatch(tb testing.TB, r *component.Router, typ, from, to, p string) *xmltree.Element {
	tb.Helper()
	return r.DispatchIQ(context.Background(), iq(tb, typ, from, to, p))
}

func registerIQ(manifest string) string {
	return `<register xmlns='urn:xmpp:agent-api:0'><manifest media-type='application/json'>` +
		strings.NewReplacer("&", "&amp;", "<", "&lt;").Replace(manifest) + `</manifest></register>`
}

func activateIQ(ep, version, hash string) string {
	return fmt.Sprintf(`<activate xmlns='urn:xmpp:agent-api:0' jid='%s' version='%s'><hash xmlns='urn:xmpp:hashes:2' algo='sha-256'>%s</hash></activate>`, ep, version, hash)
}

// TestWithRegistry drives the handlers over the real Registry: admin IQs
// register and activate, discovery and retrieval answer from what was
// committed, and the registry's canonical bytes match the spec vectors.
func TestWithRegistry(t *testing.T) {
	r, _ := realRouter(t)

	reply := dispatch(t, r, "set", adminUser, domain, registerIQ(toollessManifest))
	if reg := payload(t, reply); reg.Child(ns.Hashes, "hash").Text != toollessHash {
		t.Fatalf("tool-less registration = %s", reply)
	}
	reply = dispatch(t, r, "set", adminUser, domain, registerIQ(strings.Replace(toollessManifest, `"tools":[]`, `"tools":[],"extra":1`, 1)))
	if c := condition(reply); c != "not-acceptable" || strings.Contains(reply.String(), "extra") {
		t.Fatalf("unknown member: %s", reply)
	}
	if c := condition(dispatch(t, r, "set", adminUser, domain, registerIQ(`{"manifestSpecVersion":`))); c != "bad-request" {
		t.Fatalf("malformed JSON: %s", c)
	}

	// The full weather manifest conflicts with the tool-less one at 1.4.0;
	// register it as 1.5.0 instead.
	w15 := strings.Replace(weatherManifest, `"version": "1.4.0"`, `"version": "1.5.0"`, 1)
	if c := condition(dispatch(t, r, "set", adminUser, domain, registerIQ(weatherManifest))); c != "conflict" {
		t.Fatalf("different content for 1.4.0: %s", c)
	}
	want := buildManifest(t, w15)
	reg := payload(t, dispatch(t, r, "set", adminUser, domain, registerIQ(w15)))
	if reg.Child(ns.Hashes, "hash").Text != want.Hash {
		t.Fatalf("registry hash %s, fixture hash %s", reg.Child(ns.Hashes, "hash").Text, want.Hash)
	}
	if c := condition(dispatch(t, r, "set", adminUser, domain, activateIQ(epJID("weather"), "1.5.0", toollessHash))); c != "conflict" {
		t.Fatalf("activate with another version's hash: %s", c)
	}
	if c := condition(dispatch(t, r, "set", adminUser, domain, activateIQ(epJID("weather"), "1.5.0", want.Hash))); c != "" {
		t.Fatalf("activate: %s", c)
	}
	strasse := `{"manifestSpecVersion":"0","agent":{"jid":"street@agents.example","name":"street","title":"Straße Agent","version":"1"},"tools":[]}`
	for _, m := range []string{calendarManifest, strasse} {
		reg := payload(t, dispatch(t, r, "set", adminUser, domain, registerIQ(m)))
		dispatch(t, r, "set", adminUser, domain, activateIQ(reg.AttrValue("jid"), reg.AttrValue("version"), reg.Child(ns.Hashes, "hash").Text))
	}

	info := payload(t, dispatch(t, r, "get", juliet, epJID("weather"), discoInfo))
	if f := formValues(info); f["version"][0] != "1.5.0" || f["manifest_hash_value"][0] != want.Hash || f["request_replay_seconds"][0] != "3600" || f["cold_start_supported"][0] != "0" {
		t.Fatalf("endpoint form = %v", f)
	}
	m := payload(t, dispatch(t, r, "get", juliet, epJID("weather"), `<manifest-request xmlns='urn:xmpp:agent-api:0'/>`))
	if m.Child(ns.API, "json").Text != string(want.Canonical) {
		t.Fatalf("registry canonical bytes differ from the fixture's")
	}
	old := payload(t, dispatch(t, r, "get", juliet, epJID("weather"), `<manifest-request xmlns='urn:xmpp:agent-api:0' version='1.4.0'/>`))
	if old.Child(ns.API, "json").Text != toollessManifest {
		t.Fatalf("pinned 1.4.0 = %s", old)
	}
	s := payload(t, dispatch(t, r, "get", juliet, epJID("weather"), schemaReq("forecast.get", "1.5.0", "input", want.Hash)))
	if s.Child(ns.API, "schema-hash").Child(ns.Hashes, "hash").Text != "XxGP62PwgOW9NLxx8ysunvuijMhSd0y4j1SSRTAbt7c=" {
		t.Fatalf("schema = %s", s)
	}
	ti := formValues(payload(t, dispatch(t, r, "get", juliet, epJID("weather"), infoNode(directory.ToolNode("1.5.0", "forecast.get")))))
	if ti["read_only"][0] != "1" || ti["open_world"][0] != "1" || ti["output_schema_hash_value"][0] != want.Tools[0].OutputHash {
		t.Fatalf("tool info = %v", ti)
	}

	// Directory: ordered, visible only, counted.
	q := payload(t, dispatch(t, r, "get", juliet, domain, itemsNode(ns.Directory, rsmSet(`<max>2</max>`))))
	var jids []string
	for _, it := range q.ChildrenNamed(ns.DiscoItems, "item") {
		jids = append(jids, it.AttrValue("jid"))
	}
	if !slices.Equal(jids, []string{epJID("calendar"), epJID("street")}) || q.Child(ns.RSM, "set").Child(ns.RSM, "count").Text != "3" {
		t.Fatalf("directory page = %s", q)
	}
	// Search folding is the registry's: full Unicode case folding.
	for nick, want := range map[string][]string{
		"WEATHER": {epJID("weather")},
		"STRASSE": {epJID("street")},
		"straße":  {epJID("street")},
		"agent":   {epJID("calendar"), epJID("street"), epJID("weather")},
	} {
		got, _ := searchResults(t, payload(t, dispatch(t, r, "set", juliet, domain, searchSubmit(nick, ""))))
		if !slices.Equal(got, want) {
			t.Errorf("search %q = %v, want %v", nick, got, want)
		}
	}
	if got, res := searchResults(t, payload(t, dispatch(t, r, "set", romeo, domain, searchSubmit("", "")))); len(got) != 0 || res.Count != 0 {
		t.Errorf("remote search = %v %+v", got, res)
	}

	// Hidden and nonexistent stay byte-identical over the real registry.
	a := dispatch(t, r, "get", romeo, epJID("weather"), `<manifest-request xmlns='urn:xmpp:agent-api:0'/>`).String()
	b := dispatch(t, r, "get", romeo, epJID("nobody"), `<manifest-request xmlns='urn:xmpp:agent-api:0'/>`).String()
	if strings.Replace(a, "weather@", "nobody@", 1) != b {
		t.Fatalf("hidden %s vs nonexistent %s", a, b)
	}

	// Removal rules.
	if c := condition(dispatch(t, r, "set", adminUser, domain, `<remove-version xmlns='urn:xmpp:agent-api:0' jid='weather@agents.example' version='1.5.0'/>`)); c != "conflict" {
		t.Fatalf("remove active version: %s", c)
	}
	if c := condition(dispatch(t, r, "set", adminUser, domain, `<remove-version xmlns='urn:xmpp:agent-api:0' jid='weather@agents.example' version='1.4.0'/>`)); c != "" {
		t.Fatalf("remove inactive version: %s", c)
	}
	// The tombstone refuses different content under the removed version.
	if c := condition(dispatch(t, r, "set", adminUser, domain, registerIQ(weatherManifest))); c != "conflict" {
		t.Fatalf("tombstoned version: %s", c)
	}
	st := payload(t, dispatch(t, r, "get", adminUser, domain, `<registration-status xmlns='urn:xmpp:agent-api:0' jid='weather@agents.example'/>`))
	if vs := st.ChildrenNamed(ns.API, "version"); len(vs) != 1 || vs[0].AttrValue("id") != "1.5.0" || vs[0].AttrValue("active") != "true" {
		t.Fatalf("status = %s", st)
	}
}

// BenchmarkDirectoryPage50Of10000 measures one directory page of 50 out
// of 10,000 visible endpoints through the handler and the real Registry,
// with the real grant table installed and without any grant source.
// Count covers every page, so the policy is consulted for every endpoint.
func BenchmarkDirectoryPage50Of10000(b *testing.B) {
	reg := populate(b, 10000)
	noGrants := federation.New([]string{"example.net"}, nil, nil)
	for _, bc := range []struct {
		name string
		pol  *federation.Policy
	}{{"grant-table", testPolicy()}, {"no-grant-source", noGrants}} {
		b.Run(bc.name, func(b *testing.B) {
			r := component.NewRouter(jid.MustParse(domain), NewResolver(reg, bc.pol), nil)
			Register(r, Deps{Reader: reg, Policy: bc.pol})
			in := iq(b, "get", juliet, domain, itemsNode(ns.Directory, rsmSet(`<max>50</max><after>e05000@agents.example</after>`)))
			ctx := context.Background()
			if got := len(r.DispatchIQ(ctx, in).Children[0].ChildrenNamed(ns.DiscoItems, "item")); got != 50 {
				b.Fatalf("page has %d items", got)
			}
			b.ResetTimer()
			for b.Loop() {
				r.DispatchIQ(ctx, in)
			}
		})
	}
}

// BenchmarkEndpointInfo measures node-less disco#info at an endpoint.
func BenchmarkEndpointInfo(b *testing.B) {
	r, reg := realRouter(b)
	ctx := context.Background()
	m, err := reg.Register(ctx, []byte(weatherManifest))
	if err != nil {
		b.Fatal(err)
	}
	if err := reg.Activate(ctx, m.Endpoint, m.Version, m.Hash); err != nil {
		b.Fatal(err)
	}
	in := iq(b, "get", juliet, epJID("weather"), discoInfo)
	if condition(r.DispatchIQ(ctx, in)) != "" {
		b.Fatal("endpoint info failed")
	}
	b.ResetTimer()
	for b.Loop() {
		r.DispatchIQ(ctx, in)
	}
}

// populate stores n active endpoints through the directory store and then
// loads them into a fresh Registry once; registering through the Registry
// would rebuild its index after every write.
func populate(b *testing.B, n int) *directory.Registry {
	b.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "agentgw.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	st := sqlite.NewDirectory(db)
	for i := range n {
		raw := fmt.Sprintf(`{"manifestSpecVersion":"0","agent":{"jid":"e%05d@agents.example","name":"e%05d","title":"Agent %d","version":"1"},"tools":[]}`, i, i, i)
		m := buildManifest(b, raw)
		if _, err := st.Register(ctx, m.Endpoint, m.Version, m.Hash, m.Canonical); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Activate(ctx, m.Endpoint, m.Version, m.Hash); err != nil {
			b.Fatal(err)
		}
	}
	reg, err := directory.NewRegistry(ctx, sqlite.NewDirectory(db), nil)
	if err != nil {
		b.Fatal(err)
	}
	return reg
}
