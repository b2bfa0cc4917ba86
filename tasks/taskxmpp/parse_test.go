package taskxmpp

import (
	"strings"
	"testing"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// TestParseInvokeDelegation: agentgw's delegation extension sets the depth
// and enters the replay fingerprint's extensions; anything but one empty
// element with a depth from 1 to 1000 is a bad request.
func TestParseInvokeDelegation(t *testing.T) {
	invoke := func(extra ...*xmltree.Element) *xmltree.Element {
		el := xmltree.New(ns.Task, "invoke", "api-version", "1.0.0", "request-id", "req-aaaaaaaaaaaaaaaaaaaaaaaa", "tool", "echo")
		el.Add(xmltree.New(ns.Task, "manifest-hash").Add(HashElement(strings.Repeat("A", 43) + "=")))
		el.Add(xmltree.New(ns.Task, "arguments", "media-type", ns.MediaJSON).WithText("{}"))
		for _, x := range extra {
			el.Add(x)
		}
		return el
	}
	deleg := func(depth string) *xmltree.Element { return xmltree.New(ns.Delegation, "delegation", "depth", depth) }

	inv, err := ParseInvoke(invoke())
	if err != nil || inv.DelegationDepth != 0 || len(inv.Extensions) != 0 {
		t.Fatalf("no extension: depth %d, extensions %v, %v", inv.DelegationDepth, inv.Extensions, err)
	}
	inv, err = ParseInvoke(invoke(deleg("3")))
	if err != nil || inv.DelegationDepth != 3 || inv.Extensions[ns.Delegation+"#depth"] != "3" {
		t.Fatalf("depth 3: depth %d, extensions %v, %v", inv.DelegationDepth, inv.Extensions, err)
	}
	for _, bad := range []*xmltree.Element{
		deleg("0"), deleg("-1"), deleg("1001"), deleg("x"), deleg(""), deleg("+2"),
		xmltree.New(ns.Delegation, "delegation"),
		deleg("2").Add(xmltree.New(ns.Delegation, "x")),
	} {
		if _, err := ParseInvoke(invoke(bad)); err == nil || !strings.Contains(err.Error(), "delegation") {
			t.Errorf("%s: %v, want a bad request about delegation", bad, err)
		}
	}
	if _, err := ParseInvoke(invoke(deleg("1"), deleg("1"))); err == nil {
		t.Errorf("two delegation elements accepted")
	}
}
