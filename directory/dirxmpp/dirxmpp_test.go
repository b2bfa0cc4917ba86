package dirxmpp

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/xep/rsm"
	"github.com/agentgw/agentgw/xep/xmltree"
)

const (
	discoInfo  = `<query xmlns='http://jabber.org/protocol/disco#info'/>`
	discoItems = `<query xmlns='http://jabber.org/protocol/disco#items'/>`
)

func infoNode(node string) string {
	return `<query xmlns='http://jabber.org/protocol/disco#info' node='` + node + `'/>`
}

func itemsNode(node, set string) string {
	return `<query xmlns='http://jabber.org/protocol/disco#items' node='` + node + `'>` + set + `</query>`
}

func rsmSet(inner string) string {
	return `<set xmlns='http://jabber.org/protocol/rsm'>` + inner + `</set>`
}

func TestSpecVectors(t *testing.T) {
	if h := buildManifest(t, toollessManifest).Hash; h != toollessHash {
		t.Fatalf("tool-less manifest hash = %s", h)
	}
	w := buildManifest(t, weatherManifest)
	if w.Tools[0].InputHash != "XxGP62PwgOW9NLxx8ysunvuijMhSd0y4j1SSRTAbt7c=" {
		t.Fatalf("input schema hash = %s", w.Tools[0].InputHash)
	}
	if n := directory.ToolNode("1.4.0", "forecast.get"); n != "urn:xmpp:agent-tool:0#1.4.0#Zm9yZWNhc3QuZ2V0" {
		t.Fatalf("tool node = %s", n)
	}
}

func TestGatewayInfo(t *testing.T) {
	h := newHarness(t, newFakeDir(t, weatherManifest))
	q := payload(t, h.do(t, "get", juliet, domain, discoInfo))
	id := q.Child(ns.DiscoInfo, "identity")
	if id.AttrValue("category") != "automation" || id.AttrValue("type") != "agent-gateway" || id.AttrValue("name") != "Example Agent Gateway" {
		t.Fatalf("identity = %s", id)
	}
	f := featureVars(q)
	mustContain(t, "gateway features", f, ns.DiscoInfo, ns.DiscoItems, ns.Search, ns.Data, ns.Directory, ns.Ping, ns.RSM)
	mustLack(t, "non-admin gateway features", f, ns.APIAdmin, ns.APISelfRegister)
	mustContain(t, "admin gateway features", featureVars(payload(t, h.do(t, "get", adminUser, domain, discoInfo))), ns.APIAdmin)

	q = payload(t, h.do(t, "get", romeo, domain, infoNode(ns.Directory)))
	if q.AttrValue("node") != ns.Directory || q.Child(ns.DiscoInfo, "identity").AttrValue("type") != "agent-directory" {
		t.Fatalf("directory node info = %s", q)
	}
	mustContain(t, "directory node features", featureVars(q), ns.DiscoInfo, ns.DiscoItems)

	if c := condition(h.do(t, "get", juliet, domain, infoNode("urn:other"))); c != "item-not-found" {
		t.Fatalf("unknown gateway node: %s", c)
	}
	if c := condition(h.do(t, "set", juliet, domain, discoInfo)); c != "bad-request" {
		t.Fatalf("disco#info set: %s", c)
	}
}

// fiveEndpoints returns manifests for a0 … a4 plus a hidden one.
func fiveEndpoints() []string {
	var out []string
	for _, l := range []string{"a3", "a0", "a4", "a2", "a1", "secret"} {
		out = append(out, fmt.Sprintf(`{"manifestSpecVersion":"0","agent":{"jid":"%s","name":"%s","title":"Agent %s","version":"1"},"tools":[]}`, epJID(l), l, strings.ToUpper(l)))
	}
	return out
}

type pageResult struct {
	items []string
	set   rsm.Result
}

func listPage(t *testing.T, h *harness, from, set string) pageResult {
	t.Helper()
	q := payload(t, h.do(t, "get", from, domain, itemsNode(ns.Directory, set)))
	var pr pageResult
	for _, it := range q.ChildrenNamed(ns.DiscoItems, "item") {
		if _, has := it.LookupAttr("node"); has {
			t.Fatalf("directory item has a node: %s", it)
		}
		pr.items = append(pr.items, it.AttrValue("jid"))
	}
	var err error
	if pr.set, err = rsm.ParseResult(q.Child(ns.RSM, "set")); err != nil {
		t.Fatal(err)
	}
	return pr
}

func TestDirectoryPaging(t *testing.T) {
	h := newHarness(t, newFakeDir(t, fiveEndpoints()...))
	want := []string{epJID("a0"), epJID("a1"), epJID("a2"), epJID("a3"), epJID("a4")}

	var seen []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		set := `<max>2</max>`
		if after != "" {
			set += `<after>` + after + `</after>`
		}
		p := listPage(t, h, juliet, rsmSet(set))
		if p.set.Count != 5 {
			t.Fatalf("count = %d, want 5 (the hidden endpoint must not count)", p.set.Count)
		}
		if len(p.items) == 0 {
			if p.set.First != "" || p.set.Last != "" {
				t.Fatalf("empty page carries first/last: %+v", p.set)
			}
			break
		}
		if p.set.First != p.items[0] || p.set.Last != p.items[len(p.items)-1] || p.set.FirstIndex != len(seen) {
			t.Fatalf("page %v has set %+v", p.items, p.set)
		}
		seen = append(seen, p.items...)
		after = p.set.Last
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("forward paging saw %v, want each of %v once", seen, want)
	}

	// Backwards from the last page.
	seen = nil
	before := ""
	for range 4 {
		p := listPage(t, h, juliet, rsmSet(`<max>2</max><before>`+before+`</before>`))
		if len(p.items) == 0 {
			break
		}
		seen = append(p.items, seen...)
		before = p.set.First
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("backward paging saw %v", seen)
	}

	// No <set/>: default page, still described.
	if p := listPage(t, h, juliet, ""); len(p.items) != 5 || p.set.Count != 5 {
		t.Fatalf("unpaged list = %+v", p)
	}
	// Count only.
	if p := listPage(t, h, juliet, rsmSet(`<max>0</max>`)); len(p.items) != 0 || p.set.Count != 5 || p.set.First != "" {
		t.Fatalf("count-only = %+v", p)
	}
	// By index.
	if p := listPage(t, h, juliet, rsmSet(`<max>2</max><index>3</index>`)); !slices.Equal(p.items, want[3:]) || p.set.FirstIndex != 3 {
		t.Fatalf("index page = %+v", p)
	}
	// The hidden endpoint is listed for the one principal allowed to see it.
	if p := listPage(t, h, "boss@example.net/x", ""); p.set.Count != 6 {
		t.Fatalf("boss count = %d", p.set.Count)
	}
	// A remote principal without grants sees an empty directory.
	if p := listPage(t, h, romeo, ""); len(p.items) != 0 || p.set.Count != 0 {
		t.Fatalf("remote list = %+v", p)
	}
	// Node-less works as well; other nodes do not exist.
	q := payload(t, h.do(t, "get", juliet, domain, discoItems))
	if len(q.ChildrenNamed(ns.DiscoItems, "item")) != 5 {
		t.Fatalf("node-less items = %s", q)
	}
	if c := condition(h.do(t, "get", juliet, domain, itemsNode("urn:other", ""))); c != "item-not-found" {
		t.Fatalf("unknown node: %s", c)
	}
	for _, bad := range []string{`<max>-1</max>`, `<max>x</max>`, `<after>a</after><before>b</before>`} {
		if c := condition(h.do(t, "get", juliet, domain, itemsNode(ns.Directory, rsmSet(bad)))); c != "bad-request" {
			t.Errorf("set %s: %s", bad, c)
		}
	}
}

