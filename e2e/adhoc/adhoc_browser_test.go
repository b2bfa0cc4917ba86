package adhoc

import (
	"context"
	"encoding/json"
	"fmt"
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

// conversePage is the test page: Converse.js logs alice in over Prosody's
// WebSocket and, once connected, shows its ad-hoc commands element (the
// one its settings modal shows under "Commands").
const conversePage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>agentgw ad-hoc commands in Converse.js</title>
<link rel="stylesheet" href="/dist/converse.min.css">
<script type="module" src="/dist/converse.min.js"></script>
<style>#commands { width: 640px; margin: 1em; }</style>
</head><body>
<div id="commands"></div>
<script type="module">
converse.plugins.add('agentgw-test', {
  initialize() {
    this._converse.api.listen.on('connected', () => {
      document.getElementById('commands').appendChild(document.createElement('converse-adhoc-commands'));
      window.agentgwConnected = true;
    });
  }
});
converse.initialize(Object.assign(%s, {
  assets_path: '/dist/',
  auto_login: true,
  discover_connection_methods: false,
  view_mode: 'overlayed',
  show_controlbox_by_default: false,
  show_client_info: false,
  allow_adhoc_commands: true,
  whitelisted_plugins: ['agentgw-test'],
  loglevel: 'debug',
  play_sounds: false,
  show_desktop_notifications: false,
  i18n: 'en',
}));
</script>
</body></html>`

// TestAdhocConverseBrowser runs server-everything's tools as ad-hoc
// commands in Converse.js 14, the web client, in headless Chromium
// against Prosody's mod_websocket, and checks that the page shows what
// each tool returned: echo, get-sum, a long-running tool with its progress
// on the page, an elicitation answered through its form, and a cancel.
// Screenshots go to $AGENTGW_ARTIFACTS (or a temporary directory).
func TestAdhocConverseBrowser(t *testing.T) {
	t.Parallel()
	chromium, root := e2e.NeedBrowser(t, "converse.js/dist/converse.min.js")
	e2e.AccEverything(t)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{WebSocket: true})
	e := e2e.Start(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: e2e.EverythingTOML(t, "everything", srv.ComponentDomain)})
	ep := e.Endpoint("everything")
	c := e.Dial("alice")
	testkit.WaitFor(t, 90*time.Second, "everything's published manifest", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.GetManifest(ctx, ep, "")
		return err == nil
	})

	// The page and Converse.js's dist files, from another origin than the
	// WebSocket's.
	cfg, _ := json.Marshal(map[string]string{"websocket_url": srv.WebSocketURL, "jid": e.JID("alice"), "password": e2e.Password + "alice"})
	mux := http.NewServeMux()
	mux.Handle("/dist/", http.StripPrefix("/dist/", http.FileServer(http.Dir(filepath.Join(root, "node_modules", "converse.js", "dist")))))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, conversePage, cfg)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	shots := e2e.ArtefactDir(t, "converse")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	flows := e2e.RunBrowser(t, ctx, root, "testdata/converse/adhoc.mjs", "flow",
		"PAGE_URL=http://"+ln.Addr().String()+"/", "CHROMIUM="+chromium, "ENDPOINT="+ep.String(), "SHOTS="+shots)
	flows.Shows(t, "echo", "shown", "Completed", "Echo: hello from Converse.js")
	flows.Shows(t, "get-sum", "shown", "Completed", "The sum of 2 and 3.5 is 5.5.")
	flows.Shows(t, "long-running", "progress", "Executing", "is running", "Progress:")
	flows.Shows(t, "long-running", "shown", "Completed", "Long running operation completed. Duration: 8 seconds, Steps: 4.")
	flows.Shows(t, "elicitation", "asked", "Please provide inputs")
	flows.Shows(t, "elicitation", "shown", "Completed", "User provided the requested information", "Ada Lovelace")
	flows.Shows(t, "cancel", "running", "Executing", "is running")
	flows.Shows(t, "cancel", "reply", `status="canceled"`, "Cancellation requested")
	// Converse.js closes a cancelled command without an error, which it
	// does only for a reply with status="canceled" (docs/adhoc.md).
	if flows["cancel"]["closed"] != true {
		t.Errorf("cancel: Converse.js did not close the command: %v", flows["cancel"])
	}
	if got, _ := flows["cancel"]["shown"].(string); strings.Contains(got, "error") || strings.Contains(got, "Error") {
		t.Errorf("cancel: the page shows an error: %s", got)
	}
	// And the task is cancelled in the store.
	testkit.WaitFor(t, 60*time.Second, "the cancelled task", func() bool {
		var n int
		err := e.Gateway.DB.Write.QueryRow(`SELECT COUNT(*) FROM tasks WHERE tool = 'trigger-long-running-operation' AND caller = ? AND state = 'cancelled'`, e.JID("alice")).Scan(&n)
		return err == nil && n == 1
	})
}
