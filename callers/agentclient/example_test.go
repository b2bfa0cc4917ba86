package agentclient_test

import (
	"context"
	"encoding/json"
	"fmt"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// specTarget is a Conn whose peer answers like the spec's weather endpoint:
// it accepts every invoke as in the example "Caller invokes a remote tool"
// and refuses everything else with item-not-found.
type specTarget struct{}

func (specTarget) JID() jid.JID                     { return jid.MustParse("planner@agents.example/worker") }
func (specTarget) OnMessage(func(*xmltree.Element)) {}

func (specTarget) SendIQ(_ context.Context, iq *xmltree.Element) (*xmltree.Element, error) {
	reply := xmltree.New("jabber:client", "iq", "type", "result", "id", iq.AttrValue("id"), "from", iq.AttrValue("to"))
	if inv := iq.Child("urn:xmpp:agent-task:0", "invoke"); inv != nil {
		return reply.Add(xmltree.New("urn:xmpp:agent-task:0", "accepted",
			"created", "2026-07-27T19:14:01Z",
			"request-id", inv.AttrValue("request-id"),
			"retain-until", "2026-07-28T19:14:01Z",
			"revision", "0",
			"task-id", "task-7f2a9c41d8804e96bb478af6453c0371")), nil
	}
	reply.SetAttr("type", "error")
	return reply.Add(xmltree.New("jabber:client", "error", "type", "cancel").
		Add(xmltree.New("urn:ietf:params:xml:ns:xmpp-stanzas", "item-not-found"))), nil
}

// Invoke sends an invocation pinned to a manifest and returns the target's
// durable acceptance; stanza errors come back as *StanzaError.
func ExampleClient_Invoke() {
	c := agentclient.New(specTarget{}, nil)
	ctx := context.Background()
	weather := jid.MustParse("weather@agents.example")

	acc, err := c.Invoke(ctx, weather, &agentclient.InvokeRequest{
		RequestID:    "req-91a6d2f49c514f44a2d223f0f97bd9fe",
		Tool:         "forecast.get",
		Version:      "1.4.0",
		ManifestHash: "K2/YdwvIBAlfUIeZHiNCyiYA4m4W2wrEOqXQDoQyXp4=",
		Arguments:    json.RawMessage(`{"city":"Riga"}`),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(acc.TaskID, acc.Revision, acc.RetainUntil)

	_, err = c.State(ctx, weather, "task-00000000000000000000000000000000")
	fmt.Println(agentclient.Condition(err))
	// Output:
	// task-7f2a9c41d8804e96bb478af6453c0371 0 2026-07-28T19:14:01Z
	// item-not-found
}
