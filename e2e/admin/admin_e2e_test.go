package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// admManifest is DefaultManifest for ep at version; description varies the
// content without changing the version when non-empty.
func admManifest(t *testing.T, ep, version, description string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(e2e.DefaultManifest(ep)), &m); err != nil {
		t.Fatal(err)
	}
	agent := m["agent"].(map[string]any)
	agent["version"] = version
	if description != "" {
		agent["description"] = description
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// admListed reports whether ep is in the directory as c sees it.
func admListed(ctx context.Context, c *agentclient.Client, gw jid.JID, ep string) (bool, error) {
	items, err := c.AllItems(ctx, gw, ns.Directory, 50)
	if err != nil {
		return false, err
	}
	for _, it := range items {
		if it.JID == ep {
			return true, nil
		}
	}
	return false, nil
}

// admWaitVisible polls until the endpoint is listed and its disco#info
// answers (visible) or it is not listed and its disco#info is
// item-not-found (!visible), and returns how long that took from since.
func admWaitVisible(t *testing.T, ctx context.Context, c *agentclient.Client, e *e2e.Env, ep string, visible bool, since time.Time) time.Duration {
	t.Helper()
	deadline := time.Now().Add(testkit.MinWait)
	for {
		listed, err := admListed(ctx, c, e.GatewayJID(), ep)
		if err != nil {
			t.Fatalf("directory listing: %v", err)
		}
		_, infoErr := c.Endpoint(ctx, jid.MustParse(ep))
		if visible && listed && infoErr == nil {
			return time.Since(since)
		}
		if !visible && !listed && e2e.ErrCondition(infoErr) == "item-not-found" {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: visible=%v not reached within %v (listed %v, disco#info error %v)", ep, visible, testkit.MinWait, listed, infoErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// admNoteContract logs a change that took longer than the operator
// contract's one second to reach a client. Timings are not assertions
// here (a loaded machine would make them flaky); the functional bound is
// admWaitVisible's.
func admNoteContract(t *testing.T, op string, lat time.Duration) {
	if lat > time.Second {
		t.Logf("NOTE: %s reached the client after %v, beyond the one second the operator contract names", op, lat.Round(time.Millisecond))
	}
}

var admHashRE = regexp.MustCompile(`sha-256 (\S+)`)

// admCLI runs `agentgw admin SUB --config C ARGS...`.
func admCLI(e *e2e.Env, want int, sub string, args ...string) string {
	e.T.Helper()
	return e.Agentgw(want, append([]string{"admin", sub, "--config", e.ConfigPath}, args...)...)
}

// admRunEcho runs echo on ep pinned to version and waits until it completes.
func admRunEcho(t *testing.T, ctx context.Context, c *agentclient.Client, ep jid.JID, version string) string {
	t.Helper()
	var p *agentclient.Pinned
	testkit.WaitFor(t, 10*time.Second, ep.String()+" version "+version+" active", func() bool {
		var err error
		p, err = c.Pin(ctx, ep, "echo")
		return err == nil && p.Manifest.Version == version
	})
	out, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"hi"}`), agentclient.CallOptions{})
	if err != nil {
		t.Fatalf("echo on %s %s: %v", ep, version, err)
	}
	if out.State != "completed" {
		t.Fatalf("echo on %s %s ended %s: %s", ep, version, out.State, out.Payload)
	}
	return out.Accepted.TaskID
}

// TestAdminE2ECLI drives `agentgw admin` against the store of a running
// in-process gateway and checks what a client sees through Prosody.
func TestAdminE2ECLI(t *testing.T) {
	t.Parallel()
	// Polling visibility would otherwise hit the discovery rate limit.
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice"}, TOML: e2e.DfRates})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := e.Dial("alice")
	fresh := "fresh@" + e.Domain
	weather := "weather@" + e.Domain
	write := func(name, body string) string {
		p := filepath.Join(e.Dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// register --activate: the running gateway lists it within a second.
	freshPath := write("fresh.json", admManifest(t, fresh, "1.0.0", ""))
	e2e.Binary(t) // build outside the timed call
	began := time.Now()
	out := admCLI(e, 0, "register", "--activate", freshPath)
	cliTook := time.Since(began)
	m := admHashRE.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "registered "+fresh+" version 1.0.0") || !strings.Contains(out, "activated "+fresh+" version 1.0.0") {
		t.Fatalf("register --activate output:\n%s", out)
	}
	freshHash := m[1]
	sinceCLI := time.Now()
	lat := admWaitVisible(t, ctx, c, e, fresh, true, sinceCLI)
	t.Logf("register --activate: the CLI took %v; the client saw the endpoint in the directory %v after the CLI returned", cliTook.Round(time.Millisecond), lat.Round(time.Millisecond))
	admNoteContract(t, "register --activate", lat)
	// fresh has no backend, so it cannot be pinned for a call; its
	// manifest is retrievable.
	if fm, err := c.GetManifest(ctx, jid.MustParse(fresh), ""); err != nil || fm.Hash != freshHash || fm.Version != "1.0.0" {
		t.Fatalf("manifest of fresh: %+v %v, want hash %s", fm, err, freshHash)
	}

	out = admCLI(e, 0, "status", fresh)
	if !strings.Contains(out, fresh+" active version 1.0.0") || !regexp.MustCompile(`1\.0\.0\s+`+regexp.QuoteMeta(freshHash)+`\s+true\s+false`).MatchString(out) {
		t.Fatalf("status output:\n%s", out)
	}

	// deactivate: item-not-found within a second.
	out = admCLI(e, 0, "deactivate", fresh)
	sinceCLI = time.Now()
	lat = admWaitVisible(t, ctx, c, e, fresh, false, sinceCLI)
	t.Logf("deactivate: the client got item-not-found %v after the CLI returned (%s)", lat.Round(time.Millisecond), strings.TrimSpace(out))
	admNoteContract(t, "deactivate", lat)
	if out := admCLI(e, 0, "status", fresh); !strings.Contains(out, "active version (none: deactivated)") || !regexp.MustCompile(`1\.0\.0\s+\S+\s+false\s+true`).MatchString(out) {
		t.Fatalf("status after deactivate:\n%s", out)
	}

	// activate --hash: a wrong hash is refused, the right one restores it.
	out = admCLI(e, 1, "activate", "--hash", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", fresh, "1.0.0")
	if !strings.Contains(out, "the hash does not match") {
		t.Fatalf("activate with a wrong hash:\n%s", out)
	}
	admCLI(e, 0, "activate", "--hash", freshHash, fresh, "1.0.0")
	lat = admWaitVisible(t, ctx, c, e, fresh, true, time.Now())
	t.Logf("activate --hash: visible again %v after the CLI returned", lat.Round(time.Millisecond))
	admNoteContract(t, "activate", lat)

	// remove-version is refused while the version is active.
	out = admCLI(e, 1, "remove-version", fresh, "1.0.0")
	if !strings.Contains(out, "the version is active") {
		t.Fatalf("remove-version of the active version:\n%s", out)
	}
	// An inactive, unreferenced version is removable, and its tombstone
	// refuses different content under the same version.
	extra := write("fresh-1.1.0.json", admManifest(t, fresh, "1.1.0", "First content."))
	admCLI(e, 0, "register", extra)
	if out := admCLI(e, 0, "remove-version", fresh, "1.1.0"); !strings.Contains(out, "removed "+fresh+" version 1.1.0") {
		t.Fatalf("remove-version 1.1.0:\n%s", out)
	}
	changed := write("fresh-1.1.0b.json", admManifest(t, fresh, "1.1.0", "Other content."))
	if out := admCLI(e, 1, "register", changed); !strings.Contains(out, "already registered with different content") {
		t.Fatalf("re-registering a removed version with other content:\n%s", out)
	}
	if out := admCLI(e, 0, "register", extra); !strings.Contains(out, "registered "+fresh+" version 1.1.0") {
		t.Fatalf("restoring identical content of a removed version:\n%s", out)
	}
	admCLI(e, 0, "remove-version", fresh, "1.1.0")

	// A version a retained task references cannot be removed, nor can its
	// endpoint.
	weatherV1, ok := e.Gateway.Registry.Active(weather)
	if !ok {
		t.Fatal("weather has no active version")
	}
	v2 := write("weather-2.json", admManifest(t, weather, "2.0.0", ""))
	admCLI(e, 0, "register", "--activate", v2)
	taskID := admRunEcho(t, ctx, c, e.Endpoint("weather"), "2.0.0")
	admCLI(e, 0, "activate", "--hash", weatherV1.Hash, weather, weatherV1.Version)
	out = admCLI(e, 1, "remove-version", weather, "2.0.0")
	if !strings.Contains(out, "retained tasks still reference this version") {
		t.Fatalf("remove-version of a referenced version:\n%s", out)
	}
	if out := admCLI(e, 0, "status", weather); !regexp.MustCompile(`2\.0\.0\s+\S+\s+false\s+false`).MatchString(out) {
		t.Fatalf("status of weather: 2.0.0 should be inactive and not removable:\n%s", out)
	}
	if out := admCLI(e, 1, "remove-endpoint", weather); !strings.Contains(out, "retained tasks still reference") {
		t.Fatalf("remove-endpoint of a referenced endpoint:\n%s", out)
	}
	if st, err := c.State(ctx, e.Endpoint("weather"), taskID); err != nil || st.APIVersion != "2.0.0" {
		t.Fatalf("the referencing task after the refusals: %+v %v", st, err)
	}

	// remove-endpoint: gone for the client within a second, and for status.
	out = admCLI(e, 0, "remove-endpoint", fresh)
	lat = admWaitVisible(t, ctx, c, e, fresh, false, time.Now())
	t.Logf("remove-endpoint: item-not-found %v after the CLI returned (%s)", lat.Round(time.Millisecond), strings.TrimSpace(out))
	admNoteContract(t, "remove-endpoint", lat)
	if out := admCLI(e, 1, "status", fresh); !strings.Contains(out, "no such endpoint or version") {
		t.Fatalf("status after remove-endpoint:\n%s", out)
	}

	// Usage mistakes exit 2.
	for _, args := range [][]string{
		{"admin"},
		{"admin", "bogus", "--config", e.ConfigPath},
		{"admin", "activate", "--config", e.ConfigPath, fresh, "1.0.0"},
		{"admin", "status", "--config", e.ConfigPath, "not a jid"},
		{"admin", "status", "--config", e.ConfigPath, fresh, "extra"},
	} {
		out := e.Agentgw(2, args...)
		if !strings.Contains(out, "Usage") && !strings.Contains(out, "--help") {
			t.Errorf("agentgw %v: no usage hint:\n%s", args, out)
		}
	}
}

// admIQ sends an admin operation to the gateway and returns the reply.
func admIQ(t *testing.T, ctx context.Context, conn *xmppclient.Client, gw, typ string, payload *xmltree.Element) *xmltree.Element {
	t.Helper()
	iq := xmltree.New("jabber:client", "iq", "type", typ, "to", gw).Add(payload)
	reply, err := conn.SendIQ(ctx, iq)
	if err != nil {
		t.Fatalf("admin %s: %v", payload.Name.Local, err)
	}
	return reply
}

func admHash(h string) *xmltree.Element {
	return xmltree.New(ns.Hashes, "hash", "algo", ns.HashAlgo).WithText(h)
}

func admRegister(manifest string) *xmltree.Element {
	return xmltree.New(ns.API, "register").Add(xmltree.New(ns.API, "manifest", "media-type", ns.MediaJSON).WithText(manifest))
}

// admResult checks that reply is a result whose payload is want, and
// returns the payload.
func admResult(t *testing.T, reply *xmltree.Element, want string) *xmltree.Element {
	t.Helper()
	if reply.AttrValue("type") != "result" || len(reply.Children) != 1 || !reply.Children[0].Is(ns.API, want) {
		t.Fatalf("want a result with <%s/>, got %s", want, reply.String())
	}
	return reply.Children[0]
}

func admCond(t *testing.T, reply *xmltree.Element, want string) {
	t.Helper()
	if got := xmppclient.StanzaErrorCondition(reply); got != want {
		t.Fatalf("want error %s, got %s", want, reply.String())
	}
}

// TestAdminE2EIQ runs the Administrative Provisioning IQs of the spec as an
// administrator through Prosody, and checks that a non-administrator gets
// forbidden for each.
func TestAdminE2EIQ(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice", "admin"}, Admins: []string{"admin"}, TOML: e2e.DfRates})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, aconn := e.DialConn("admin")
	c, alice := e.DialConn("alice")
	gw := e.Domain
	fresh := "fresh@" + e.Domain
	weather := "weather@" + e.Domain

	// register: the hash is SHA-256 of the RFC 8785 form; again is a no-op.
	manifest := admManifest(t, fresh, "1.0.0", "")
	canon, _, err := ijson.Canonicalize([]byte(manifest), ijson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	wantHash := agentclient.HashOf(canon)
	for i := 0; i < 2; i++ {
		reg := admResult(t, admIQ(t, ctx, aconn, gw, "set", admRegister(manifest)), "registered")
		h := reg.Child(ns.Hashes, "hash")
		if reg.AttrValue("jid") != fresh || reg.AttrValue("version") != "1.0.0" || h == nil || h.AttrValue("algo") != ns.HashAlgo || h.Text != wantHash {
			t.Fatalf("registered = %s, want hash %s", reg.String(), wantHash)
		}
	}
	// Registered, not active: not visible to the client.
	if listed, err := admListed(ctx, c, e.GatewayJID(), fresh); err != nil || listed {
		t.Fatalf("registered but inactive endpoint listed=%v err=%v", listed, err)
	}
	status := func(ep string) *xmltree.Element {
		t.Helper()
		return admResult(t, admIQ(t, ctx, aconn, gw, "get", xmltree.New(ns.API, "registration-status", "jid", ep)), "registration")
	}
	versionOf := func(reg *xmltree.Element, v string) *xmltree.Element {
		for _, ch := range reg.ChildrenNamed(ns.API, "version") {
			if ch.AttrValue("id") == v {
				return ch
			}
		}
		t.Fatalf("registration lacks version %s: %s", v, reg.String())
		return nil
	}
	if v := versionOf(status(fresh), "1.0.0"); v.AttrValue("active") != "false" || v.AttrValue("removable") != "true" || v.Child(ns.Hashes, "hash").Text != wantHash {
		t.Fatalf("status before activation: %s", v.String())
	}

	activate := func(ep, version, hash string) *xmltree.Element {
		return admIQ(t, ctx, aconn, gw, "set", xmltree.New(ns.API, "activate", "jid", ep, "version", version).Add(admHash(hash)))
	}
	admCond(t, activate(fresh, "1.0.0", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="), "conflict")
	admCond(t, activate(fresh, "9.9.9", wantHash), "item-not-found")
	act := admResult(t, activate(fresh, "1.0.0", wantHash), "active")
	if act.AttrValue("jid") != fresh || act.AttrValue("version") != "1.0.0" {
		t.Fatalf("active = %s", act.String())
	}
	lat := admWaitVisible(t, ctx, c, e, fresh, true, time.Now())
	t.Logf("activate IQ: visible to the client %v after the result", lat.Round(time.Millisecond))
	if v := versionOf(status(fresh), "1.0.0"); v.AttrValue("active") != "true" || v.AttrValue("removable") != "false" {
		t.Fatalf("status after activation: %s", v.String())
	}

	admResult(t, admIQ(t, ctx, aconn, gw, "set", xmltree.New(ns.API, "deactivate", "jid", fresh)), "deactivated")
	lat = admWaitVisible(t, ctx, c, e, fresh, false, time.Now())
	t.Logf("deactivate IQ: item-not-found for the client %v after the result", lat.Round(time.Millisecond))
	admResult(t, activate(fresh, "1.0.0", wantHash), "active")
	admWaitVisible(t, ctx, c, e, fresh, true, time.Now())

	removeVersion := func(ep, v string) *xmltree.Element {
		return admIQ(t, ctx, aconn, gw, "set", xmltree.New(ns.API, "remove-version", "jid", ep, "version", v))
	}
	admCond(t, removeVersion(fresh, "1.0.0"), "conflict") // active

	// Referenced by a retained task.
	wv1, ok := e.Gateway.Registry.Active(weather)
	if !ok {
		t.Fatal("weather has no active version")
	}
	reg := admResult(t, admIQ(t, ctx, aconn, gw, "set", admRegister(admManifest(t, weather, "2.0.0", ""))), "registered")
	admResult(t, activate(weather, "2.0.0", reg.Child(ns.Hashes, "hash").Text), "active")
	admRunEcho(t, ctx, c, e.Endpoint("weather"), "2.0.0")
	admResult(t, activate(weather, wv1.Version, wv1.Hash), "active")
	admCond(t, removeVersion(weather, "2.0.0"), "conflict")
	if v := versionOf(status(weather), "2.0.0"); v.AttrValue("active") != "false" || v.AttrValue("removable") != "false" {
		t.Fatalf("status of the referenced version: %s", v.String())
	}
	admCond(t, admIQ(t, ctx, aconn, gw, "set", xmltree.New(ns.API, "remove-endpoint", "jid", weather)), "conflict")

	// An inactive, unreferenced version goes; its tombstone holds.
	admResult(t, admIQ(t, ctx, aconn, gw, "set", admRegister(admManifest(t, fresh, "1.1.0", "First content."))), "registered")
	rm := admResult(t, removeVersion(fresh, "1.1.0"), "removed")
	if rm.AttrValue("jid") != fresh || rm.AttrValue("version") != "1.1.0" {
		t.Fatalf("removed = %s", rm.String())
	}
	admCond(t, admIQ(t, ctx, aconn, gw, "set", admRegister(admManifest(t, fresh, "1.1.0", "Other content."))), "conflict")
	admCond(t, removeVersion(fresh, "1.1.0"), "item-not-found")

	// Malformed operations.
	admCond(t, admIQ(t, ctx, aconn, gw, "set", xmltree.New(ns.API, "deactivate")), "bad-request")
	admCond(t, admIQ(t, ctx, aconn, gw, "set", xmltree.New(ns.API, "remove-version", "jid", fresh, "version", "not a version!")), "bad-request")
	admCond(t, admIQ(t, ctx, aconn, gw, "get", xmltree.New(ns.API, "deactivate", "jid", fresh)), "bad-request")

	// A non-administrator is refused every operation, before anything
	// about the endpoint is looked at.
	ops := []*xmltree.Element{
		admRegister(admManifest(t, "mallory@"+e.Domain, "1.0.0", "")),
		xmltree.New(ns.API, "activate", "jid", fresh, "version", "1.0.0").Add(admHash(wantHash)),
		xmltree.New(ns.API, "deactivate", "jid", fresh),
		xmltree.New(ns.API, "registration-status", "jid", fresh),
		xmltree.New(ns.API, "remove-version", "jid", fresh, "version", "1.0.0"),
		xmltree.New(ns.API, "remove-endpoint", "jid", fresh),
		xmltree.New(ns.API, "registration-status", "jid", "nobody@"+e.Domain),
	}
	var forbidden []string
	for _, op := range ops {
		typ := "set"
		if op.Name.Local == "registration-status" {
			typ = "get"
		}
		reply := admIQ(t, ctx, alice, gw, typ, op)
		admCond(t, reply, "forbidden")
		forbidden = append(forbidden, op.Name.Local)
	}
	t.Logf("non-admin alice got forbidden for: %s", strings.Join(forbidden, ", "))
	if _, err := c.Endpoint(ctx, jid.MustParse(fresh)); err != nil {
		t.Fatalf("fresh after the non-admin attempts: %v", err)
	}

	// remove-endpoint.
	rm = admResult(t, admIQ(t, ctx, aconn, gw, "set", xmltree.New(ns.API, "remove-endpoint", "jid", fresh)), "removed")
	if rm.AttrValue("jid") != fresh || rm.AttrValue("version") != "" {
		t.Fatalf("removed = %s", rm.String())
	}
	lat = admWaitVisible(t, ctx, c, e, fresh, false, time.Now())
	t.Logf("remove-endpoint IQ: item-not-found for the client %v after the result", lat.Round(time.Millisecond))
	admCond(t, admIQ(t, ctx, aconn, gw, "get", xmltree.New(ns.API, "registration-status", "jid", fresh)), "item-not-found")
}

// admBad is one manifest the registry must refuse.
type admBad struct {
	name, doc string
	viaIQ     bool // false: too large for Prosody's stanza limit
}

// admBadManifests builds the hostile manifests for endpoint ep, each
// carrying marker where an error message could echo it.
func admBadManifests(ep, marker string) []admBad {
	agent := func(extra string) string {
		return `{"jid":"` + ep + `","name":"bad","version":"1.0.0","description":"` + marker + `"` + extra + `}`
	}
	base := func(agentJSON, tools, extra string) string {
		return `{"manifestSpecVersion":"0","agent":` + agentJSON + `,"tools":` + tools + extra + `}`
	}
	echo := func(schema string) string {
		return `[{"name":"echo","description":"x","inputSchema":` + schema + `}]`
	}
	big := func(n int) string {
		return base(agent(""), "[]", `,"x":"`+marker+strings.Repeat("a", n)+`"`)
	}
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	return []admBad{
		{"duplicate keys", base(`{"jid":"`+ep+`","name":"`+marker+`","name":"`+marker+`2","version":"1.0.0"}`, "[]", ""), true},
		{"lone surrogate", base(agent(`,"title":"`+marker+`\ud800"`), "[]", ""), true},
		{"number 1e400", base(agent(""), echo(`{"type":"object","properties":{"`+marker+`":{"type":"number","maximum":1e400}}}`), ""), true},
		{"1.5 MB document", big(3 << 19), true},
		{"3 MB document", big(3 << 20), true},
		{"10 MB document", big(10 << 20), false},
		{"10000-deep nesting", base(agent(""), "[]", `,"`+marker+`":`+deep), true},
		{"5000-deep nesting", base(agent(""), "[]", `,"`+marker+`":`+deep[:5000]+deep[15000:]), true},
		{"remote $ref", base(agent(""), echo(`{"$ref":"https://`+marker+`.example/schema.json"}`), ""), true},
		{"unknown top-level member", base(agent(""), "[]", `,"`+marker+`":true`), true},
		{"bad version string", base(`{"jid":"`+ep+`","name":"bad","version":"`+marker+` 1.0!"}`, "[]", ""), true},
		{"http homepage", base(agent(`,"homepage":"http://`+marker+`.example/"`), "[]", ""), true},
	}
}

// TestAdminE2EBadManifests sends hostile manifests through the admin IQ
// register and through `agentgw admin register`: each is refused with a
// fixed sentence that does not echo the document, nothing is stored, and
// the gateway keeps serving.
func TestAdminE2EBadManifests(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice", "admin"}, Admins: []string{"admin"}, TOML: e2e.DfRates})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const marker = "MARKERq7zx"
	bad := "bad@" + e.Domain
	_, aconn := e.DialConn("admin")
	c := e.Dial("alice")
	gen := e.Gateway.Registry.Generation()

	type row struct {
		name, iq, cli string
		took          time.Duration
	}
	var rows []row
	for i, bc := range admBadManifests(bad, marker) {
		r := row{name: bc.name}
		caseStart := time.Now()
		// Admin IQ.
		if bc.viaIQ {
			iq := xmltree.New("jabber:client", "iq", "type", "set", "to", e.Domain).Add(admRegister(bc.doc))
			reply, err := aconn.SendIQ(ctx, iq)
			switch {
			case err != nil:
				r.iq = "no reply: " + err.Error()
				t.Errorf("%s via IQ: %v", bc.name, err)
			default:
				cond := xmppclient.StanzaErrorCondition(reply)
				text := ""
				if ee := reply.Child("", "error"); ee != nil {
					if tx := ee.Child("urn:ietf:params:xml:ns:xmpp-stanzas", "text"); tx != nil {
						text = tx.Text
					}
				}
				r.iq = cond + ": " + text
				if cond == "" {
					t.Errorf("%s via IQ was not refused: %s", bc.name, e2e.Tail(reply.String(), 300))
				} else if cond != "bad-request" && cond != "not-acceptable" && cond != "resource-constraint" && cond != "policy-violation" {
					t.Errorf("%s via IQ: unexpected condition %s", bc.name, cond)
				}
				if s := reply.String(); strings.Contains(s, marker) {
					t.Errorf("%s via IQ: the error reply echoes the manifest: %s", bc.name, e2e.Tail(s, 300))
				}
			}
		} else {
			// Prosody's stanza limit (4 MiB here) ends the sender's
			// stream before the gateway sees anything.
			_, conn := e.DialConn("admin")
			iq := xmltree.New("jabber:client", "iq", "type", "set", "to", e.Domain).Add(admRegister(bc.doc))
			reply, err := conn.SendIQ(ctx, iq)
			switch {
			case err != nil:
				r.iq = "stream closed by Prosody (" + admStreamEnd(conn, err) + ")"
			default:
				r.iq = "reply " + xmppclient.StanzaErrorCondition(reply)
				if strings.Contains(reply.String(), marker) {
					t.Errorf("%s via IQ: reply echoes the manifest", bc.name)
				}
			}
		}
		// agentgw admin register FILE.
		path := filepath.Join(e.Dir, fmt.Sprintf("bad-%d.json", i))
		if err := os.WriteFile(path, []byte(bc.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		out := strings.TrimSpace(admCLI(e, 1, "register", path))
		r.cli = out
		if strings.Contains(out, marker) {
			t.Errorf("%s via the CLI: the message echoes the manifest: %s", bc.name, e2e.Tail(out, 300))
		}
		if !strings.HasPrefix(out, "agentgw admin: ") || strings.Count(out, "\n") > 0 {
			t.Errorf("%s via the CLI: not one clear line: %q", bc.name, e2e.Tail(out, 300))
		}
		r.took = time.Since(caseStart)
		rows = append(rows, r)

		// Nothing was stored, and the gateway still serves.
		admCond(t, admIQ(t, ctx, aconn, e.Domain, "get", xmltree.New(ns.API, "registration-status", "jid", bad)), "item-not-found")
		if out := admCLI(e, 1, "status", bad); !strings.Contains(out, "no such endpoint") {
			t.Errorf("%s: status shows something:\n%s", bc.name, out)
		}
		if res, err := c.Call(ctx, e.Endpoint("weather"), "echo", json.RawMessage(`{"message":"still here"}`), agentclient.CallOptions{}); err != nil || res.State != "completed" {
			t.Fatalf("after %s: echo %+v %v", bc.name, res, err)
		}
	}
	if g := e.Gateway.Registry.Generation(); g != gen {
		t.Errorf("the directory generation moved from %d to %d: something was stored", gen, g)
	}
	select {
	case err := <-e.Done:
		t.Fatalf("the gateway stopped: %v", err)
	default:
	}
	var b strings.Builder
	fmt.Fprintf(&b, "bad manifests (marker %s never echoed):\n", marker)
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-26s | %6v | IQ: %-95s | CLI: %s\n", r.name, r.took.Round(time.Millisecond), r.iq, r.cli)
	}
	t.Log(b.String())
}

// admStreamEnd describes why conn's stream ended.
func admStreamEnd(conn *xmppclient.Client, err error) string {
	select {
	case <-conn.Done():
		if cerr := conn.Err(); cerr != nil {
			return e2e.Tail(cerr.Error(), 200)
		}
		return "closed"
	case <-time.After(2 * time.Second):
	}
	return e2e.Tail(err.Error(), 200)
}

// TestAdminE2EForeignDomain: a manifest whose agent.jid is outside the
// component domain is refused by the admin <register/> IQ (forbidden, the
// spec's error for registration for another JID) and by `agentgw admin
// register`, and nothing is stored: the server routes only the component
// domain to the gateway, so such an endpoint would be listed with nobody
// answering for it.
func TestAdminE2EForeignDomain(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"admin"}, Admins: []string{"admin"}, TOML: e2e.DfRates})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, aconn := e.DialConn("admin")
	gw := e.Domain
	// The user domain (on the same server) and an unrelated one.
	for _, ep := range []string{"stray@" + e.Server.Domain, "stray@elsewhere.test"} {
		reply := admIQ(t, ctx, aconn, gw, "set", admRegister(admManifest(t, ep, "1.0.0", "")))
		admCond(t, reply, "forbidden")
		if !strings.Contains(reply.String(), "outside the domain this gateway answers for") {
			t.Errorf("IQ register %s: no explaining text: %s", ep, reply.String())
		}
		admCond(t, admIQ(t, ctx, aconn, gw, "get", xmltree.New(ns.API, "registration-status", "jid", ep)), "item-not-found")

		path := filepath.Join(e.Dir, "stray.json")
		if err := os.WriteFile(path, []byte(admManifest(t, ep, "1.0.1", "")), 0o644); err != nil {
			t.Fatal(err)
		}
		out := admCLI(e, 1, "register", "--activate", path)
		if want := fmt.Sprintf("%s is not below %s", ep, e.Domain); !strings.Contains(out, want) {
			t.Errorf("CLI register %s: output lacks %q:\n%s", ep, want, out)
		}
		if out := admCLI(e, 1, "status", ep); !strings.Contains(out, "no such endpoint") {
			t.Errorf("CLI status %s after the refused register: %s", ep, out)
		}
	}
	// A manifest below the component domain still registers.
	admResult(t, admIQ(t, ctx, aconn, gw, "set", admRegister(admManifest(t, "fresh@"+e.Domain, "1.0.0", ""))), "registered")
}
