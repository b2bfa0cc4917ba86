package dirxmpp

import (
	"context"
	"encoding/xml"
	"io"
	"log/slog"
	"sync"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/testkit/fuzzcheck"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// The directory wire is fuzzed through Router.DispatchIQ, the exported
// entry point the component calls. An input is one selector byte (who asks
// whom, get or set) followed by an XML document whose root element becomes
// the IQ payload. Every exec gets a fresh directory, so admin operations
// cannot make results depend on earlier inputs. Seeds live in
// testdata/fuzz/<target>/.

// secretManifest is visible only to boss@example.net (testPolicy).
const secretManifest = `{"manifestSpecVersion":"0","agent":{"jid":"secret@agents.example","name":"secret","version":"1"},
 "tools":[{"name":"t","inputSchema":{"type":"object"}}]}`

// oldWeather is an inactive older version of weather.
const oldWeather = `{"agent":{"jid":"weather@agents.example","name":"weather","version":"1.3.0"},"manifestSpecVersion":"0","tools":[]}`

const boss = "boss@example.net/desk"

var (
	fuzzSenders = []string{juliet, adminUser, romeo, mercutio, boss}
	fuzzTargets = []string{domain, epJID("weather"), epJID("notes"), epJID("calendar"), epJID("secret"), epJID("nobody")}
	// allowedConditions are the spec's error conditions for discovery,
	// metadata, search and administration. internal-server-error is not
	// among them: it means a handler failed on input it should have judged.
	allowedConditions = map[agentproto.Condition]bool{
		agentproto.CondBadRequest: true, agentproto.CondNotAcceptable: true, agentproto.CondResourceConstraint: true,
		agentproto.CondItemNotFound: true, agentproto.CondConflict: true, agentproto.CondForbidden: true,
		agentproto.CondServiceUnavailable: true, agentproto.CondNotAllowed: true, agentproto.CondFeatureNotImplemented: true,
	}
)

// fuzzWorld is built once per target: the parsed fixtures, the policy and
// the vocabulary error texts may use.
type fuzzWorld struct {
	manifests []*directory.Manifest
	active    map[string]string
	policy    *federation.Policy
	vocab     fuzzcheck.Vocab
}

var (
	worldOnce sync.Once
	world     *fuzzWorld
)

func newFuzzWorld(f *testing.F) *fuzzWorld {
	worldOnce.Do(func() {
		w := &fuzzWorld{active: map[string]string{}, policy: testPolicy()}
		for _, raw := range []string{weatherManifest, calendarManifest, notesManifest, secretManifest, oldWeather} {
			m := buildManifest(f, raw)
			w.manifests = append(w.manifests, m)
			if raw != oldWeather {
				w.active[m.Endpoint] = m.Version
			}
		}
		w.vocab = fuzzcheck.Vocabulary(f, "directory/dirxmpp", "directory", "component", "agentproto/ns",
			"xep/rsm", "xep/dataform")
		world = w
	})
	return world
}

// router returns a router over a fresh copy of the fixture directory.
func (w *fuzzWorld) router() *component.Router {
	d := &fakeDir{versions: map[string]map[string]*directory.Manifest{}, active: map[string]string{}}
	for _, m := range w.manifests {
		d.add(m)
	}
	for ep, v := range w.active {
		d.active[ep] = v
	}
	dom := jid.MustParse(domain)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := component.NewRouter(dom, NewResolver(d, w.policy), quiet)
	Register(r, Deps{
		Domain: dom, GatewayName: "Example Agent Gateway", Reader: d, Admin: fuzzAdmin{d}, Policy: w.policy,
		TaskFeatures: taskFeatures, ColdStart: func(string) bool { return true }, Sender: &fakeSender{}, Log: quiet,
	})
	return r
}

// fuzzAdmin registers with the real manifest validation, so the admin IQ
// sees the directory's real errors for arbitrary manifests.
type fuzzAdmin struct{ *fakeDir }

func (a fuzzAdmin) Register(_ context.Context, raw []byte) (*directory.Manifest, error) {
	m, err := directory.ParseManifest(raw)
	if err != nil {
		return nil, err
	}
	if old, ok := a.Manifest(m.Endpoint, m.Version); ok {
		if old.Hash != m.Hash {
			return nil, directory.ErrConflict
		}
		return old, nil
	}
	return a.add(m), nil
}

// fuzzIQ is one decoded fuzz input.
type fuzzIQ struct {
	typ, from, to string
	payload       *xmltree.Element
}

// decodeFuzz splits data into the selector and the payload; ok is false
// when the payload is not XML the stream layer would pass on.
func decodeFuzz(data []byte) (sel byte, payload *xmltree.Element, ok bool) {
	if len(data) == 0 {
		return 0, nil, false
	}
	p, err := xmltree.Parse(data[1:], xmltree.DefaultLimits)
	if err != nil {
		return 0, nil, false
	}
	return data[0], p, true
}

// dispatch answers one IQ and checks the properties every reply has:
// exactly one iq of type result or error, addressed back, with an allowed
// condition, and an error that quotes nothing from the request.
func (w *fuzzWorld) dispatch(t *testing.T, r *component.Router, q fuzzIQ) *xmltree.Element {
	t.Helper()
	iq := component.IQ{ID: "q1", Type: q.typ, From: jid.MustParse(q.from), To: jid.MustParse(q.to), Payload: q.payload}
	var reply *xmltree.Element
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("handler panicked on {%s}%s: %v", q.payload.Name.Space, q.payload.Name.Local, p)
			}
		}()
		reply = r.DispatchIQ(context.Background(), iq)
	}()
	switch {
	case reply == nil:
		t.Fatal("no reply")
	case !reply.Is(component.NSComponent, "iq"):
		t.Fatalf("reply is not an iq: %s", reply)
	case reply.AttrValue("id") != "q1" || reply.AttrValue("from") != iq.To.String() || reply.AttrValue("to") != iq.From.String():
		t.Fatalf("reply is not addressed back: %s", reply)
	}
	switch reply.AttrValue("type") {
	case "result":
		if len(reply.Children) > 1 {
			t.Fatalf("result with %d payloads", len(reply.Children))
		}
		// Fixture answers are small; a large one would mean amplification.
		if n, in := len(reply.String()), len(q.payload.String()); n > 64<<10+2*in {
			t.Fatalf("result of %d bytes for a %d-byte request", n, in)
		}
	case "error":
		w.checkError(t, reply)
	default:
		t.Fatalf("reply type %q", reply.AttrValue("type"))
	}
	return reply
}

