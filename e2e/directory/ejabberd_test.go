package directory

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// checkCoreDiscovery walks the Tool Discovery profile with the Go client:
// gateway identity, the RSM-paged directory, endpoint information, the
// pinned manifest, tool nodes, schemas, a stale-hash conflict and search.
func checkCoreDiscovery(t *testing.T, e *e2e.Env, c *agentclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := c.Info(ctx, e.GatewayJID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !info.HasIdentity(ns.CategoryAutomation, ns.TypeGateway) || !info.Features[ns.Directory] || !info.Features[ns.Search] {
		t.Fatalf("gateway info lacks identity or features: %+v", info)
	}
	var got []string
	after := ""
	for i := 0; i < 10 && len(got) < 5; i++ {
		page, err := c.Items(ctx, e.GatewayJID(), ns.Directory, 2, after)
		if err != nil {
			t.Fatal(err)
		}
		if page.Count != 5 || len(page.Items) == 0 || len(page.Items) > 2 {
			t.Fatalf("page %d: count %d, %d items", i, page.Count, len(page.Items))
		}
		if page.First != page.Items[0].JID || page.Last != page.Items[len(page.Items)-1].JID {
			t.Fatalf("first/last wrong: %+v", page)
		}
		for _, it := range page.Items {
			if it.Node != "" {
				t.Fatalf("directory item carries a node: %+v", it)
			}
			got = append(got, it.JID)
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
	if _, err := c.GetSchema(ctx, ep, "echo", m.Version, "input", stale); e2e.ErrCondition(err) != "conflict" {
		t.Fatalf("stale hash: err = %v, want conflict", err)
	}
	res, err := c.SearchPage(ctx, e.GatewayJID(), "WEATH", 10, "")
	if err != nil || len(res.Items) != 1 || res.Items[0].JID != ep.String() {
		t.Fatalf("search = %+v, %v", res, err)
	}
}

// checkCalls runs echo, a progress call and an input call to completion.
func checkCalls(t *testing.T, e *e2e.Env, c *agentclient.Client) {
	t.Helper()
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
	if fmt.Sprint(percents) != "[25 50 75]" {
		t.Fatalf("progress percents = %v, want [25 50 75]", percents)
	}

	asked := ""
	out, err = c.Call(ctx, ep, "ask", json.RawMessage(`{}`), agentclient.CallOptions{OnInput: func(ctx context.Context, req agentclient.InputRequest) (json.RawMessage, error) {
		asked = req.Question
		return json.RawMessage(`{"unit":"F"}`), nil
	}})
	if err != nil || out.State != "completed" || asked != "Which unit?" || !strings.Contains(string(out.Payload), `"unit":"F"`) {
		t.Fatalf("ask: %v %+v asked=%q", err, out, asked)
	}

	out, err = c.Call(ctx, ep, "fail", json.RawMessage(`{}`), agentclient.CallOptions{})
	if err != nil || out.State != "failed" || !strings.Contains(string(out.Payload), "com.example:broken") {
		t.Fatalf("fail: %v %+v", err, out)
	}
}

func TestEjabberdDiscoveryAndCalls(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Ejabberd: true, Server: sharedEjabberd(t), Agents: e2e.FiveAgents(), Users: []string{"alice"}})
	c := e.Dial("alice")
	t.Run("discovery", func(t *testing.T) { checkCoreDiscovery(t, e, c) })
	t.Run("calls", func(t *testing.T) { checkCalls(t, e, c) })
	t.Run("hidden-equals-missing", func(t *testing.T) {
		e.StopGateway()
		e.Opts.Mutate = func(c *config.Config) { c.XMPP.LocalDomains = []string{"elsewhere.test"} }
		e.StartGateway()
		defer func() {
			e.StopGateway()
			e.Opts.Mutate = nil
			e.StartGateway()
		}()
		_, conn := e.DialConn("alice")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, payload := range []func() *xmltree.Element{
			func() *xmltree.Element { return xmltree.New(ns.DiscoInfo, "query") },
			func() *xmltree.Element { return xmltree.New(ns.API, "manifest-request") },
		} {
			ask := func(to string) string {
				iq := xmltree.New("jabber:client", "iq", "type", "get", "id", "probe-1", "to", to)
				iq.Add(payload())
				reply, err := conn.SendIQ(ctx, iq)
				if err != nil {
					t.Fatal(err)
				}
				reply.SetAttr("from", "")
				return reply.String()
			}
			hidden, missing := ask("weather@"+e.Domain), ask("nobody@"+e.Domain)
			if hidden != missing || !strings.Contains(hidden, "item-not-found") {
				t.Fatalf("replies differ or are not item-not-found:\nhidden  %s\nmissing %s", hidden, missing)
			}
		}
	})
}

// TestEjabberdSlixmpp runs the independent client's suites through
// ejabberd as well.
func TestEjabberdSlixmpp(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	e := startFlowEnv(t, e2e.Options{Ejabberd: true, Server: sharedEjabberd(t), Agents: []e2e.Agent{{Localpart: "alpha"}, {Localpart: "zulu"}}, Users: []string{"alice"}})
	e2e.RunSlixmpp(t, e, "discovery.py", "alice",
		"--endpoints", endpointList(e, "weather", "alpha", "zulu"),
		"--search", "zul", "--search-expect", e.Endpoint("zulu").String())
	e2e.RunSlixmpp(t, e, "tasks.py", "alice", "--endpoint", e.Endpoint("weather").String())

	m, ok := e.Gateway.Registry.Active(e.Endpoint("weather").String())
	if !ok {
		t.Fatal("weather has no active manifest")
	}
	e.StopGateway()
	e.Opts.Mutate = func(c *config.Config) { c.XMPP.LocalDomains = []string{"elsewhere.test"} }
	e.StartGateway()
	e2e.RunSlixmpp(t, e, "discovery.py", "alice", "--mode", "hidden",
		"--hidden", e.Endpoint("weather").String(), "--missing", e.Endpoint("nobody").String(),
		"--version", m.Version, "--hash", m.Hash)
}
