package component

import (
	"context"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// visibilityResolver: every listed endpoint exists; the value says whether
// it is visible.
type visibilityResolver map[string]bool

func (r visibilityResolver) Resolve(_, ep jid.JID) (bool, bool) {
	v, ok := r[ep.String()]
	return ok, ok && v
}

// AccessInvocable routes reach the handler only for requesters who may see
// the endpoint or pass the invocation check; the check runs for
// nonexistent endpoints too, and without one the route fails closed.
func TestAccessInvocable(t *testing.T) {
	t.Parallel()
	domain := jid.MustParse("agents.example.test")
	res := visibilityResolver{"open@agents.example.test": true, "hidden@agents.example.test": false}
	newRouter := func() *Router {
		r := NewRouter(domain, res, nil)
		r.HandleEndpointIQ(IQGet, "urn:x", "op", AccessInvocable, IQHandlerFunc(func(context.Context, IQ) (*xmltree.Element, error) {
			return nil, agentproto.ErrBadRequest("precise")
		}))
		return r
	}
	ask := func(r *Router, to string) string {
		iq := IQ{ID: "1", Type: "get", From: jid.MustParse("eve@example.test/x"), To: jid.MustParse(to), Payload: xmltree.New("urn:x", "op")}
		reply := r.DispatchIQ(context.Background(), iq)
		reply.SetAttr("from", "")
		return reply.String()
	}

	r := newRouter()
	if got := ask(r, "hidden@agents.example.test"); !contains(got, "item-not-found") {
		t.Fatalf("no check installed: hidden endpoint answered %s", got)
	}
	if got := ask(r, "open@agents.example.test"); !contains(got, "precise") {
		t.Fatalf("visible endpoint: %s, want the handler's error", got)
	}

	var asked []string
	allow := map[string]bool{}
	r.SetInvocationCheck(func(_ context.Context, _, ep jid.JID) bool {
		asked = append(asked, ep.String())
		return allow[ep.String()]
	})
	hidden, missing := ask(r, "hidden@agents.example.test"), ask(r, "nobody@agents.example.test")
	if hidden != missing || !contains(hidden, "item-not-found") {
		t.Fatalf("denied hidden and nonexistent differ:\n%s\n%s", hidden, missing)
	}
	if len(asked) != 2 || asked[1] != "nobody@agents.example.test" {
		t.Fatalf("check ran for %v, want both the hidden and the nonexistent endpoint", asked)
	}
	allow["hidden@agents.example.test"], allow["nobody@agents.example.test"] = true, true
	if got := ask(r, "hidden@agents.example.test"); !contains(got, "precise") {
		t.Fatalf("invocable hidden endpoint: %s, want the handler's error", got)
	}
	if got := ask(r, "nobody@agents.example.test"); got != missing {
		t.Fatalf("a passing check made a nonexistent endpoint answer %s", got)
	}
}