func (w *fuzzWorld) checkError(t *testing.T, reply *xmltree.Element) {
	t.Helper()
	if len(reply.Children) != 1 || !reply.Children[0].Is(component.NSComponent, "error") {
		t.Fatalf("error reply must carry exactly one <error/> and nothing of the request: %s", reply)
	}
	e := reply.Children[0]
	cond := ""
	for _, c := range e.Children {
		switch {
		case c.Is(ns.Stanzas, "text"):
			if w := w.vocab.Foreign(c.Text); w != "" {
				t.Fatalf("error text %q carries %q, which no source literal spells: reflected input", c.Text, w)
			}
		case c.Name.Space == ns.Stanzas && cond == "":
			cond = c.Name.Local
		default:
			t.Fatalf("unexpected element in <error/>: %s", reply)
		}
	}
	if !allowedConditions[agentproto.Condition(cond)] {
		t.Fatalf("condition %q is not one the spec allows here: %s", cond, reply)
	}
}

// withoutFrom serializes a reply with its from attribute blanked, the only
// part that may differ between a hidden and a nonexistent addressee.
func withoutFrom(el *xmltree.Element) string {
	c := *el
	c.Attr = append(c.Attr[:0:0], el.Attr...)
	c.SetAttr("from", "")
	return c.String()
}