func TestDirectoryPageCeiling(t *testing.T) {
	var ms []string
	for i := range PageCeiling + 20 {
		ms = append(ms, fmt.Sprintf(`{"manifestSpecVersion":"0","agent":{"jid":"e%04d@agents.example","name":"e","version":"1"},"tools":[]}`, i))
	}
	h := newHarness(t, newFakeDir(t, ms...))
	p := listPage(t, h, juliet, rsmSet(`<max>100000</max>`))
	if len(p.items) != PageCeiling || p.set.Count != PageCeiling+20 {
		t.Fatalf("items %d count %d", len(p.items), p.set.Count)
	}
}

func TestEndpointInfo(t *testing.T) {
	h := newHarness(t, newFakeDir(t, weatherManifest, notesManifest))
	w := h.dir.versions[epJID("weather")]["1.4.0"]
	q := payload(t, h.do(t, "get", juliet, epJID("weather"), discoInfo))
	if _, has := q.LookupAttr("node"); has {
		t.Fatalf("node-less reply carries a node")
	}
	id := q.Child(ns.DiscoInfo, "identity")
	if id.AttrValue("type") != "agent-endpoint" || id.AttrValue("name") != "Weather Agent" {
		t.Fatalf("identity = %s", id)
	}
	f := featureVars(q)
	mustContain(t, "endpoint features", f, ns.DiscoInfo, ns.DiscoItems, ns.Endpoint, ns.APIManifest, ns.APISchema, ns.Task, ns.TaskProgress, ns.TaskCancel, ns.VCard)
	mustLack(t, "endpoint features", f, ns.TaskInput)
	form := formValues(q)
	want := map[string]string{
		"FORM_TYPE":              ns.EndpointInfo,
		"server_name":            "weather",
		"server_title":           "Weather Agent",
		"description":            "Provides weather forecasts.",
		"version":                "1.4.0",
		"manifest_hash_algo":     "sha-256",
		"manifest_hash_value":    w.Hash,
		"cold_start_supported":   "1",
		"request_replay_seconds": "86400",
	}
	for k, v := range want {
		if got := form[k]; len(got) != 1 || got[0] != v {
			t.Errorf("field %s = %v, want %q", k, got, v)
		}
	}
	if len(form) != len(want) {
		t.Errorf("form has %d fields, want %d: %v", len(form), len(want), form)
	}

	// server_title falls back to the name; multi-line description is one
	// value per line.
	form = formValues(payload(t, h.do(t, "get", juliet, epJID("notes"), discoInfo)))
	if form["server_title"][0] != "notes" || !slices.Equal(form["description"], []string{"Keeps notes.", "Second line."}) {
		t.Fatalf("notes form = %v", form)
	}

	if c := condition(h.do(t, "get", juliet, epJID("weather"), infoNode(ns.Endpoint))); c != "item-not-found" {
		t.Fatalf("agent-endpoint as node: %s", c)
	}
	q = payload(t, h.do(t, "get", juliet, epJID("weather"), infoNode("urn:xmpp:agent-tools:0#1.4.0")))
	if q.Child(ns.DiscoInfo, "identity").AttrValue("type") != "agent-tool-collection" || q.AttrValue("node") != "urn:xmpp:agent-tools:0#1.4.0" {
		t.Fatalf("collection info = %s", q)
	}
	mustContain(t, "collection features", featureVars(q), ns.DiscoInfo, ns.DiscoItems)
	for _, node := range []string{"urn:xmpp:agent-tools:0#9.9", "urn:xmpp:agent-tools:0#", "urn:other"} {
		if c := condition(h.do(t, "get", juliet, epJID("weather"), infoNode(node))); c != "item-not-found" {
			t.Errorf("node %s: %s", node, c)
		}
	}
}

func TestNoTaskFeaturesWithoutTaskLayer(t *testing.T) {
	dir := newFakeDir(t, weatherManifest)
	d := Deps{Reader: dir, Policy: testPolicy()}
	s := &service{Deps: d}
	if f := s.endpointFeatures(epJID("weather")); slices.Contains(f, ns.Task) || slices.Contains(f, ns.TaskProgress) {
		t.Fatalf("features without a task layer: %v", f)
	}
	m, _ := dir.Active(epJID("weather"))
	if f := s.toolTaskFeatures(epJID("weather"), &m.Tools[0]); len(f) != 0 {
		t.Fatalf("tool task features without a task layer: %v", f)
	}
}

