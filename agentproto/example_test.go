package agentproto_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// A caller reads a terminal event's payload with the shared structs and
// decides on the failure code.
func Example() {
	ev := agentproto.EventType("failed")
	payload := []byte(`{"error":{"code":"unavailable","message":"The MCP server is not running.","retryable":true}}`)
	if !ev.Terminal() {
		return
	}
	var p agentproto.FailedPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		panic(err)
	}
	fmt.Println(agentproto.State(ev).Terminal(), p.Error.Code == agentproto.CodeUnavailable, p.Error.Retryable)
	// Output: true true true
}

// The gateway builds a stanza error; the caller parses the reply into the
// same type, and errors.Is matches on the condition.
func ExampleParseError() {
	se := agentproto.ErrResourceConstraint("rate limit reached; retry later")
	iq := xmltree.New("jabber:client", "iq", "type", "error", "id", "q-1").Add(se.Element("jabber:client"))
	fmt.Println(iq)

	got := agentproto.ParseError(iq)
	fmt.Println(got.Type, got.Condition, errors.Is(got, agentproto.ErrResourceConstraint("")))
	// Output:
	// <iq xmlns="jabber:client" type="error" id="q-1"><error type="wait"><resource-constraint xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/><text xmlns="urn:ietf:params:xml:ns:xmpp-stanzas">rate limit reached; retry later</text></error></iq>
	// wait resource-constraint true
}
