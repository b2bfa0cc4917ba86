package component

import (
	"context"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/xep/xmltree"
)

// A routed payload sent with a type it is not registered for gets the one
// wrong-type answer, but only after the access rule: to a requester who may
// neither see nor invoke the endpoint it looks like a nonexistent one.
func TestRouterWrongIQType(t *testing.T) {
	t.Parallel()
	domain := jid.MustParse("agents.example.test")
	r := NewRouter(domain, visibilityResolver{"open@agents.example.test": true, "hidden@agents.example.test": false}, nil)
	ok := IQHandlerFunc(func(context.Context, IQ) (*xmltree.Element, error) { return nil, nil })
	r.HandleEndpointIQ(IQSet, "urn:x", "run", AccessInvocable, ok)
	r.HandleEndpointIQ(IQGet, "urn:x", "info", AccessVisible, ok)
	r.HandleGatewayIQ(IQGet, "urn:x", "both", ok)
	r.HandleGatewayIQ(IQSet, "urn:x", "both", ok)
	ask := func(typ, to, local string) string {
		iq := IQ{ID: "1", Type: typ, From: jid.MustParse("eve@example.test/x"), To: jid.MustParse(to), Payload: xmltree.New("urn:x", local)}
		reply := r.DispatchIQ(context.Background(), iq)
		reply.SetAttr("from", "")
		return reply.String()
	}
	for _, tc := range []struct{ typ, to, local, want string }{
		{"get", "open@agents.example.test", "run", "This request must be an IQ set."},
		{"set", "open@agents.example.test", "info", "This request must be an IQ get."},
		{"set", "open@agents.example.test", "run", `type="result"`},
		{"get", "agents.example.test", "both", `type="result"`},
		{"set", "agents.example.test", "both", `type="result"`},
	} {
		if got := ask(tc.typ, tc.to, tc.local); !contains(got, tc.want) {
			t.Errorf("%s %s at %s: %s, want %s", tc.typ, tc.local, tc.to, got, tc.want)
		}
	}
	if got := ask("get", "open@agents.example.test", "run"); !contains(got, "<bad-request") {
		t.Errorf("wrong type: %s, want bad-request", got)
	}
	for _, local := range []string{"run", "info"} {
		hidden, missing := ask("get", "hidden@agents.example.test", local), ask("get", "nobody@agents.example.test", local)
		if hidden != missing || !contains(hidden, "item-not-found") {
			t.Errorf("%s of the wrong type: hidden %s, nonexistent %s", local, hidden, missing)
		}
	}
}

func TestRouterRegistrationPanics(t *testing.T) {
	t.Parallel()
	ok := IQHandlerFunc(func(context.Context, IQ) (*xmltree.Element, error) { return nil, nil })
	for name, f := range map[string]func(r *Router){
		"twice": func(r *Router) {
			r.HandleGatewayIQ(IQGet, "urn:x", "a", ok)
			r.HandleGatewayIQ(IQGet, "urn:x", "a", ok)
		},
		"nil":         func(r *Router) { r.HandleGatewayIQ(IQGet, "urn:x", "a", nil) },
		"result type": func(r *Router) { r.HandleEndpointIQ("result", "urn:x", "a", AccessVisible, ok) },
		"mixed access": func(r *Router) {
			r.HandleEndpointIQ(IQGet, "urn:x", "a", AccessVisible, ok)
			r.HandleEndpointIQ(IQSet, "urn:x", "a", AccessInvocable, ok)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f(NewRouter(jid.MustParse("agents.example.test"), nil, nil))
		}()
	}
}