func TestToolInfo(t *testing.T) {
	h := newHarness(t, newFakeDir(t, weatherManifest, notesManifest))
	w := h.dir.versions[epJID("weather")]["1.4.0"]
	node := "urn:xmpp:agent-tool:0#1.4.0#Zm9yZWNhc3QuZ2V0"
	q := payload(t, h.do(t, "get", juliet, epJID("weather"), infoNode(node)))
	if q.AttrValue("node") != node {
		t.Fatalf("node not echoed")
	}
	id := q.Child(ns.DiscoInfo, "identity")
	if id.AttrValue("type") != "agent-tool" || id.AttrValue("name") != "Get Forecast" {
		t.Fatalf("identity = %s", id)
	}
	f := featureVars(q)
	mustContain(t, "tool features", f, ns.DiscoInfo, ns.Tool, ns.TaskProgress, ns.TaskCancel)
	mustLack(t, "tool features", f, ns.TaskInput, ns.Task, ns.DiscoItems)
	form := formValues(q)
	want := map[string]string{
		"FORM_TYPE": ns.ToolInfo, "name": "forecast.get", "title": "Get Forecast",
		"description": "Gets a forecast for one city.", "api_version": "1.4.0",
		"input_schema_hash_algo": "sha-256", "input_schema_hash_value": "XxGP62PwgOW9NLxx8ysunvuijMhSd0y4j1SSRTAbt7c=",
		"output_schema_hash_algo": "sha-256", "output_schema_hash_value": w.Tools[0].OutputHash,
		"read_only": "1", "destructive": "0", "idempotent": "1", "open_world": "1",
	}
	for k, v := range want {
		if got := form[k]; len(got) != 1 || got[0] != v {
			t.Errorf("field %s = %v, want %q", k, got, v)
		}
	}
	if len(form) != len(want) {
		t.Errorf("form = %v", form)
	}

	// notes/alpha: only readOnlyHint=false was given; the others stay
	// absent. It declares progress and input; the endpoint offers progress
	// only, so input is not effective.
	q = payload(t, h.do(t, "get", juliet, epJID("notes"), infoNode(directory.ToolNode("7", "alpha"))))
	form = formValues(q)
	if got := form["read_only"]; len(got) != 1 || got[0] != "0" {
		t.Errorf("read_only = %v", got)
	}
	for _, absent := range []string{"destructive", "idempotent", "open_world", "title", "description", "output_schema_hash_algo", "output_schema_hash_value"} {
		if _, ok := form[absent]; ok {
			t.Errorf("field %s present though absent from the manifest", absent)
		}
	}
	f = featureVars(q)
	mustContain(t, "alpha features", f, ns.TaskProgress)
	mustLack(t, "alpha features", f, ns.TaskInput, ns.TaskCancel)
	if id := q.Child(ns.DiscoInfo, "identity"); id.AttrValue("name") != "alpha" {
		t.Errorf("identity name falls back to the tool name: %s", id)
	}
	// notes/zeta: no annotations at all.
	form = formValues(payload(t, h.do(t, "get", juliet, epJID("notes"), infoNode(directory.ToolNode("7", "zeta")))))
	for _, absent := range []string{"read_only", "destructive", "idempotent", "open_world"} {
		if _, ok := form[absent]; ok {
			t.Errorf("zeta has %s", absent)
		}
	}
	for _, node := range []string{
		directory.ToolNode("1.4.0", "nope"),
		directory.ToolNode("9.9", "forecast.get"),
		node + "=",
		"urn:xmpp:agent-tool:0#1.4.0",
	} {
		if c := condition(h.do(t, "get", juliet, epJID("weather"), infoNode(node))); c != "item-not-found" {
			t.Errorf("tool node %s: %s", node, c)
		}
	}
}

func toolPage(t *testing.T, h *harness, set string) ([]string, []string, rsm.Result) {
	t.Helper()
	q := payload(t, h.do(t, "get", juliet, epJID("notes"), itemsNode("urn:xmpp:agent-tools:0#7", set)))
	var nodes, names []string
	for _, it := range q.ChildrenNamed(ns.DiscoItems, "item") {
		if it.AttrValue("jid") != epJID("notes") {
			t.Fatalf("tool item jid = %s", it.AttrValue("jid"))
		}
		nodes = append(nodes, it.AttrValue("node"))
		names = append(names, it.AttrValue("name"))
	}
	r, err := rsm.ParseResult(q.Child(ns.RSM, "set"))
	if err != nil {
		t.Fatal(err)
	}
	return nodes, names, r
}

func TestToolItems(t *testing.T) {
	h := newHarness(t, newFakeDir(t, notesManifest))
	order := []string{"Beta", "alpha", "mid", "zeta", "é"} // UTF-8 byte order
	var wantNodes []string
	for _, n := range order {
		wantNodes = append(wantNodes, directory.ToolNode("7", n))
	}
	var seen []string
	after := ""
	for range 5 {
		set := `<max>2</max>`
		if after != "" {
			set += `<after>` + after + `</after>`
		}
		nodes, _, r := toolPage(t, h, rsmSet(set))
		if r.Count != 5 {
			t.Fatalf("count = %d", r.Count)
		}
		if len(nodes) == 0 {
			break
		}
		if r.First != nodes[0] || r.Last != nodes[len(nodes)-1] || r.FirstIndex != len(seen) {
			t.Fatalf("set %+v for %v", r, nodes)
		}
		seen = append(seen, nodes...)
		after = r.Last
	}
	if !slices.Equal(seen, wantNodes) {
		t.Fatalf("tool paging saw %v, want %v", seen, wantNodes)
	}
	_, names, _ := toolPage(t, h, "")
	if !slices.Equal(names, []string{"Beta Tool", "alpha", "mid", "zeta", "é"}) {
		t.Fatalf("names = %v", names)
	}
	nodes, _, _ := toolPage(t, h, rsmSet(`<max>2</max><before/>`))
	if !slices.Equal(nodes, wantNodes[3:]) {
		t.Fatalf("last page = %v", nodes)
	}
	nodes, _, _ = toolPage(t, h, rsmSet(`<before>`+wantNodes[2]+`</before>`))
	if !slices.Equal(nodes, wantNodes[:2]) {
		t.Fatalf("before mid = %v", nodes)
	}
	for _, bad := range []string{directory.ToolNode("8", "alpha"), "garbage"} {
		if c := condition(h.do(t, "get", juliet, epJID("notes"), itemsNode("urn:xmpp:agent-tools:0#7", rsmSet(`<after>`+bad+`</after>`)))); c != "item-not-found" {
			t.Errorf("cursor %s: %s", bad, c)
		}
	}
	// Node-less items point at the active collection.
	q := payload(t, h.do(t, "get", juliet, epJID("notes"), discoItems))
	items := q.ChildrenNamed(ns.DiscoItems, "item")
	if len(items) != 1 || items[0].AttrValue("node") != "urn:xmpp:agent-tools:0#7" || items[0].AttrValue("jid") != epJID("notes") {
		t.Fatalf("node-less endpoint items = %s", q)
	}
	// A tool node is a leaf.
	q = payload(t, h.do(t, "get", juliet, epJID("notes"), itemsNode(directory.ToolNode("7", "mid"), "")))
	if len(q.Children) != 0 {
		t.Fatalf("tool node items = %s", q)
	}
	for _, node := range []string{"urn:xmpp:agent-tools:0#8", ns.Endpoint, directory.ToolNode("7", "nope")} {
		if c := condition(h.do(t, "get", juliet, epJID("notes"), itemsNode(node, ""))); c != "item-not-found" {
			t.Errorf("items node %s: %s", node, c)
		}
	}
}

