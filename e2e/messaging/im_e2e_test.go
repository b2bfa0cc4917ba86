package messaging

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"

	_ "github.com/mattn/go-sqlite3" // read the gateway's queue before the kill
)

// inboxHuman is testdata/slixmpp/iminbox.py running as the inbox JID.
type inboxHuman struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	events []map[string]any
	stderr strings.Builder
}

func startInbox(t *testing.T, e *e2e.Env, user string) *inboxHuman {
	t.Helper()
	e2e.NeedSlixmpp(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, e2e.SystemPython, e2e.SlixmppScript(t, "iminbox.py"),
		"--jid", e.JID(user), "--password", e2e.Password+user, "--server", e.Server.C2SAddr,
		"--gateway", e.Domain, "--ca", e.Server.CAFile, "--upload", e.Server.UploadDomain, "--timeout", "600")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	h := &inboxHuman{t: t, cmd: cmd}
	cmd.Stderr = &h.stderr
	var err error
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			h.mu.Lock()
			h.events = append(h.events, m)
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		h.stdin.Write([]byte(`{"cmd":"quit"}` + "\n"))
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done // stderr is written until Wait returns
		}
		if t.Failed() {
			t.Logf("iminbox stderr:\n%s\nevents: %v", h.stderr.String(), h.all())
		}
	})
	h.wait(60*time.Second, "the inbox client online", func(m map[string]any) bool { return m["event"] == "ready" })
	return h
}

func (h *inboxHuman) all() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.events...)
}

func (h *inboxHuman) of(kind string) []map[string]any {
	var out []map[string]any
	for _, m := range h.all() {
		if m["event"] == kind {
			out = append(out, m)
		}
	}
	return out
}

