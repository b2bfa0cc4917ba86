package gatewaytest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/internal/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/ns"
	"github.com/agentgw/agentgw/internal/xmltree"
)

func fiveAgents() []Agent {
	var out []Agent
	for _, l := range []string{"weather", "calendar", "alpha", "zulu", "mail"} {
		out = append(out, Agent{Localpart: l})
	}
	return out
}

func TestDiscoveryThroughProsody(t *testing.T) {
	e := Start(t, Options{Agents: fiveAgents(), Users: []string{"alice"}})
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	info, err := c.Info(ctx, e.GatewayJID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !info.HasIdentity(ns.CategoryAutomation, ns.TypeGateway) || !info.Features[ns.Directory] || !info.Features[ns.Search] {
		t.Fatalf("gateway info lacks identity or features: %+v", info)
	}

	// Page with max=2: every endpoint exactly once, in octet order.
	var got []string
	after := ""
	for i := 0; i < 10; i++ {
		page, err := c.Items(ctx, e.GatewayJID(), ns.Directory, 2, after)
		if err != nil {
			t.Fatal(err)
		}
		if page.Count != 5 {
			t.Fatalf("count = %d, want 5", page.Count)
		}
		for _, it := range page.Items {
			if it.Node != "" {
				t.Fatalf("directory item carries a node: %+v", it)
			}
			got = append(got, it.JID)
		}
		if len(page.Items) > 0 && (page.First != page.Items[0].JID || page.Last != page.Items[len(page.Items)-1].JID) {
			t.Fatalf("first/last wrong: %+v", page)
		}
		if len(got) >= 5 {
			break
		}
		after = page.Last
	}
	want := []string{"alpha@" + e.Domain, "calendar@" + e.Domain, "mail@" + e.Domain, "weather@" + e.Domain, "zulu@" + e.Domain}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("directory walk = %v, want %v", got, want)
	}

	ep := e.Endpoint("weather")
	ei, err := c.Endpoint(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	if !ei.IsEndpoint || ei.ServerName != "weather" || ei.Version != "1.0.0" || ei.ManifestHash == "" || ei.ReplaySeconds <= 0 || !ei.Features[ns.Task] {
		t.Fatalf("endpoint info: %+v", ei)
	}
	m, err := c.GetManifest(ctx, ep, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Hash != ei.ManifestHash || agentclient.HashOf(m.JSON) != m.Hash {
		t.Fatal("manifest hash does not match the advertised hash")
	}
	items, err := c.ToolItems(ctx, ep, m.Version)
	if err != nil || len(items) != 5 {
		t.Fatalf("tool items = %v, %v", items, err)
	}
	for _, it := range items {
		if !strings.HasPrefix(it.Node, ns.Tool+"#1.0.0#") {
			t.Fatalf("tool node %q does not follow the grammar", it.Node)
		}
	}
	s, err := c.GetSchema(ctx, ep, "echo", m.Version, "input", m.Hash)
	if err != nil || agentclient.HashOf(s.JSON) != s.SchemaHash {
		t.Fatalf("schema: %v", err)
	}
	stale := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	if _, err := c.GetSchema(ctx, ep, "echo", m.Version, "input", stale); ErrCondition(err) != "conflict" {
		t.Fatalf("stale hash: err = %v, want conflict", err)
	}
	res, err := c.SearchPage(ctx, e.GatewayJID(), "WEATH", 10, "")
	if err != nil || len(res.Items) != 1 || res.Items[0].JID != ep.String() {
		t.Fatalf("search = %+v, %v", res, err)
	}
}

func TestHiddenAndNonexistentAreIdentical(t *testing.T) {
	// Users of example.test are made remote by declaring another local
	// domain, so an existing endpoint is hidden from them.
	e := Start(t, Options{Agents: fiveAgents(), Users: []string{"eve"}, TOML: ""})
	e.StopGateway()
	e.opts.Mutate = func(c *config.Config) { c.XMPP.LocalDomains = []string{"elsewhere.test"} }
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
	e := Start(t, Options{Agents: []Agent{{Localpart: "weather"}}, Users: []string{"alice"}})
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep := e.Endpoint("weather")

	out, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"hi"}`), agentclient.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.State != "completed" || !strings.Contains(string(out.Payload), `hi`) {
		t.Fatalf("echo outcome = %s %s", out.State, out.Payload)
	}

	var percents []float64
	out, err = c.Call(ctx, ep, "slow", json.RawMessage(`{}`), agentclient.CallOptions{OnProgress: func(p agentclient.Progress) {
		if p.Percent != nil {
			percents = append(percents, *p.Percent)
		}
	}})
	if err != nil || out.State != "completed" {
		t.Fatalf("slow: %v %+v", err, out)
	}
	if len(percents) < 3 || percents[0] >= percents[len(percents)-1] {
		t.Fatalf("progress percents = %v", percents)
	}

	asked := ""
	out, err = c.Call(ctx, ep, "ask", json.RawMessage(`{}`), agentclient.CallOptions{OnInput: func(ctx context.Context, req agentclient.InputRequest) (json.RawMessage, error) {
		asked = req.Question
		return json.RawMessage(`{"unit":"C"}`), nil
	}})
	if err != nil || out.State != "completed" || asked != "Which unit?" {
		t.Fatalf("ask: %v %+v asked=%q", err, out, asked)
	}

	out, err = c.Call(ctx, ep, "fail", json.RawMessage(`{}`), agentclient.CallOptions{})
	if err != nil || out.State != "failed" || !strings.Contains(string(out.Payload), "com.example:broken") {
		t.Fatalf("fail: %v %+v", err, out)
	}
	_ = jid.JID{}
}