func TestManifestRetrieval(t *testing.T) {
	dir := newFakeDir(t, weatherManifest, notesManifest)
	old := dir.add(buildManifest(t, strings.Replace(notesManifest, `"version":"7"`, `"version":"6"`, 1)))
	h := newHarness(t, dir)
	w, _ := dir.Active(epJID("weather"))
	m := payload(t, h.do(t, "get", juliet, epJID("weather"), `<manifest-request xmlns='urn:xmpp:agent-api:0'/>`))
	if !m.Is(ns.API, "manifest") || m.AttrValue("version") != "1.4.0" || m.AttrValue("media-type") != "application/json" {
		t.Fatalf("manifest = %s", m)
	}
	if h := m.Child(ns.Hashes, "hash"); h.Text != w.Hash || h.AttrValue("algo") != "sha-256" {
		t.Fatalf("hash = %s", h)
	}
	if js := m.Child(ns.API, "json").Text; js != string(w.Canonical) || hashOf([]byte(js)) != w.Hash {
		t.Fatalf("json is not the canonical bytes")
	}
	// The wire form round-trips to the same bytes.
	back, err := xmltree.Parse([]byte(m.String()), xmltree.Limits{})
	if err != nil || back.Child(ns.API, "json").Text != string(w.Canonical) {
		t.Fatalf("round trip: %v", err)
	}

	m = payload(t, h.do(t, "get", juliet, epJID("notes"), `<manifest-request xmlns='urn:xmpp:agent-api:0' version='6'/>`))
	if m.AttrValue("version") != "6" || m.Child(ns.Hashes, "hash").Text != old.Hash {
		t.Fatalf("pinned manifest = %s", m)
	}
	if c := condition(h.do(t, "get", juliet, epJID("notes"), `<manifest-request xmlns='urn:xmpp:agent-api:0' version='5'/>`)); c != "item-not-found" {
		t.Fatalf("unknown version: %s", c)
	}
	if c := condition(h.do(t, "get", juliet, epJID("notes"), `<manifest-request xmlns='urn:xmpp:agent-api:0' version='a b'/>`)); c != "bad-request" {
		t.Fatalf("malformed version: %s", c)
	}
}

func schemaReq(tool, version, direction, hash string) string {
	s := `<schema-request xmlns='urn:xmpp:agent-api:0'`
	if tool != "-" {
		s += ` tool='` + tool + `'`
	}
	if version != "-" {
		s += ` version='` + version + `'`
	}
	if direction != "-" {
		s += ` direction='` + direction + `'`
	}
	s += `>`
	if hash != "-" {
		s += `<hash xmlns='urn:xmpp:hashes:2' algo='sha-256'>` + hash + `</hash>`
	}
	return s + `</schema-request>`
}

func TestSchemaRetrieval(t *testing.T) {
	dir := newFakeDir(t, weatherManifest, notesManifest)
	h := newHarness(t, dir)
	w, _ := dir.Active(epJID("weather"))
	n, _ := dir.Active(epJID("notes"))

	s := payload(t, h.do(t, "get", juliet, epJID("weather"), schemaReq("forecast.get", "1.4.0", "input", w.Hash)))
	if s.AttrValue("media-type") != "application/schema+json" || s.AttrValue("tool") != "forecast.get" || s.AttrValue("version") != "1.4.0" || s.AttrValue("direction") != "input" {
		t.Fatalf("schema = %s", s)
	}
	if s.Child(ns.API, "json").Text != `{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}` {
		t.Fatalf("input schema json = %s", s.Child(ns.API, "json").Text)
	}
	if mh := s.Child(ns.API, "manifest-hash").Child(ns.Hashes, "hash").Text; mh != w.Hash {
		t.Fatalf("manifest-hash = %s", mh)
	}
	if sh := s.Child(ns.API, "schema-hash").Child(ns.Hashes, "hash").Text; sh != "XxGP62PwgOW9NLxx8ysunvuijMhSd0y4j1SSRTAbt7c=" {
		t.Fatalf("schema-hash = %s", sh)
	}
	s = payload(t, h.do(t, "get", juliet, epJID("weather"), schemaReq("forecast.get", "1.4.0", "output", w.Hash)))
	if js := s.Child(ns.API, "json").Text; js != string(w.Tools[0].OutputSchema) || hashOf([]byte(js)) != s.Child(ns.API, "schema-hash").Child(ns.Hashes, "hash").Text {
		t.Fatalf("output schema = %s", s)
	}

	cases := []struct {
		name, ep, req, want string
	}{
		{"stale hash", "weather", schemaReq("forecast.get", "1.4.0", "input", toollessHash), "conflict"},
		{"unknown tool", "weather", schemaReq("nope", "1.4.0", "input", w.Hash), "item-not-found"},
		{"unknown version", "weather", schemaReq("forecast.get", "9", "input", w.Hash), "item-not-found"},
		{"no output schema", "notes", schemaReq("zeta", "7", "output", n.Hash), "item-not-found"},
		{"missing tool", "weather", schemaReq("-", "1.4.0", "input", w.Hash), "bad-request"},
		{"missing version", "weather", schemaReq("forecast.get", "-", "input", w.Hash), "bad-request"},
		{"missing direction", "weather", schemaReq("forecast.get", "1.4.0", "-", w.Hash), "bad-request"},
		{"bad direction", "weather", schemaReq("forecast.get", "1.4.0", "sideways", w.Hash), "bad-request"},
		{"missing hash", "weather", schemaReq("forecast.get", "1.4.0", "input", "-"), "bad-request"},
		{"empty tool", "weather", schemaReq("", "1.4.0", "input", w.Hash), "bad-request"},
	}
	for _, tc := range cases {
		if c := condition(h.do(t, "get", juliet, epJID(tc.ep), tc.req)); c != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, c, tc.want)
		}
	}
	other := `<schema-request xmlns='urn:xmpp:agent-api:0' tool='forecast.get' version='1.4.0' direction='input'><hash xmlns='urn:xmpp:hashes:2' algo='sha-1'>x</hash></schema-request>`
	if c := condition(h.do(t, "get", juliet, epJID("weather"), other)); c != "bad-request" {
		t.Errorf("sha-1 hash: %s", c)
	}
}