func (h *inboxHuman) wait(d time.Duration, what string, pred func(map[string]any) bool) map[string]any {
	h.t.Helper()
	var got map[string]any
	testkit.WaitFor(h.t, d, what, func() bool {
		for _, m := range h.all() {
			if pred(m) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

func (h *inboxHuman) send(cmd map[string]any) {
	h.t.Helper()
	cmd["cmd"] = "send"
	b, _ := json.Marshal(cmd)
	if _, err := h.stdin.Write(append(b, '\n')); err != nil {
		h.t.Fatal(err)
	}
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestIMConnectorThroughProsody is the IM Profile v2 proof: a person on
// the (simulated) IM network and the inbox human (slixmpp) talk through
// the reference connector, the gateway (`agentgw serve`), Prosody and its
// mod_http_file_share, files both ways byte-identical; then the connector
// restarts and the gateway is killed with SIGKILL mid-conversation, and
// nothing is lost or delivered twice.
func TestIMConnectorThroughProsody(t *testing.T) {
	e2e.NeedSlixmpp(t)
	srv, err := connectortest.Start(connectortest.Options{APIKey: e2e.ConnectorKey, FormToken: e2e.FormToken, RetryInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("AGENTGW_TEST_CONNECTOR_KEY", e2e.ConnectorKey)
	t.Setenv("AGENTGW_TEST_FORM_TOKEN", e2e.FormToken)
	server := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{HTTPUpload: true})
	e := e2e.Prepare(t, e2e.Options{Server: server, Users: []string{"alice"}, TOML: fmt.Sprintf(`
[[agents]]
jid = "im@%s"
[agents.connector]
base_url = %q
api_key_env = "AGENTGW_TEST_CONNECTOR_KEY"
inbox = %q
download_origins = [%q]
`, server.ComponentDomain, srv.URL(), "alice@"+server.Domain, "http://"+server.HTTPAddr)})
	gw := e.Serve("gw1")
	e.Agentgw(0, "connector", "auth", "--config", e.ConfigPath, "--flow", "token_form",
		"--field", "account=alice", "--field-env", "token=AGENTGW_TEST_FORM_TOKEN", e.Endpoint("im").String())
	alice := startInbox(t, e, "alice")
	ep := e.Endpoint("im").String()

	// 1. A person on the IM network writes, with a picture.
	pic := make([]byte, 200<<10)
	rand.Read(pic)
	var first string
	testkit.WaitFor(t, 30*time.Second, "a signed-in channel at the connector", func() bool {
		first = srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_bob", SenderName: "Bob",
			Text: "hi alice <script>x</script>\x01\x1b]0;", Files: []connectortest.IMFile{{Name: "cat.png", MimeType: "image/png", Data: pic}}})
		return first != ""
	})
	in := alice.wait(60*time.Second, "the IM message at the inbox", func(m map[string]any) bool {
		return m["event"] == "message" && m["origin_id"] == "im_"+first
	})
	from := in["from"].(string)
	if !strings.HasPrefix(from, ep+"/cch_") || in["thread"] != "conv_bob" || in["body"] != "hi alice <script>x</script>\uFFFD\uFFFD]0;" {
		t.Fatalf("inbound at the inbox: %v", in)
	}
	files := in["files"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["sha256"] != hexSum(pic) {
		t.Fatalf("the picture through XEP-0363 differs: %v", in)
	}
	if u := files[0].(map[string]any)["url"].(string); !strings.HasPrefix(u, "http://"+server.HTTPAddr+"/") {
		t.Fatalf("the file is not on Prosody's upload service: %s", u)
	}

	// 2. Alice answers that full JID with a file of her own (uploaded by
	// her client through XEP-0363); it reaches the IM side byte-identical
	// and she gets a receipt.
	doc := make([]byte, 150<<10)
	rand.Read(doc)
	alice.send(map[string]any{"to": from, "body": "hello Bob", "thread": "conv_bob", "id": "alice-1",
		"file_b64": base64.StdEncoding.EncodeToString(doc), "name": "notes.bin", "reply_to": "im_" + first})
	testkit.WaitFor(t, 60*time.Second, "the reply on the IM side", func() bool { return len(srv.Outbound()) == 1 })
	out := srv.Outbound()[0]
	if out.Conversation != "conv_bob" || !strings.HasPrefix(out.Text, "hello Bob") || len(out.Files) != 1 ||
		out.Files[0].SHA256 != hexSum(doc) || out.Files[0].Filename != "notes.bin" || out.ReplyTo != first {
		t.Fatalf("outbound on the IM side: %+v", out)
	}
	alice.wait(30*time.Second, "the receipt", func(m map[string]any) bool { return m["event"] == "receipt" && m["id"] == "alice-1" })

	// 3. The connector restarts with messages not yet acknowledged: they
	// are redelivered after the reconnect, once.
	restarted := make(chan error, 1)
	go func() { restarted <- srv.Restart(2 * time.Second) }()
	time.Sleep(300 * time.Millisecond) // the connector is down now
	var during []string
	for i := 0; i < 3; i++ {
		// The channel survives the restart; the messages wait for it.
		during = append(during, srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_bob", Text: fmt.Sprintf("during restart %d", i)}))
	}
	// Alice writes while the connector is down: the turn is queued.
	alice.send(map[string]any{"to": from, "body": "while the connector restarts", "thread": "conv_bob", "id": "alice-down"})
	alice.wait(30*time.Second, "alice's send during the restart", func(m map[string]any) bool { return m["event"] == "sent" && m["id"] == "alice-down" })
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, "alice's reply sent during the restart on the IM side", func() bool {
		for _, o := range srv.Outbound() {
			if o.Text == "while the connector restarts" {
				return true
			}
		}
		return false
	})
	for _, id := range during {
		alice.wait(60*time.Second, "a message sent while the connector was down", func(m map[string]any) bool {
			return m["event"] == "message" && m["origin_id"] == "im_"+id
		})
	}

	// 4. kill -9 mid-conversation. A burst from the IM side, and a reply
	// from alice that the connector cannot take yet (its data plane is
	// refused), then SIGKILL.
	var burst []string
	for i := 0; i < 5; i++ {
		burst = append(burst, srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_carol", Text: fmt.Sprintf("burst %d", i)}))
	}
	alice.send(map[string]any{"to": from, "body": "reply before the crash", "thread": "conv_bob", "id": "alice-2"})
	alice.wait(30*time.Second, "alice's second send", func(m map[string]any) bool { return m["event"] == "sent" && m["id"] == "alice-2" })
	// Kill only once the gateway has the reply durably (queued, or already
	// on the IM side): before that it is Prosody's to lose, not ours, and a
	// fixed 150 ms sleep lost that race on a loaded machine.
	testkit.WaitFor(t, 60*time.Second, "the gateway to queue alice's second reply", func() bool {
		return queuedOut(t, filepath.Join(e.Dir, "agentgw.db"), "reply before the crash") || slices.ContainsFunc(srv.Outbound(), func(o connectortest.OutboundMessage) bool { return o.Text == "reply before the crash" })
	})
	gw.Kill()
	// Inbound messages still pending in the store at the kill may have
	// reached XMPP just before it (send, then mark delivered: the window is
	// one SQLite write, docs/messaging.md); those alone may arrive a second
	// time, with the same origin-id to de-duplicate on.
	inFlight := pendingIn(t, filepath.Join(e.Dir, "agentgw.db"))
	gw = e.Serve("gw2")
	for _, id := range burst {
		alice.wait(60*time.Second, "a burst message after the crash", func(m map[string]any) bool {
			return m["event"] == "message" && m["origin_id"] == "im_"+id
		})
	}
	testkit.WaitFor(t, 60*time.Second, "alice's second reply on the IM side", func() bool {
		for _, o := range srv.Outbound() {
			if o.Text == "reply before the crash" {
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second) // room for a wrong redelivery to show up

	// Nothing lost, nothing twice: every IM message id at the inbox once,
	// every reply once on the IM side.
	seen := map[string]int{}
	for _, m := range alice.of("error") {
		t.Errorf("the inbox got an error reply: %v", m)
	}
	for _, m := range alice.of("message") {
		seen[m["origin_id"].(string)]++
	}
	for _, id := range append(append([]string{first}, during...), burst...) {
		if n := seen["im_"+id]; n != 1 && !(n == 2 && inFlight[id]) {
			t.Errorf("IM message %s reached the inbox %d times (pending at the kill: %v)", id, n, inFlight[id])
		}
	}
	texts := map[string]int{}
	for _, o := range srv.Outbound() {
		texts[o.Text]++
	}
	if texts["reply before the crash"] != 1 || texts["while the connector restarts"] != 1 || len(srv.Outbound()) != 3 {
		t.Errorf("IM side got %v", texts)
	}
	if u := srv.Unacknowledged(); len(u) != 0 {
		t.Errorf("the connector still holds unacknowledged messages %v", u)
	}

	// The connector's API key (sent on POST /files/uploads) and the form
	// secret appear in no log, store file or message the inbox got; the IM
	// traffic itself did reach the store.
	gw.Stop()
	logs := ""
	for _, n := range []string{"gw1.log", "gw2.log"} {
		b, _ := os.ReadFile(filepath.Join(e.Dir, n))
		logs += string(b)
	}
	db, _ := os.ReadFile(filepath.Join(e.Dir, "agentgw.db"))
	wal, _ := os.ReadFile(filepath.Join(e.Dir, "agentgw.db-wal"))
	evs, _ := json.Marshal(alice.all())
	if !strings.Contains(string(db)+string(wal), "burst 4") {
		t.Error("the chat queue is not in the store file")
	}
	for name, hay := range map[string]string{"gateway logs": logs, "store": string(db) + string(wal), "inbox": string(evs)} {
		for _, secret := range []string{e2e.ConnectorKey, e2e.FormToken} {
			if strings.Contains(hay, secret) {
				t.Errorf("%s contain a secret", name)
			}
		}
	}
	if t.Failed() {
		t.Logf("gateway log tail:\n%s", e2e.Tail(gw.Log(), 6000))
	}
}

// queuedOut reports whether the gateway's store holds an outbound IM chat
// item whose payload contains text.
// pendingIn is the set of inbound IM message ids the store holds as not
// yet delivered to XMPP.
func pendingIn(t *testing.T, dbPath string) map[string]bool {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT message_id FROM connector_chat_queue WHERE direction = 'in' AND state = 'pending'`)
	if err != nil {
		t.Fatalf("read the inbound queue after the kill: %v", err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func queuedOut(t *testing.T, dbPath, text string) bool {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM connector_chat_queue WHERE direction = 'out' AND instr(CAST(payload AS TEXT), ?) > 0`, text).Scan(&n); err != nil {
		return false // not created yet, or busy: ask again
	}
	return n > 0
}
