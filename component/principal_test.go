package component

import (
	"context"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/xep/xmltree"
)

// A principal assertion is honoured from a trusted front only: the
// handler then sees the principal as requester and the reply goes to the
// front; from anyone else it is forbidden with the same bytes whatever
// principal is claimed, and the handler never runs.
func TestPrincipalAssertion(t *testing.T) {
	t.Parallel()
	domain := jid.MustParse("agents.example.test")
	r := NewRouter(domain, visibilityResolver{"open@agents.example.test": true}, nil)
	var seen []IQ
	r.HandleEndpointIQ(IQGet, "urn:x", "op", AccessInvocable, IQHandlerFunc(func(_ context.Context, iq IQ) (*xmltree.Element, error) {
		seen = append(seen, iq)
		return xmltree.New("urn:x", "ok"), nil
	}))
	ask := func(from string, claims ...string) *xmltree.Element {
		p := xmltree.New("urn:x", "op")
		p.Add(xmltree.New("urn:x", "arg"))
		for _, c := range claims {
			p.Add(xmltree.New(NSPrincipal, "on-behalf-of", "jid", c))
		}
		iq := IQ{ID: "1", Type: "get", From: jid.MustParse(from), To: jid.MustParse("open@agents.example.test"), Payload: p}
		return r.DispatchIQ(context.Background(), iq)
	}

	// No check installed: refused.
	if got := ask("front@example.test/r", "alice@example.test"); !contains(got.String(), "forbidden") || len(seen) != 0 {
		t.Fatalf("no trusted fronts: %s (handler ran %d times)", got, len(seen))
	}
	r.SetTrustedFronts(func(f jid.JID) bool { return f.String() == "front@example.test" }, func(p jid.JID) bool { return p.String() != "admin@example.test" })
	var limited []string
	r.SetLimiter(func(requester jid.JID, _, _ string) bool {
		limited = append(limited, requester.String())
		return true
	})

	got := ask("front@example.test/r", "alice@example.test")
	if got.AttrValue("type") != "result" || got.AttrValue("to") != "front@example.test/r" || len(seen) != 1 {
		t.Fatalf("trusted front: %s", got)
	}
	if len(limited) != 1 || limited[0] != "alice@example.test" {
		t.Fatalf("the rate limit counted %v, want the principal", limited)
	}
	iq := seen[0]
	if iq.From.String() != "alice@example.test" || iq.Via.String() != "front@example.test/r" || iq.ReplyTo().String() != "front@example.test/r" {
		t.Fatalf("handler saw from=%s via=%s", iq.From, iq.Via)
	}
	if len(iq.Payload.Children) != 1 || iq.Payload.Children[0].Name.Local != "arg" {
		t.Fatalf("the handler's payload still carries the assertion: %s", iq.Payload)
	}

	a, b := ask("mallory@example.test/r", "alice@example.test"), ask("mallory@example.test/r", "bob@example.test")
	if a.String() != b.String() || !contains(a.String(), "forbidden") || contains(a.String(), "alice") || len(seen) != 1 {
		t.Fatalf("untrusted sender: %s / %s (handler ran %d times)", a, b, len(seen))
	}
	for _, bad := range [][]string{{"alice@example.test/res"}, {"alice@example.test", "bob@example.test"}, {"@@"}} {
		if got := ask("front@example.test/r", bad...); !contains(got.String(), "bad-request") || len(seen) != 1 {
			t.Fatalf("assertion %v: %s", bad, got)
		}
	}
	if got := ask("front@example.test/r", "admin@example.test"); !contains(got.String(), "forbidden") || len(seen) != 1 {
		t.Fatalf("asserting a principal that may not be asserted: %s", got)
	}
	// Without an assertion the sender is the requester.
	ask("front@example.test/r")
	if len(seen) != 2 || seen[1].From.String() != "front@example.test/r" || seen[1].Via.String() != "" {
		t.Fatalf("plain request: %+v", seen[len(seen)-1])
	}
}