func searchSubmit(nick, set string) string {
	return `<query xmlns='jabber:iq:search'>` + set + `<x xmlns='jabber:x:data' type='submit'>` +
		`<field type='hidden' var='FORM_TYPE'><value>jabber:iq:search</value></field>` +
		`<field var='nick'><value>` + nick + `</value></field></x></query>`
}

func searchResults(t *testing.T, q *xmltree.Element) ([]string, rsm.Result) {
	t.Helper()
	x := q.Child(ns.Data, "x")
	if x == nil || x.AttrValue("type") != "result" {
		t.Fatalf("no result form: %s", q)
	}
	for _, c := range x.Children {
		if c.Name.Local != "reported" && c.Name.Local != "item" {
			t.Fatalf("result form child %s", c.Name.Local)
		}
	}
	if x.Child("", "set") != nil {
		t.Fatalf("RSM inside the form")
	}
	var jids []string
	for _, it := range x.ChildrenNamed(ns.Data, "item") {
		for _, f := range it.ChildrenNamed(ns.Data, "field") {
			if f.AttrValue("var") == "jid" {
				jids = append(jids, f.Child(ns.Data, "value").Text)
			}
		}
	}
	r, err := rsm.ParseResult(q.Child(ns.RSM, "set"))
	if err != nil {
		t.Fatal(err)
	}
	return jids, r
}

func TestSearch(t *testing.T) {
	ms := append(fiveEndpoints(), weatherManifest, calendarManifest)
	h := newHarness(t, newFakeDir(t, ms...))

	form := payload(t, h.do(t, "get", juliet, domain, `<query xmlns='jabber:iq:search'/>`))
	if form.Child(ns.Search, "instructions") == nil || form.Child(ns.Search, "nick") == nil {
		t.Fatalf("search form = %s", form)
	}
	x := form.Child(ns.Data, "x")
	if x.AttrValue("type") != "form" || formValues(form)["FORM_TYPE"][0] != ns.Search {
		t.Fatalf("search x = %s", x)
	}

	// Unicode-aware, case-insensitive match on title.
	jids, r := searchResults(t, payload(t, h.do(t, "set", juliet, domain, searchSubmit("WEATHER", ""))))
	if !slices.Equal(jids, []string{epJID("weather")}) || r.Count != 1 || r.First != epJID("weather") {
		t.Fatalf("search WEATHER = %v %+v", jids, r)
	}
	// "agent" matches every title; the hidden "secret" is neither listed
	// nor counted.
	jids, r = searchResults(t, payload(t, h.do(t, "set", juliet, domain, searchSubmit("agent", rsmSet(`<max>3</max>`)))))
	if len(jids) != 3 || r.Count != 7 || r.Last != jids[2] {
		t.Fatalf("search agent = %v %+v", jids, r)
	}
	jids2, _ := searchResults(t, payload(t, h.do(t, "set", juliet, domain, searchSubmit("agent", rsmSet(`<max>10</max><after>`+r.Last+`</after>`)))))
	if len(jids2) != 4 || slices.Contains(jids2, epJID("secret")) || slices.Contains(jids2, jids[2]) {
		t.Fatalf("second page = %v", jids2)
	}
	// Remote principals without grants find nothing, not even a count.
	jids, r = searchResults(t, payload(t, h.do(t, "set", romeo, domain, searchSubmit("weather", ""))))
	if len(jids) != 0 || r.Count != 0 {
		t.Fatalf("remote search = %v %+v", jids, r)
	}
	// The granted remote sees weather only.
	jids, _ = searchResults(t, payload(t, h.do(t, "set", mercutio, domain, searchSubmit("", ""))))
	if !slices.Equal(jids, []string{epJID("weather")}) {
		t.Fatalf("granted remote search = %v", jids)
	}

	// Legacy search gets legacy items.
	q := payload(t, h.do(t, "set", juliet, domain, `<query xmlns='jabber:iq:search'><nick>Calendar</nick></query>`))
	items := q.ChildrenNamed(ns.Search, "item")
	if len(items) != 1 || items[0].AttrValue("jid") != epJID("calendar") || items[0].Child(ns.Search, "nick").Text != "Calendar Agent" {
		t.Fatalf("legacy search = %s", q)
	}
	if q.Child(ns.RSM, "set") == nil {
		t.Fatalf("legacy result lacks RSM")
	}

	bad := `<query xmlns='jabber:iq:search'><x xmlns='jabber:x:data' type='submit'><field var='FORM_TYPE'><value>urn:other</value></field></x></query>`
	if c := condition(h.do(t, "set", juliet, domain, bad)); c != "bad-request" {
		t.Fatalf("wrong FORM_TYPE: %s", c)
	}
	long := `<query xmlns='jabber:iq:search'><nick>` + strings.Repeat("x", maxNickBytes+1) + `</nick></query>`
	if c := condition(h.do(t, "set", juliet, domain, long)); c != "bad-request" {
		t.Fatalf("long nick: %s", c)
	}
}

