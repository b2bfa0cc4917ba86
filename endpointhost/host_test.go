package endpointhost

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/xep/xmltree"
)

type testBackend struct{ *taskstest.Executor }

func (testBackend) Start(ctx context.Context) error { <-ctx.Done(); return nil }

const botManifest = `{"manifestSpecVersion":"0","agent":{"jid":"bot@example.test","name":"bot","version":"1"},"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`

func newTestHost(t *testing.T) *Host {
	t.Helper()
	var pub backendkit.Publisher
	h, err := New(context.Background(), Options{
		JID: "bot@example.test", Gateway: "agents.example.test", StorePath: filepath.Join(t.TempDir(), "h.db"),
		NewBackend: func(p backendkit.Publisher, _ backendkit.Availability) (Backend, error) {
			pub = p
			return testBackend{taskstest.New(tasks.Features{})}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if _, _, err := pub.Publish(context.Background(), []byte(botManifest)); err != nil {
		t.Fatal(err)
	}
	return h
}

func discoInfo(from, to string) component.IQ {
	return component.IQ{ID: "i", Type: "get", From: jid.MustParse(from), To: jid.MustParse(to),
		Payload: xmltree.New("http://jabber.org/protocol/disco#info", "query")}
}

func cond(reply *xmltree.Element) string {
	if se := agentproto.ParseError(reply); se != nil {
		return string(se.Condition)
	}
	return ""
}

// The host answers for its own account only, to local principals only,
// and rate-limits like the gateway.
func TestHostRoutingAndLimits(t *testing.T) {
	h := newTestHost(t)
	ctx := context.Background()
	if c := cond(h.router.DispatchIQ(ctx, discoInfo("alice@example.test/x", "bot@example.test/agent"))); c != "" {
		t.Fatalf("local caller: %s", c)
	}
	if c := cond(h.router.DispatchIQ(ctx, discoInfo("romeo@remote.test/x", "bot@example.test/agent"))); c != "item-not-found" {
		t.Fatalf("remote caller: %q, want item-not-found", c)
	}
	if c := cond(h.router.DispatchIQ(ctx, discoInfo("alice@example.test/x", "other@example.test/agent"))); c != "item-not-found" {
		t.Fatalf("another account's JID: %q, want item-not-found", c)
	}
	limited := 0
	for i := 0; i < 3000 && limited == 0; i++ {
		if c := cond(h.router.DispatchIQ(ctx, discoInfo("alice@example.test/x", "bot@example.test/agent"))); c == "resource-constraint" {
			limited++
		} else if c != "" && !strings.Contains(c, "resource") {
			t.Fatalf("unexpected %s", c)
		}
	}
	if limited == 0 {
		t.Fatal("3000 discovery IQs at once were never rate-limited")
	}
}
