package console

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/console"
	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// startConsole runs a gateway on Prosody with a scripted agent (weather:
// slow reports progress, ask asks for input, wait runs until cancelled),
// admin ops and user alice, and serves the console on it, wired as
// `agentgw serve` wires it, with logins checked at Prosody's C2S port.
func startConsole(t *testing.T) (*e2e.Env, string) {
	t.Helper()
	e, base, _ := startConsoleServer(t)
	return e, base
}

// startConsoleServer is startConsole that also returns the console.
func startConsoleServer(t *testing.T) (*e2e.Env, string, *console.Server) {
	t.Helper()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	e := e2e.Start(t, e2e.Options{Server: srv, Users: []string{"ops", "alice"}, Admins: []string{"ops"},
		Agents: []e2e.Agent{{Localpart: "weather"}}})
	gw := e.Gateway
	admin, _ := config.ParsePrincipal(e.Config.XMPP.Admins[0])
	s, err := console.New(console.Deps{
		IsAdmin: gw.Policy.IsAdmin, RouteResource: gateway.ConsoleResource, TokenUser: admin,
		Directory: gw.Registry, Admin: gw.AdminCommands, Engine: gw.Engine, Tasks: gw.Store.Tasks,
		Grants: gw.Store.Grants, SelfReg: gw.Store.SelfReg, Sessions: gw.Store.ConsoleSessions, Health: gw.BackendState,
		CheckPassword: console.XMPPLogin(srv.C2SAddr, srv.CAFile), RequestsPerSecond: 50, RequestsBurst: 500,
		Bridges: func(ctx context.Context) []console.BridgeRow {
			var out []console.BridgeRow
			for _, b := range gw.BridgeList(ctx) {
				out = append(out, console.BridgeRow{Kind: b.Kind, Name: b.Name, Endpoint: b.Endpoint, State: b.State, Detail: b.Detail})
			}
			return out
		},
		Cluster: func(ctx context.Context) (*console.ClusterView, error) {
			_, _, ok, err := gw.ClusterMembers(ctx)
			if !ok {
				return nil, err
			}
			return &console.ClusterView{}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw.TaskEvents.Watch(s.TaskChanged)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln, "", ""); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, "http://" + ln.Addr().String(), s
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

type client struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (c *client) do(method, path string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, c.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (c *client) login(account, password string) int {
	c.t.Helper()
	_, page := c.do("GET", "/login", nil)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		c.t.Fatalf("no login form:\n%s", page)
	}
	resp, _ := c.do("POST", "/login", url.Values{"csrf": {m[1]}, "jid": {account}, "password": {password}})
	return resp.StatusCode
}

func newClient(t *testing.T, base string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// TestConsoleXMPPLoginAndRun: the operator logs in with the XMPP account's
// real password (a SASL login at Prosody); a non-admin with its real
// password and the operator with a wrong one cannot; the operator runs a
// tool and follows it to its result.
func TestConsoleXMPPLoginAndRun(t *testing.T) {
	t.Parallel()
	e, base := startConsole(t)
	if got := newClient(t, base).login(e.JID("alice"), e2e.Password+"alice"); got != http.StatusUnauthorized {
		t.Errorf("non-admin alice with her password: %d, want 401", got)
	}
	if got := newClient(t, base).login(e.JID("ops"), "not-the-password"); got != http.StatusUnauthorized {
		t.Errorf("ops with a wrong password: %d, want 401", got)
	}
	c := newClient(t, base)
	if got := c.login(e.JID("ops"), e2e.Password+"ops"); got != http.StatusSeeOther {
		t.Fatalf("ops with the password: %d, want 303\n%s", got, e2e.Tail(e.Log.String(), 2000))
	}
	ep := e.Endpoint("weather").String()
	_, page := c.do("GET", "/agents/"+ep, nil)
	if !strings.Contains(page, "Try this tool") || !strings.Contains(page, "ready") {
		t.Fatalf("agent page:\n%s", page)
	}
	csrf := csrfField.FindStringSubmatch(page)[1]
	resp, _ := c.do("POST", "/agents/"+ep+"/run", url.Values{"csrf": {csrf}, "tool": {"slow"}, "arguments": {`{"steps":3}`}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/tasks/task-") {
		t.Fatalf("run: %d %s", resp.StatusCode, loc)
	}
	var st struct {
		State, Result string
		Events        []struct{ Type string }
	}
	testkit.WaitFor(t, 60*time.Second, "the console's task to complete", func() bool {
		_, body := c.do("GET", loc+"/state", nil)
		return json.Unmarshal([]byte(body), &st) == nil && st.State == "completed"
	})
	var types []string
	for _, ev := range st.Events {
		types = append(types, ev.Type)
	}
	if !strings.Contains(strings.Join(types, " "), "progress") || !strings.Contains(st.Result, "slow done") {
		t.Errorf("events %v, result %s", types, st.Result)
	}
	// The bridges page lists the configured agent and an enrolled ACC
	// connector, whose hostile name is text.
	if err := e.Gateway.Store.ACC.Enroll(context.Background(), accdb.Connector{Name: "<b>lab</b>", ID: "6f1c2a5e-0d7b-4c1e-9a43-2f8d5e6b7c90",
		CertSHA256: strings.Repeat("ab", 32), CreatedAt: time.Now().UTC().Format(time.RFC3339)}); err != nil {
		t.Fatal(err)
	}
	_, page = c.do("GET", "/bridges", nil)
	for _, want := range []string{"acc connector", "&lt;b&gt;lab&lt;/b&gt;", "enrolled", strings.Repeat("ab", 32), ep, "Not a cluster"} {
		if !strings.Contains(page, want) {
			t.Errorf("bridges page lacks %q", want)
		}
	}
	if strings.Contains(page, "<b>lab") {
		t.Error("bridges page: the connector's name is markup")
	}
	// The task is the operator's own, as an invoke from that account.
	id := strings.TrimPrefix(loc, "/tasks/")
	task, err := e.Gateway.Store.Tasks.Task(context.Background(), id)
	if err != nil || task.Caller != e.JID("ops") || task.Route != e.JID("ops")+"/"+gateway.ConsoleResource {
		t.Errorf("task %+v, %v", task, err)
	}
}

// TestConsoleBrowser drives the console in headless Chromium as an
// operator would (testdata/console/console.mjs): log in with the XMPP
// account, open the agent, run a tool with the form and watch its
// progress arrive, answer an input request, cancel a task, grant and
// revoke a domain; screenshots of each page at 1280 and 360 px.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	chromium, root := e2e.NeedBrowser(t)
	e, base, srv := startConsoleServer(t)
	// slow, paced: its progress arrives while the page is open (a backend
	// that takes its time, not a wait for a condition).
	pause := taskstest.Step{Do: func(ctx context.Context, _ tasks.Call, _ tasks.Run) error {
		select {
		case <-ctx.Done():
		case <-time.After(700 * time.Millisecond):
		}
		return nil
	}}
	e.Agents[e.Endpoint("weather").String()].Script("slow", pause,
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(25), Stage: "one", Message: "quarter"}}, pause,
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(50), Stage: "two", Message: "half"}}, pause,
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(75), Stage: "three", Message: "most"}}, pause,
		taskstest.Step{Complete: taskstest.Text("slow done")})
	shots := e2e.ArtefactDir(t, "console")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	flows := e2e.RunBrowser(t, ctx, root, "testdata/console/console.mjs", "flow",
		"BASE_URL="+base, "CHROMIUM="+chromium, "ADMIN="+e.JID("ops"),
		"PASSWORD="+e2e.Password+"ops", "ENDPOINT="+e.Endpoint("weather").String(), "SHOTS="+shots)
	flows.Shows(t, "login", "shown", "Agents", e.JID("ops"))
	flows.Shows(t, "agent", "shown", "Weather Agent", "1.0.0", "Try this tool", "ready")
	flows.Shows(t, "progress", "seen", "progress")
	// The form made from slow's schema ({"steps": integer}) sent a number.
	var args string
	if err := e.Gateway.DB.Write.QueryRow(`SELECT CAST(arguments AS TEXT) FROM tasks WHERE tool = 'slow' AND caller = ?`, e.JID("ops")).Scan(&args); err != nil || args != `{"steps":3}` {
		t.Errorf("slow's arguments from the form: %s, %v", args, err)
	}
	// The page showed the task running with progress, then completed,
	// without a reload.
	if n, _ := flows["progress"]["runningWithProgress"].(float64); n < 2 {
		t.Errorf("progress: the page showed %v revisions of the running task with progress, want 2 or more (three arrive 0.7 s apart)", n)
	}
	flows.Shows(t, "progress", "shown", "completed", "slow done")
	// Live updates came over Server-Sent Events, not by polling: the
	// stream ended with the task, and the polling fallback was never asked.
	if live, _ := flows["progress"]["live"].(string); live != "ended" {
		t.Errorf("the task page's live stream: %q, want ended", live)
	}
	if polls, streams := srv.LiveCounts(); polls != 0 || streams < 3 {
		t.Errorf("the task pages polled %d times and opened %d live streams; want 0 polls and a stream per task page (3 or more)", polls, streams)
	}
	flows.Shows(t, "input", "asked", "Which unit?")
	flows.Shows(t, "input", "shown", "completed", "unit")
	flows.Shows(t, "cancel", "shown", "cancelled")
	flows.Shows(t, "grant", "shown", "partner.example", "Granted")
	flows.Shows(t, "revoke", "shown", "Revoked")
	flows.Shows(t, "bridges", "shown", "manifest", e.Endpoint("weather").String(), "Not a cluster")
	if gs, _ := e.Gateway.Store.Grants.List(context.Background()); len(gs) != 0 {
		t.Errorf("grants after revoke: %v", gs)
	}
	entries, _ := os.ReadDir(shots)
	if len(entries) < 10 {
		t.Errorf("%d screenshots in %s, want one per page at 1280 and 360 px", len(entries), shots)
	}
}