func TestVCard(t *testing.T) {
	h := newHarness(t, newFakeDir(t, weatherManifest, notesManifest))
	v := payload(t, h.do(t, "get", juliet, epJID("notes"), `<vCard xmlns='vcard-temp'/>`))
	want := `<vCard xmlns="vcard-temp"><FN>notes</FN><DESC>Keeps notes.` + "\n" + `Second line.</DESC><URL>https://notes.example/</URL><PHOTO><EXTVAL>https://notes.example/a.png</EXTVAL></PHOTO></vCard>`
	if v.String() != want {
		t.Fatalf("vCard = %s", v)
	}
	v = payload(t, h.do(t, "get", juliet, epJID("weather"), `<vCard xmlns='vcard-temp'/>`))
	if v.Child(ns.VCard, "URL") != nil || v.Child(ns.VCard, "PHOTO") != nil || v.Child(ns.VCard, "FN").Text != "Weather Agent" {
		t.Fatalf("weather vCard = %s", v)
	}
	if c := condition(h.do(t, "set", juliet, epJID("weather"), `<vCard xmlns='vcard-temp'><FN>x</FN></vCard>`)); c != "not-allowed" {
		t.Fatalf("vCard set: %s", c)
	}
}

// TestNotFoundIsIdentical checks that, for every discovery and metadata
// operation, a hidden endpoint and a nonexistent one produce the very same
// reply bytes.
func TestNotFoundIsIdentical(t *testing.T) {
	withWeather := newFakeDir(t, weatherManifest)
	deactivated := newFakeDir(t, weatherManifest)
	delete(deactivated.active, epJID("weather"))
	hidden := newFakeDir(t, strings.Replace(weatherManifest, "weather@agents.example", "secret@agents.example", 1))
	empty := newFakeDir(t)
	w, _ := withWeather.Active(epJID("weather"))

	ops := map[string]string{
		"info":            discoInfo,
		"items":           discoItems,
		"collection info": infoNode("urn:xmpp:agent-tools:0#1.4.0"),
		"collection":      itemsNode("urn:xmpp:agent-tools:0#1.4.0", rsmSet(`<max>1</max>`)),
		"tool info":       infoNode("urn:xmpp:agent-tool:0#1.4.0#Zm9yZWNhc3QuZ2V0"),
		"endpoint node":   infoNode(ns.Endpoint),
		"manifest":        `<manifest-request xmlns='urn:xmpp:agent-api:0'/>`,
		"pinned manifest": `<manifest-request xmlns='urn:xmpp:agent-api:0' version='1.4.0'/>`,
		"schema":          schemaReq("forecast.get", "1.4.0", "input", w.Hash),
		"stale schema":    schemaReq("forecast.get", "1.4.0", "input", toollessHash),
		"vcard":           `<vCard xmlns='vcard-temp'/>`,
		"unknown payload": `<query xmlns='jabber:iq:version'/>`,
	}
	type view struct {
		name string
		dir  *fakeDir
		from string
		to   string
	}
	groups := [][]view{
		// Remote principal without grants: existing vs nonexistent.
		{{"nonexistent", empty, romeo, "weather"}, {"hidden remote", withWeather, romeo, "weather"}, {"deactivated", deactivated, romeo, "weather"}},
		// Local principal: rule-hidden and deactivated vs nonexistent.
		{{"nonexistent", empty, juliet, "secret"}, {"rule-hidden", hidden, juliet, "secret"}},
		{{"nonexistent", empty, juliet, "weather"}, {"deactivated", deactivated, juliet, "weather"}},
	}
	for opName, op := range ops {
		for _, g := range groups {
			var ref string
			for _, v := range g {
				h := newHarness(t, v.dir)
				reply := h.do(t, "get", v.from, epJID(v.to), op).String()
				if ref == "" {
					ref = reply
					if condition(h.do(t, "get", v.from, epJID(v.to), op)) != "item-not-found" {
						t.Fatalf("%s/%s: %s", opName, v.name, reply)
					}
					continue
				}
				if reply != ref {
					t.Errorf("%s: %s differs from %s:\n%s\n%s", opName, v.name, g[0].name, reply, ref)
				}
			}
		}
	}
	// The granted remote principal does see weather.
	h := newHarness(t, withWeather)
	if c := condition(h.do(t, "get", mercutio, epJID("weather"), discoInfo)); c != "" {
		t.Fatalf("granted remote: %s", c)
	}
}

