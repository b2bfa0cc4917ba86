package directory

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// TestXMLLangFromConfigThroughProsody: with [xmpp] lang = "de-CH" in the
// config file, an error reply's <text/> carries xml:lang="de-CH" when it
// reaches a client through Prosody, and so does the stanza of a result
// holding a data form (whose titles and values inherit it).
func TestXMLLangFromConfigThroughProsody(t *testing.T) {
	t.Parallel()
	e := e2e.Prepare(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice"}})
	cfg, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	withLang := strings.Replace(string(cfg), "[xmpp]\n", "[xmpp]\nlang = \"de-CH\"\n", 1)
	if withLang == string(cfg) {
		t.Fatal("no [xmpp] section in the generated config")
	}
	if err := os.WriteFile(e.ConfigPath, []byte(withLang), 0o600); err != nil {
		t.Fatal(err)
	}
	e.StartGateway()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, conn := e.DialConn("alice")
	ep := "weather@" + e.Domain

	// A malformed version attribute: bad-request with a text.
	reply, err := conn.SendIQ(ctx, xmltree.New("jabber:client", "iq", "type", "get", "to", ep).
		Add(xmltree.New(ns.API, "manifest-request", "version", "not a version")))
	if err != nil {
		t.Fatal(err)
	}
	if c := xmppclient.StanzaErrorCondition(reply); c != "bad-request" {
		t.Fatalf("condition %q: %s", c, reply.String())
	}
	text := reply.Child("", "error").Child("urn:ietf:params:xml:ns:xmpp-stanzas", "text")
	if text == nil {
		t.Fatalf("no <text/>: %s", reply.String())
	}
	if lang, ok := text.Lang(); !ok || lang != "de-CH" {
		t.Fatalf("<text/> xml:lang %q (present %v), want de-CH: %s", lang, ok, reply.String())
	}
	if lang, _ := reply.Lang(); lang != "de-CH" {
		t.Errorf("error stanza xml:lang %q, want de-CH", lang)
	}
	t.Logf("error reply: %s", reply.String())

	// A disco#info result with the endpoint-info form.
	info, err := conn.SendIQ(ctx, xmltree.New("jabber:client", "iq", "type", "get", "to", ep).Add(xmltree.New(ns.DiscoInfo, "query")))
	if err != nil {
		t.Fatal(err)
	}
	if info.AttrValue("type") != "result" || info.Child(ns.DiscoInfo, "query").Child(ns.Data, "x") == nil {
		t.Fatalf("disco#info: %s", info.String())
	}
	if lang, _ := info.Lang(); lang != "de-CH" {
		t.Errorf("disco#info result xml:lang %q, want de-CH", lang)
	}
}
