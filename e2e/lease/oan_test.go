package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// TestLeaseOANAccount: three members and one OpenAgentNetwork account.
// One socket for the account across the cluster (before the fix each
// member opened its own: 3); the Gofer's unprompted messages reach the
// configured owner once each (the events applied once, in the store);
// kill -9 of the holder mid-stream: a survivor takes the lease and opens
// the one socket, and every event, those sent while no member held the
// connection included, reaches the owner as exactly one message id (one
// sent right before the kill may be resent with its id, which receivers
// de-duplicate; one sent before that arrives once).
func TestLeaseOANAccount(t *testing.T) {
	t.Parallel()
	srv := e2e.StartOAN(t)
	l := newLeaseEnv(t, []string{"alice"}, func(domain, server string) string {
		return fmt.Sprintf(`
[[agents]]
jid = "gofers@%s"
[agents.oan]
base_url = %q
api_key_file = "oan.key"
owner = "alice@%s"
reply_timeout_seconds = 3
`, domain, srv.URL, server)
	})
	e := l.e
	ep := e.Endpoint("gofers")
	code, err := srv.PairingCode()
	if err != nil {
		t.Fatal(err)
	}
	e.Agentgw(0, "oan", "pair", "--config", e.ConfigPath, "--code", code, ep.String())
	for _, n := range []string{"gw-1", "gw-2", "gw-3"} {
		l.serve(n)
	}
	sockets := func() int {
		n, err := srv.Sockets()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	testkit.WaitFor(t, 60*time.Second, "an OAN socket", func() bool { return sockets() > 0 })
	// Give every member time to have connected (two lease periods and a
	// connect), then count: one socket, held by one member.
	connected := func() []string {
		var out []string
		for n, p := range l.members {
			if alive(p) && strings.Count(p.Log(), "OAN event stream connected") > 0 {
				out = append(out, n)
			}
		}
		return out
	}
	// Sampled for 8 s (a hold, not a wait): it must stay 1 throughout.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); <-tick.C {
		if n := sockets(); n != 1 {
			t.Fatalf("%d OAN sockets for one account across three members (members connected: %v), want 1", n, connected())
		}
	}
	if c := connected(); len(c) != 1 {
		t.Fatalf("members that connected the OAN stream: %v, want one", c)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := e.Dial("alice")
	testkit.WaitFor(t, 30*time.Second, "the OAN manifest", func() bool {
		_, err := c.Pin(ctx, ep, "create_gofer")
		return err == nil
	})
	res, err := c.Call(ctx, ep, "create_gofer", json.RawMessage(`{}`), agentclient.CallOptions{})
	if err != nil || res.State != "completed" {
		t.Fatalf("create_gofer: %v %+v", err, res)
	}
	var p struct {
		Result struct {
			StructuredContent struct {
				GoferID string `json:"gofer_id"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	json.Unmarshal(res.Payload, &p)
	gofer := p.Result.StructuredContent.GoferID
	if gofer == "" {
		t.Fatalf("create_gofer: %s", res.Payload)
	}
	owner := l.inbox("alice")
	says := func(text string) {
		t.Helper()
		if _, err := srv.Emit(map[string]any{"type": "gofer_message", "goferId": gofer, "source": "own_gofer",
			"payload": map[string]any{"messageId": "m-" + strings.ReplaceAll(text, " ", "-"), "content": text}}); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range 6 {
		text := fmt.Sprintf("before %d", i)
		want = append(want, text)
		says(text)
	}
	ownerGot := func(what string) {
		t.Helper()
		testkit.WaitFor(t, 60*time.Second, what, func() bool {
			got := strings.Join(owner.bodies(ep.String()), "\n")
			for _, w := range want {
				if !strings.Contains(got, w) {
					return false
				}
			}
			return true
		})
	}
	ownerGot("the owner to receive the Gofer's messages")

	// kill -9 the holder mid-stream: events emitted right before and
	// while no member holds the connection.
	h := l.holder("oan:"+ep.String(), 30*time.Second)
	for i := range 3 {
		text := fmt.Sprintf("racing %d", i)
		want = append(want, text)
		says(text)
	}
	l.members[h].Kill()
	for i := range 6 {
		text := fmt.Sprintf("orphaned %d", i)
		want = append(want, text)
		says(text)
	}
	next := l.holder("oan:"+ep.String(), 60*time.Second)
	if next == h {
		t.Fatalf("the OAN lease stayed with the killed member %s", h)
	}
	ownerGot("the owner to receive every event after the failover")
	testkit.WaitFor(t, 30*time.Second, "one OAN socket after the failover", func() bool { return sockets() == 1 })
	// A member killed between handing a message to the server and marking
	// it delivered resends it from the store after the failover: the same
	// origin-id, which the receiver de-duplicates. So each event must reach
	// the owner as exactly one message id, with no id empty.
	got := owner.messages(ep.String())
	for _, w := range want {
		ids := map[string]int{}
		for _, m := range got {
			if strings.Contains(m.body, w) {
				ids[m.id]++
			}
		}
		if len(ids) != 1 {
			t.Errorf("%q reached the owner as %d distinct message ids %v, want one", w, len(ids), ids)
			continue
		}
		for id, n := range ids {
			if id == "" {
				t.Errorf("%q reached the owner without an id to de-duplicate by", w)
			}
			if n > 1 && strings.HasPrefix(w, "before") {
				t.Errorf("%q reached the owner %d times before any member was killed, want once", w, n)
			} else if n > 1 {
				t.Logf("%q was resent %d times with the same id %s after the failover (de-duplicated by the receiver)", w, n, id)
			}
		}
	}
}
