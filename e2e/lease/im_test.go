package lease

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// imCluster is an xAgent connector agent with an inbox (IM Profile v2) on
// a PostgreSQL cluster behind ejabberd.
func imCluster(t *testing.T) (*leaseEnv, *connectortest.Server, string) {
	e2e.NeedSlixmpp(t)
	srv, err := connectortest.Start(connectortest.Options{APIKey: e2e.ConnectorKey, FormToken: e2e.FormToken, RetryInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	// Files and the child's environment, not t.Setenv: the test is
	// parallel.
	keyFile := filepath.Join(t.TempDir(), "connector.key")
	if err := os.WriteFile(keyFile, []byte(e2e.ConnectorKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := newLeaseEnv(t, []string{"alice"}, func(domain, server string) string {
		return fmt.Sprintf(`
[[agents]]
jid = "im@%s"
[agents.connector]
base_url = %q
api_key_file = %q
inbox = "alice@%s"
`, domain, srv.URL(), keyFile, server)
	})
	return l, srv, "im@" + l.e.Domain
}

// imDelivered injects n IM messages and waits until each reached the
// inbox exactly once.
func imDelivered(t *testing.T, l *leaseEnv, srv *connectortest.Server, in *inbox, ep, tag string, n int) {
	t.Helper()
	var want []string
	for i := range n {
		text := fmt.Sprintf("%s message %d", tag, i)
		want = append(want, text)
		testkit.WaitFor(t, 60*time.Second, "a signed-in channel at the connector", func() bool {
			return srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_" + tag, SenderName: "Alex", Text: text}) != ""
		})
	}
	testkit.WaitFor(t, 60*time.Second, "the connector's messages at the inbox", func() bool {
		got := in.bodies(ep)
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	})
	got := in.bodies(ep)
	for _, w := range want {
		if c := countOf(got, w); c != 1 {
			t.Fatalf("%q reached the inbox %d times", w, c)
		}
	}
	for _, a := range srv.InboundAcks() {
		if a.Status != "accepted" {
			t.Fatalf("the gateway acknowledged an IM message %+v", a)
		}
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// TestLeaseIMChatOneMember: an IM connector's chat reaches the inbox from
// one member on PostgreSQL (cluster mode), as it does on SQLite. Before
// the fix the connector got status accepted and nothing reached the inbox
// and nothing was logged: the leased backend did not pass the chat on.
func TestLeaseIMChatOneMember(t *testing.T) {
	t.Parallel()
	l, srv, ep := imCluster(t)
	l.serve("gw-1")
	connectorAuth(t, l, ep)
	in := l.inbox("alice")
	imDelivered(t, l, srv, in, ep, "one", 3)
}

// TestLeaseIMChatThreeMembers: three members; the lease holder's
// connection takes the IM messages and they reach the inbox once each,
// whichever member's XMPP session carries them; then the inbox answers
// (its messages reach random members) and every answer reaches the IM
// network once; then the holder is killed -9 and the survivor's
// connection delivers new messages.
func TestLeaseIMChatThreeMembers(t *testing.T) {
	t.Parallel()
	l, srv, ep := imCluster(t)
	for _, n := range []string{"gw-1", "gw-2", "gw-3"} {
		l.serve(n)
	}
	connectorAuth(t, l, ep)
	in := l.inbox("alice")
	imDelivered(t, l, srv, in, ep, "three", 5)

	// The inbox answers: ejabberd hands each answer to a random member.
	chID := ""
	in.mu.Lock()
	for _, m := range in.msgs {
		if strings.HasPrefix(m.AttrValue("from"), ep+"/") {
			chID = strings.TrimPrefix(m.AttrValue("from"), ep+"/")
		}
	}
	in.mu.Unlock()
	if chID == "" {
		t.Fatal("no IM message came from a channel resource")
	}
	for i := range 6 {
		sendChat(t, in, ep+"/"+chID, fmt.Sprintf("answer %d", i))
	}
	testkit.WaitFor(t, 60*time.Second, "the inbox's six answers at the IM network", func() bool {
		return len(srv.Outbound()) >= 6
	})
	seen := map[string]int{}
	for _, o := range srv.Outbound() {
		seen[o.Text]++
	}
	for i := range 6 {
		if c := seen[fmt.Sprintf("answer %d", i)]; c != 1 {
			t.Fatalf("answer %d reached the IM network %d times (%v)", i, c, seen)
		}
	}

	// kill -9 the holder: a survivor takes the lease and the connection.
	h := l.holder("connector:"+ep, 30*time.Second)
	l.members[h].Kill()
	next := l.holder("connector:"+ep, 60*time.Second)
	if next == h {
		t.Fatalf("the lease stayed with the killed member %s", h)
	}
	imDelivered(t, l, srv, in, ep, "after-kill", 3)
}

// connectorAuth signs the connector's channel in (the form token from
// the child's environment).
func connectorAuth(t *testing.T, l *leaseEnv, ep string) {
	t.Helper()
	cmd := exec.Command(e2e.Binary(t), "connector", "auth", "--config", l.e.ConfigPath, "--flow", "token_form",
		"--field", "account=alice", "--field-env", "token=AGENTGW_TEST_FORM_TOKEN", ep)
	cmd.Dir = l.e.Dir
	cmd.Env = append(os.Environ(), "AGENTGW_TEST_FORM_TOKEN="+e2e.FormToken)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("connector auth: %v\n%s", err, out)
	}
}
