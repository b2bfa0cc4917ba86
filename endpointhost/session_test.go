package endpointhost

import (
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// toClient turns a component stanza (error child included) into a client
// stanza without a 'from', leaving the original untouched.
func TestToClient(t *testing.T) {
	in := component.NewIQ("error", "i1", jid.MustParse("bot@example.test"), jid.MustParse("alice@example.test/x"), nil).
		Add(agentproto.ErrItemNotFound().Element(component.NSComponent))
	out := toClient(in)
	if out.Name.Space != xmppclient.NS || out.AttrValue("from") != "" || out.AttrValue("to") != "alice@example.test/x" {
		t.Fatalf("converted %s", out)
	}
	if e := out.Child(xmppclient.NS, "error"); e == nil {
		t.Fatalf("error child not in the client namespace: %s", out)
	}
	if in.Name.Space != component.NSComponent || in.AttrValue("from") == "" {
		t.Fatalf("the original changed: %s", in)
	}
}

func TestRosterPushAcknowledged(t *testing.T) {
	acct := jid.MustParse("bot@example.test")
	push := xmltree.New(xmppclient.NS, "iq", "type", "set", "id", "r1").Add(xmltree.New("jabber:iq:roster", "query"))
	if !isRosterPush(push, acct, acct) {
		t.Fatal("a push from the own server is not recognized")
	}
	if isRosterPush(push, jid.MustParse("mallory@example.test"), acct) {
		t.Fatal("a roster set from another account is taken for a push")
	}
}