// FuzzDirectoryIQ sends any payload from any sender to the gateway or an
// endpoint. Besides the reply properties it checks that an endpoint hidden
// from the sender answers byte for byte like a nonexistent one.
func FuzzDirectoryIQ(f *testing.F) {
	w := newFuzzWorld(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		sel, p, ok := decodeFuzz(data)
		if !ok {
			return
		}
		n := int(sel)
		q := fuzzIQ{from: fuzzSenders[n%5], to: fuzzTargets[n/5%6], typ: [2]string{"get", "set"}[n/30%2], payload: p}
		w.dispatch(t, w.router(), q)

		// juliet cannot see secret; romeo (remote, no grants) sees nothing.
		// A fresh directory: q may have been an admin operation.
		r := w.router()
		for _, h := range []fuzzIQ{{from: juliet, to: epJID("secret")}, {from: romeo, to: epJID("weather")}} {
			h.typ, h.payload = q.typ, p
			hidden := w.dispatch(t, r, h)
			h.to = epJID("nobody")
			missing := w.dispatch(t, r, h)
			if withoutFrom(hidden) != withoutFrom(missing) {
				t.Fatalf("hidden and nonexistent endpoints answer differently:\nhidden  %s\nmissing %s", hidden, missing)
			}
		}
	})
}

// fuzzNamed fuzzes one payload kind: the root element is renamed to
// {space}local so that every exec reaches the handler.
func fuzzNamed(f *testing.F, space string, locals []string, route func(sel int) (from, to, typ string)) {
	w := newFuzzWorld(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		sel, p, ok := decodeFuzz(data)
		if !ok {
			return
		}
		p.Name = xml.Name{Space: space, Local: locals[int(sel)%len(locals)]}
		from, to, typ := route(int(sel) / len(locals))
		reply := w.dispatch(t, w.router(), fuzzIQ{from: from, to: to, typ: typ, payload: p})
		if reply.AttrValue("type") == "result" {
			checkSimpleContent(t, p)
		}
	})
}

// checkSimpleContent requires that an accepted request carried its hash
// and manifest as text only, as the XML Schema says: child elements would
// splice the value the handler reads.
func checkSimpleContent(t *testing.T, p *xmltree.Element) {
	t.Helper()
	for _, c := range p.Children {
		if (c.Is(ns.Hashes, "hash") || c.Is(ns.API, "manifest")) && len(c.Children) > 0 {
			t.Fatalf("accepted <%s/> with child elements", c.Name.Local)
		}
	}
}

func endpointRoute(sel int) (from, to, typ string) {
	targets := []string{epJID("weather"), epJID("notes"), epJID("secret"), epJID("nobody")}
	return fuzzSenders[sel%5], targets[sel/5%4], [2]string{"get", "set"}[sel/20%2]
}

func FuzzSchemaRequest(f *testing.F) {
	fuzzNamed(f, ns.API, []string{"schema-request"}, endpointRoute)
}

func FuzzManifestRequest(f *testing.F) {
	fuzzNamed(f, ns.API, []string{"manifest-request"}, endpointRoute)
}

// FuzzAdminIQ mostly asks as the administrator, so that the fuzzer reaches
// manifest validation and the directory's state changes.
func FuzzAdminIQ(f *testing.F) {
	fuzzNamed(f, ns.API, adminOps, func(sel int) (string, string, string) {
		from := adminUser
		if sel%8 == 7 {
			from = juliet
		}
		typ := "set"
		if sel/8%4 == 3 {
			typ = "get"
		}
		return from, domain, typ
	})
}

func FuzzSearchIQ(f *testing.F) {
	fuzzNamed(f, ns.Search, []string{"query"}, func(sel int) (string, string, string) {
		return fuzzSenders[sel%5], domain, [2]string{"set", "get"}[sel/5%2]
	})
}
