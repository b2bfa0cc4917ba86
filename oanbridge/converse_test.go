package oanbridge_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/oanbridge"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit"
)

// TestConverse: the owner's chat turn is a Gofer chat message, the
// Gofer's reply comes back as chat from endpoint/goferId, a turn answers
// an open Gofer question (one POST, the item closed for escalations), and
// anyone else is refused.
func TestConverse(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	keyFile := filepath.Join(t.TempDir(), "oan.key")
	pair(t, srv, keyFile, false)
	db, _ := storetest.OpenTwo(t)
	st := sqlite.NewOAN(db)
	f := newFixture(t, srv, st, keyFile, nil)
	testkit.WaitFor(t, 30*time.Second, "connected", f.b.Connected)
	if !f.b.CanConverse(endpoint) || f.b.CanConverse("other@agents.example.test") {
		t.Fatal("CanConverse")
	}
	gofer := structured(t, f.call(oanbridge.ToolCreateGofer, owner, `{}`, nil))["gofer_id"].(string)
	ctx := context.Background()

	if err := f.b.Converse(ctx, backendkit.Turn{Endpoint: endpoint, From: "mallory@example.test/x", ID: "1", Body: "hi"}); err == nil {
		t.Fatal("a non-owner's turn was taken")
	}
	if err := f.b.Converse(ctx, backendkit.Turn{Endpoint: endpoint, From: owner + "/phone", ID: "2", Body: "hello there"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the Gofer's reply as chat", func() bool {
		for _, m := range f.chat.all() {
			if m.Body == "Gofer heard: hello there" && m.To == owner && m.Resource == gofer && m.Endpoint == endpoint {
				return true
			}
		}
		return false
	})
	// A question arrives as chat; the owner's next turn answers it.
	if err := f.b.Converse(ctx, backendkit.Turn{Endpoint: endpoint, Resource: gofer, From: owner + "/phone", ID: "3", Body: "ask:enum"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the question as chat", func() bool {
		for _, m := range f.chat.all() {
			if strings.HasPrefix(m.Body, "Your Gofer asks: Question (enum)") {
				return true
			}
		}
		return false
	})
	before := f.log().Count("POST", "/api/v1/gofers/"+gofer+"/chat/messages")
	if err := f.b.Converse(ctx, backendkit.Turn{Endpoint: endpoint, Resource: gofer, From: owner + "/phone", ID: "4", Body: "green"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the thanks", func() bool {
		for _, m := range f.chat.all() {
			if m.Body == "Thanks, noted: green" {
				return true
			}
		}
		return false
	})
	if n := f.log().Count("POST", "/api/v1/gofers/"+gofer+"/chat/messages") - before; n != 1 {
		t.Fatalf("%d POSTs for one answer", n)
	}
	if items, _ := st.Items(ctx, endpoint, oandb.StatePending, oandb.StateDeferred); len(items) != 0 {
		t.Fatalf("the answered question is still open: %+v", items)
	}
}