func TestAdmin(t *testing.T) {
	dir := newFakeDir(t, notesManifest)
	h := newHarness(t, dir)
	reg := `<register xmlns='urn:xmpp:agent-api:0'><manifest media-type='application/json'>` + toollessManifest + `</manifest></register>`

	for _, from := range []string{juliet, romeo, "admin@partner.example/x"} {
		reply := h.do(t, "set", from, domain, reg)
		if c := condition(reply); c != "forbidden" {
			t.Fatalf("register by %s: %s", from, c)
		}
	}
	if c := condition(h.do(t, "get", juliet, domain, `<registration-status xmlns='urn:xmpp:agent-api:0' jid='notes@agents.example'/>`)); c != "forbidden" {
		t.Fatalf("status by non-admin: %s", c)
	}

	r := payload(t, h.do(t, "set", adminUser, domain, reg))
	if !r.Is(ns.API, "registered") || r.AttrValue("jid") != epJID("weather") || r.AttrValue("version") != "1.4.0" || r.Child(ns.Hashes, "hash").Text != toollessHash {
		t.Fatalf("registered = %s", r)
	}
	// Idempotent re-registration.
	if c := condition(h.do(t, "set", adminUser, domain, reg)); c != "" {
		t.Fatalf("re-register: %s", c)
	}
	secret := "do-not-reflect-this-value"
	conflicting := strings.Replace(reg, `"tools":[]`, `"tools":[],"x":"`+secret+`"`, 1)
	conflicting = strings.Replace(conflicting, `"name":"weather"`, `"name":"`+secret+`"`, 1)
	errs := map[string]string{
		"conflict":       strings.Replace(reg, `"name":"weather"`, `"name":"`+secret+`"`, 1),
		"bad-request":    strings.Replace(reg, toollessManifest, `{"a":`+secret, 1),
		"not-acceptable": strings.Replace(reg, `"manifestSpecVersion":"0"`, `"manifestSpecVersion":"`+secret+`"`, 1),
	}
	for want, req := range errs {
		reply := h.do(t, "set", adminUser, domain, req)
		if c := condition(reply); c != want {
			t.Errorf("want %s, got %s", want, reply)
		}
		if strings.Contains(reply.String(), secret) {
			t.Errorf("%s reply reflects the manifest: %s", want, reply)
		}
	}
	if c := condition(h.do(t, "set", adminUser, domain, `<register xmlns='urn:xmpp:agent-api:0'><manifest media-type='text/plain'>{}</manifest></register>`)); c != "bad-request" {
		t.Errorf("wrong media type: %s", c)
	}
	if c := condition(h.do(t, "get", adminUser, domain, reg)); c != "bad-request" {
		t.Errorf("register as get: %s", c)
	}

	activate := func(hash string) *xmltree.Element {
		return h.do(t, "set", adminUser, domain, `<activate xmlns='urn:xmpp:agent-api:0' jid='weather@agents.example' version='1.4.0'><hash xmlns='urn:xmpp:hashes:2' algo='sha-256'>`+hash+`</hash></activate>`)
	}
	if c := condition(activate("AAAA")); c != "conflict" {
		t.Fatalf("activate with wrong hash: %s", c)
	}
	// Not yet active, so invisible.
	if c := condition(h.do(t, "get", juliet, epJID("weather"), discoInfo)); c != "item-not-found" {
		t.Fatalf("inactive endpoint info: %s", c)
	}
	if a := payload(t, activate(toollessHash)); a.String() != `<active xmlns="urn:xmpp:agent-api:0" jid="weather@agents.example" version="1.4.0"/>` {
		t.Fatalf("active = %s", a)
	}
	if c := condition(h.do(t, "get", juliet, epJID("weather"), discoInfo)); c != "" {
		t.Fatalf("activated endpoint info: %s", c)
	}

	st := payload(t, h.do(t, "get", adminUser, domain, `<registration-status xmlns='urn:xmpp:agent-api:0' jid='weather@agents.example'/>`))
	v := st.Child(ns.API, "version")
	if st.AttrValue("jid") != epJID("weather") || v.AttrValue("id") != "1.4.0" || v.AttrValue("active") != "true" || v.AttrValue("removable") != "false" || v.Child(ns.Hashes, "hash").Text != toollessHash {
		t.Fatalf("status = %s", st)
	}
	rmv := `<remove-version xmlns='urn:xmpp:agent-api:0' jid='weather@agents.example' version='1.4.0'/>`
	if c := condition(h.do(t, "set", adminUser, domain, rmv)); c != "conflict" {
		t.Fatalf("remove active version: %s", c)
	}
	if d := payload(t, h.do(t, "set", adminUser, domain, `<deactivate xmlns='urn:xmpp:agent-api:0' jid='weather@agents.example'/>`)); !d.Is(ns.API, "deactivated") {
		t.Fatalf("deactivated = %s", d)
	}
	if d := payload(t, h.do(t, "set", adminUser, domain, rmv)); d.String() != `<removed xmlns="urn:xmpp:agent-api:0" jid="weather@agents.example" version="1.4.0"/>` {
		t.Fatalf("removed = %s", d)
	}
	if d := payload(t, h.do(t, "set", adminUser, domain, `<remove-endpoint xmlns='urn:xmpp:agent-api:0' jid='notes@agents.example'/>`)); d.String() != `<removed xmlns="urn:xmpp:agent-api:0" jid="notes@agents.example"/>` {
		t.Fatalf("removed endpoint = %s", d)
	}
	for req, want := range map[string]string{
		`<deactivate xmlns='urn:xmpp:agent-api:0' jid='nobody@agents.example'/>`:                  "item-not-found",
		`<deactivate xmlns='urn:xmpp:agent-api:0'/>`:                                              "bad-request",
		`<deactivate xmlns='urn:xmpp:agent-api:0' jid='agents.example'/>`:                         "bad-request",
		`<deactivate xmlns='urn:xmpp:agent-api:0' jid='a@agents.example/res'/>`:                   "bad-request",
		`<remove-version xmlns='urn:xmpp:agent-api:0' jid='notes@agents.example'/>`:               "bad-request",
		`<activate xmlns='urn:xmpp:agent-api:0' jid='notes@agents.example' version='7'/>`:         "bad-request",
		`<registration-status xmlns='urn:xmpp:agent-api:0' jid='nobody@agents.example'/>`:         "item-not-found",
		`<remove-version xmlns='urn:xmpp:agent-api:0' jid='notes@agents.example' version='a b'/>`: "bad-request",
	} {
		if c := condition(h.do(t, "set", adminUser, domain, req)); c != want {
			t.Errorf("%s: %s, want %s", req, c, want)
		}
	}
}

func TestAdminUnregisteredWithoutAdmin(t *testing.T) {
	dir := newFakeDir(t, weatherManifest)
	// A gateway without an Admin neither serves nor advertises admin IQs.
	r := newRouterWithout(t, dir)
	reply := r.DispatchIQ(t.Context(), iq(t, "set", adminUser, domain, `<deactivate xmlns='urn:xmpp:agent-api:0' jid='weather@agents.example'/>`))
	if c := condition(reply); c != "service-unavailable" {
		t.Fatalf("admin without Admin: %s", c)
	}
	info := r.DispatchIQ(t.Context(), iq(t, "get", adminUser, domain, discoInfo))
	mustLack(t, "features without admin", featureVars(payload(t, info)), ns.APIAdmin)
}

