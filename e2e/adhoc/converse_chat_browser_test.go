package adhoc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// chatPage is the test page for a person chatting: Converse.js in its
// full-screen mode with the contacts panel open, logged in over Prosody's
// WebSocket.
const chatPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>agentgw chat in Converse.js</title>
<link rel="stylesheet" href="/dist/converse.min.css">
<script type="module" src="/dist/converse.min.js"></script>
</head><body class="converse-fullscreen">
<script type="module">
converse.plugins.add('agentgw-test', {
  initialize() {
    const c = this._converse;
    window.agentgwSubscription = (jid) => c.state.roster?.get(jid)?.get('subscription');
    c.api.listen.on('connected', () => { window.agentgwConnected = true; });
  }
});
converse.initialize(Object.assign(%s, {
  assets_path: '/dist/',
  auto_login: true,
  discover_connection_methods: false,
  view_mode: 'fullscreen',
  show_controlbox_by_default: true,
  allow_contact_requests: true,
  show_client_info: false,
  whitelisted_plugins: ['agentgw-test'],
  loglevel: 'debug',
  play_sounds: false,
  show_desktop_notifications: false,
  i18n: 'en',
}));
</script>
</body></html>`

// TestConverseChatBrowser is Human Messaging as a person sees it in
// Converse.js 14 (headless Chromium, Prosody's mod_websocket): alice finds
// the agent by its address (the contacts panel's "Add a contact", which
// subscribes to its presence), opens the chat from her contacts, writes to
// it, and reads its reply in the chat view. The agent is a real conversing
// bridge: agent-control-center's hermes behind the reference connector
// process, which answers a goal "echo X" with X.
func TestConverseChatBrowser(t *testing.T) {
	t.Parallel()
	chromium, root := e2e.NeedBrowser(t, "converse.js/dist/converse.min.js")
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{WebSocket: true})
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: e2e.AccTOML(e2e.FreePort(t), srv.ComponentDomain)})
	e.Agentgw(0, "acc", "init", "--config", e.ConfigPath)
	dir := filepath.Join(e.Dir, "farm-conn")
	e.Agentgw(0, "acc", "enroll", "--config", e.ConfigPath, "--name", "farm", "--out", dir)
	e.StartGateway()
	ep := "hermes@" + e.Domain
	e2e.StartRefConnector(t, dir, "--heartbeat", "500ms")
	testkit.WaitFor(t, 30*time.Second, "the ACC agent's manifest", func() bool {
		_, ok := e.Gateway.Registry.Active(ep)
		return ok
	})

	cfg, _ := json.Marshal(map[string]string{"websocket_url": srv.WebSocketURL, "jid": e.JID("alice"), "password": e2e.Password + "alice"})
	pageURL := serveConversePage(t, root, fmt.Sprintf(chatPage, cfg))
	shots := e2e.ArtefactDir(t, "converse-chat")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	steps := e2e.RunBrowser(t, ctx, root, "testdata/converse/chat.mjs", "step",
		"PAGE_URL="+pageURL, "CHROMIUM="+chromium, "ENDPOINT="+ep, "SHOTS="+shots)
	t.Logf("steps: %v", steps)
	// Found: the agent is in alice's contacts, with its presence
	// subscription granted by the gateway.
	if got, _ := steps["find"]["subscription"].(string); got != "both" && got != "to" {
		t.Errorf("the agent's contact has subscription %q, want to or both (the gateway grants presence)", got)
	}
	// The reply: from the agent, its text the goal's echo, shown as the
	// agent's message in the chat view (not alice's own).
	if got, _ := steps["chat"]["reply"].(string); got != "hello from Converse.js" {
		t.Errorf("the chat view shows the agent's reply %q, want %q", got, "hello from Converse.js")
	}
	if from, _ := steps["chat"]["from"].(string); !strings.HasPrefix(from, ep) {
		t.Errorf("the reply in the chat view is from %q, want the agent %s", from, ep)
	}
}

// serveConversePage serves page at / and Converse.js's dist files under
// /dist/, on another origin than Prosody's WebSocket, and returns the URL.
func serveConversePage(t *testing.T, root, page string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/dist/", http.StripPrefix("/dist/", http.FileServer(http.Dir(filepath.Join(root, "node_modules", "converse.js", "dist")))))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String() + "/"
}
