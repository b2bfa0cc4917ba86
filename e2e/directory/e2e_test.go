package directory

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

func TestDiscoveryThroughProsody(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Agents: e2e.FiveAgents(), Users: []string{"alice"}})
	checkCoreDiscovery(t, e, e.Dial("alice"))
}

func TestHiddenAndNonexistentAreIdentical(t *testing.T) {
	t.Parallel()
	// Users of example.test are made remote by declaring another local
	// domain, so an existing endpoint is hidden from them.
	e := e2e.Start(t, e2e.Options{Agents: e2e.FiveAgents(), Users: []string{"eve"}, TOML: ""})
	e.StopGateway()
	e.Opts.Mutate = func(c *config.Config) { c.XMPP.LocalDomains = []string{"elsewhere.test"} }
	e.StartGateway()
	_, conn := e.DialConn("eve")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ask := func(to string) string {
		iq := xmltree.New("jabber:client", "iq", "type", "get", "id", "probe-1", "to", to)
		iq.Add(xmltree.New(ns.DiscoInfo, "query"))
		reply, err := conn.SendIQ(ctx, iq)
		if err != nil {
			t.Fatal(err)
		}
		// The from attribute names the addressee; everything else must be
		// identical.
		reply.SetAttr("from", "")
		return reply.String()
	}
	hidden := ask("weather@" + e.Domain)
	missing := ask("nobody@" + e.Domain)
	if hidden != missing || !strings.Contains(hidden, "item-not-found") {
		t.Fatalf("replies differ or are not item-not-found:\nhidden  %s\nmissing %s", hidden, missing)
	}
	page, err := e.Dial("eve").Items(ctx, e.GatewayJID(), "", 50, "")
	if err != nil || len(page.Items) != 0 || page.Count != 0 {
		t.Fatalf("remote directory = %+v, %v", page, err)
	}
}

func TestCallEchoProgressInputThroughProsody(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice"}})
	c := e.Dial("alice")
	checkCalls(t, e, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Call(ctx, e.Endpoint("weather"), "fail", json.RawMessage(`{}`), agentclient.CallOptions{})
	if err != nil || out.State != "failed" || !strings.Contains(string(out.Payload), "com.example:broken") {
		t.Fatalf("fail: %v %+v", err, out)
	}
}