func TestPresence(t *testing.T) {
	h := newHarness(t, newFakeDir(t, weatherManifest, strings.Replace(weatherManifest, "weather@agents.example", "secret@agents.example", 1)))
	ctx := t.Context()
	send := func(typ, from, to string) []string {
		h.router.DispatchPresence(ctx, presence(t, typ, from, to))
		return h.sender.take()
	}
	caps := func(ep string) string { return h.presence.caps(epJID(ep)).String() }
	got := send("subscribe", juliet, epJID("weather"))
	want := []string{
		`<presence xmlns="jabber:component:accept" from="weather@agents.example" to="juliet@example.net" type="subscribed"/>`,
		`<presence xmlns="jabber:component:accept" from="weather@agents.example" to="juliet@example.net">` + caps("weather") + `</presence>`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("subscribe replies:\n%v", got)
	}
	if h.presence.Subscribers(epJID("weather")) != 1 {
		t.Fatalf("subscriber not remembered")
	}
	// Hidden, nonexistent, remote without grants: silence.
	for _, c := range [][2]string{{juliet, epJID("secret")}, {juliet, epJID("nobody")}, {romeo, epJID("weather")}} {
		for _, typ := range []string{"subscribe", "probe"} {
			if got := send(typ, c[0], c[1]); len(got) != 0 {
				t.Errorf("%s from %s to %s answered: %v", typ, c[0], c[1], got)
			}
		}
	}
	if got := send("probe", "mercutio@friend.example", epJID("weather")); len(got) != 1 || !strings.Contains(got[0], `to="mercutio@friend.example"`) || strings.Contains(got[0], "type=") {
		t.Fatalf("probe reply = %v", got)
	}
	// Presence to the gateway itself is not ours.
	if got := send("subscribe", juliet, domain); len(got) != 0 {
		t.Fatalf("gateway subscribe answered: %v", got)
	}

	h.presence.SetAvailable(epJID("weather"), false)
	got = h.sender.take()
	if len(got) != 2 {
		t.Fatalf("unavailable push = %v", got)
	}
	for _, s := range got {
		if !strings.Contains(s, `type="unavailable"`) || !strings.Contains(s, `from="weather@agents.example"`) {
			t.Fatalf("push = %s", s)
		}
	}
	h.presence.SetAvailable(epJID("weather"), false)
	if got := h.sender.take(); len(got) != 0 {
		t.Fatalf("unchanged availability pushed again: %v", got)
	}
	if got := send("probe", juliet, epJID("weather")); len(got) != 1 || !strings.Contains(got[0], `type="unavailable"`) {
		t.Fatalf("probe while down = %v", got)
	}
	if got := send("unsubscribe", juliet, epJID("weather")); len(got) != 1 || !strings.Contains(got[0], `type="unavailable"`) {
		t.Fatalf("unsubscribe = %v", got)
	}
	h.presence.SetAvailable(epJID("weather"), true)
	got = h.sender.take()
	if len(got) != 1 || !strings.Contains(got[0], `to="mercutio@friend.example"`) || strings.Contains(got[0], "type=") {
		t.Fatalf("available push after unsubscribe = %v", got)
	}
	// After a reconnect every remembered, still-entitled subscriber hears
	// the current availability again.
	send("subscribe", "boss@example.net", epJID("secret"))
	h.presence.Rebroadcast(ctx)
	got = h.sender.take()
	slices.Sort(got)
	want = []string{
		`<presence xmlns="jabber:component:accept" from="secret@agents.example" to="boss@example.net">` + caps("secret") + `</presence>`,
		`<presence xmlns="jabber:component:accept" from="weather@agents.example" to="mercutio@friend.example">` + caps("weather") + `</presence>`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rebroadcast = %v", got)
	}
}

func TestSubscriberBound(t *testing.T) {
	p := newPresence(jid.MustParse(domain), nil, nil, nil, nil)
	for i := range MaxSubscribersPerEndpoint + 10 {
		p.remember(context.Background(), "e@x", "u"+strconv.Itoa(i)+"@y")
	}
	if n := p.Subscribers("e@x"); n != MaxSubscribersPerEndpoint {
		t.Fatalf("subscribers = %d", n)
	}
}

// TestCapsVer checks the XEP-0115 algorithm against the XEP's simple
// example (section 5.2) and that an endpoint's ver follows its disco
// answer: another version, another ver; the caps node answers disco#info.
func TestCapsVer(t *testing.T) {
	q := xmltree.New(ns.DiscoInfo, "query").Add(
		xmltree.New(ns.DiscoInfo, "identity", "category", "client", "type", "pc", "name", "Exodus 0.9.1"),
		xmltree.New(ns.DiscoInfo, "feature", "var", "http://jabber.org/protocol/disco#info"),
		xmltree.New(ns.DiscoInfo, "feature", "var", "http://jabber.org/protocol/disco#items"),
		xmltree.New(ns.DiscoInfo, "feature", "var", "http://jabber.org/protocol/muc"),
		xmltree.New(ns.DiscoInfo, "feature", "var", "http://jabber.org/protocol/caps"),
	)
	if got := CapsVer(q); got != "QgayPKawpkPSDYmwT/WM94uAlu0=" {
		t.Fatalf("ver of the XEP-0115 example = %s", got)
	}
	dir := newFakeDir(t, weatherManifest)
	h := newHarness(t, dir)
	before := h.presence.caps(epJID("weather"))
	if before == nil {
		t.Fatal("no caps for an active endpoint")
	}
	ver := before.AttrValue("ver")
	info := h.do(t, "get", juliet, epJID("weather"), `<query xmlns="`+ns.DiscoInfo+`" node="`+CapsNode+`#`+ver+`"/>`)
	if c := condition(info); c != "" {
		t.Fatalf("caps node: %s", c)
	}
	if got := CapsVer(payload(t, info)); got != ver {
		t.Fatalf("caps node answer hashes to %s, want %s", got, ver)
	}
	if c := condition(h.do(t, "get", juliet, epJID("weather"), `<query xmlns="`+ns.DiscoInfo+`" node="`+CapsNode+`#stale"/>`)); c != "item-not-found" {
		t.Fatalf("stale caps node: %q", c)
	}
	m2 := dir.add(buildManifest(t, strings.Replace(weatherManifest, `"version": "1.4.0"`, `"version": "2.0.0"`, 1)))
	if err := dir.Activate(t.Context(), m2.Endpoint, m2.Version, m2.Hash); err != nil {
		t.Fatal(err)
	}
	if after := h.presence.caps(epJID("weather")).AttrValue("ver"); after == ver {
		t.Fatal("ver unchanged after a new active version")
	}
	h.presence.remember(context.Background(), epJID("weather"), juliet)
	h.presence.CatalogChanged(epJID("weather"), nil)
	got := h.sender.take()
	if len(got) != 1 || !strings.Contains(got[0], h.presence.caps(epJID("weather")).AttrValue("ver")) {
		t.Fatalf("catalog change presence = %v", got)
	}
}
