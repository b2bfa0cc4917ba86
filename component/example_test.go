package component_test

import (
	"context"
	"fmt"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/xep/xmltree"
)

type everyEndpoint struct{}

func (everyEndpoint) Resolve(_, _ jid.JID) (exists, visible bool) { return true, true }

// Handlers are registered by IQ type and payload; the router answers a
// payload sent with another type itself, after the access rule.
func ExampleRouter_HandleEndpointIQ() {
	r := component.NewRouter(jid.MustParse("agents.example"), everyEndpoint{}, nil)
	r.HandleEndpointIQ(component.IQGet, "urn:example:time", "time", component.AccessVisible,
		component.IQHandlerFunc(func(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
			return xmltree.New("urn:example:time", "time").WithText("12:00"), nil
		}))

	for _, typ := range []string{component.IQGet, component.IQSet} {
		reply := r.DispatchIQ(context.Background(), component.IQ{
			ID: "1", Type: typ,
			From:    jid.MustParse("juliet@example.com/balcony"),
			To:      jid.MustParse("clock@agents.example"),
			Payload: xmltree.New("urn:example:time", "time"),
		})
		fmt.Println(reply)
	}
	// Output:
	// <iq xmlns="jabber:component:accept" type="result" id="1" from="clock@agents.example" to="juliet@example.com/balcony"><time xmlns="urn:example:time">12:00</time></iq>
	// <iq xmlns="jabber:component:accept" type="error" id="1" from="clock@agents.example" to="juliet@example.com/balcony"><error type="modify"><bad-request xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/><text xmlns="urn:ietf:params:xml:ns:xmpp-stanzas">This request must be an IQ get.</text></error></iq>
}
