package console_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/adhoc/admincmd"
	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/console"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/store"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

const (
	gw    = "agents.example.test"
	admin = "ops@example.test"
	user  = "alice@example.test"
	token = "console-token-0123456789abcdef0123456789"
	// hostile is an agent name and tool description that would run as
	// script if the console put it into a page as markup.
	hostile = `<script>alert(1)</script><img src=x onerror=alert(2)>`
)

const manifest = `{"agent":{"jid":"weather@agents.example.test","name":"weather","title":"` + `\u003cscript\u003ealert(1)\u003c/script\u003e` + `","description":"<img src=x onerror=alert(2)>","version":"1.4.0"},"manifestSpecVersion":"0","tools":[{"name":"forecast","description":"<script>alert(3)</script>","inputSchema":{"type":"object","properties":{"city":{"type":"string","description":"</pre><script>alert(4)</script>"}}}}]}`

type env struct {
	t      *testing.T
	srv    *httptest.Server
	drv    store.Drivers
	reg    *directory.Registry
	cons   *console.Server
	deps   console.Deps
	db     *sqlite.DB
	logins atomic.Int32
}

type opts struct {
	secure bool
	burst  int
}

// newEnv serves the real console handler over the real registry, admin
// commands and stores on a SQLite file.
func newEnv(t *testing.T, o opts) *env {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	reg, err := directory.NewRegistry(ctx, sqlite.NewDirectory(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetDomain(gw)
	m, err := reg.Register(ctx, []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Activate(ctx, m.Endpoint, m.Version, m.Hash); err != nil {
		t.Fatal(err)
	}
	pol := federation.New([]string{"example.test"}, []string{admin}, nil)
	drv := db.Drivers()
	cmds := admincmd.New(admincmd.Deps{IsAdmin: pol.IsAdmin, Admin: reg, Grants: drv.Grants, SelfReg: drv.SelfReg, Tasks: drv.Tasks, IsLocal: pol.IsLocal})
	e := &env{t: t, drv: drv, reg: reg}
	d := console.Deps{IsAdmin: pol.IsAdmin, Token: token, TokenUser: admin, Directory: reg, Admin: cmds, Tasks: drv.Tasks,
		Grants: drv.Grants, SelfReg: drv.SelfReg, Sessions: drv.ConsoleSessions, Secure: o.secure, RequestsPerSecond: 0.001, RequestsBurst: o.burst,
		// The password check itself is the XMPP server's (e2e/console);
		// here it counts the calls, so a refused account is seen not to
		// reach it.
		CheckPassword: func(ctx context.Context, bare, pw string) error {
			e.logins.Add(1)
			if pw == "pw-right-7f3" {
				return nil
			}
			return errors.New("not-authorized")
		}}
	d.Bridges = func(context.Context) []console.BridgeRow {
		return []console.BridgeRow{{Kind: "mcp", Endpoint: "weather@agents.example.test", State: "ready"}, {Kind: "a2a", Endpoint: hostile, State: "none"},
			{Kind: "oan account", Endpoint: "gofers@agents.example.test", Name: "weather@agents.example.test", State: "connected", Detail: "owner alice@example.test, key ok, key id 0123456789abcdef"}}
	}
	d.Cluster = func(context.Context) (*console.ClusterView, error) {
		return &console.ClusterView{Members: []console.MemberRow{{Instance: "gw-a", Live: true, Tasks: 3}},
			Leases: []console.LeaseRow{{Name: "conn:" + hostile, Holder: "gw-a", Live: true}}}, nil
	}
	if d.RequestsBurst == 0 {
		d.RequestsBurst = 1000
	}
	s, err := console.New(d)
	if err != nil {
		t.Fatal(err)
	}
	e.cons, e.deps, e.db = s, d, db
	e.srv = httptest.NewServer(s)
	t.Cleanup(e.srv.Close)
	return e
}

type client struct {
	t    *testing.T
	e    *env
	http *http.Client
}

func (e *env) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: e.t, e: e, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) do(method, path string, form url.Values, hdr ...string) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, c.e.srv.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in the page:\n%s", page)
	}
	return m[1]
}

// loginToken logs in by token and returns the session's CSRF token.
func (c *client) loginToken() string {
	c.t.Helper()
	_, page := c.do("GET", "/login", nil)
	resp, _ := c.do("POST", "/login", url.Values{"csrf": {csrfOf(c.t, page)}, "token": {token}})
	if resp.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("token login: %d", resp.StatusCode)
	}
	_, page = c.do("GET", "/grants", nil)
	return csrfOf(c.t, page)
}

func TestHeadersAndNoInlineScript(t *testing.T) {
	t.Parallel()
	e := newEnv(t, opts{})
	c := e.client()
	csrf := c.loginToken()
	_ = csrf
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<]|<[a-z][^>]*\s(?:on[a-z]+|style)\s*=|javascript:`)
	for _, p := range []string{"/login", "/agents", "/agents/weather@agents.example.test", "/grants", "/selfreg", "/tasks", "/bridges"} {
		resp, body := c.do("GET", p, nil)
		if resp.StatusCode != http.StatusOK && p != "/login" {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != console.CSP {
			t.Errorf("GET %s: CSP %q", p, got)
		}
		for _, h := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
			if !strings.Contains(console.CSP, h) {
				t.Errorf("the CSP lacks %s", h)
			}
		}
		if strings.Contains(console.CSP, "unsafe-inline") || strings.Contains(console.CSP, "unsafe-eval") {
			t.Errorf("the CSP allows inline script or eval")
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: headers %v", p, resp.Header)
		}
		if loc := inline.FindString(body); loc != "" {
			t.Errorf("GET %s: inline script or handler %q in the page", p, loc)
		}
		if strings.Contains(body, token) {
			t.Errorf("GET %s: the console token is in the page", p)
		}
	}
	// The embedded script and stylesheet are served from the console.
	for _, p := range []string{"/static/console.js", "/static/console.css"} {
		resp, body := c.do("GET", p, nil)
		if resp.StatusCode != http.StatusOK || len(body) < 100 {
			t.Errorf("GET %s: %d, %d bytes", p, resp.StatusCode, len(body))
		}
	}
}

func TestLoginAndCookieFlags(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		e := newEnv(t, opts{secure: secure})
		c := e.client()
		resp, _ := c.do("GET", "/agents", nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Fatalf("unauthenticated GET /agents: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
		_, page := c.do("GET", "/login", nil)
		lc := csrfOf(t, page)
		// A wrong token, and a login form without its CSRF token.
		resp, body := c.do("POST", "/login", url.Values{"csrf": {lc}, "token": {"wrong-" + token}})
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Login failed") || strings.Contains(body, "wrong-"+token) {
			t.Fatalf("wrong token: %d %s", resp.StatusCode, body)
		}
		_, page = c.do("GET", "/login", nil)
		resp, _ = c.do("POST", "/login", url.Values{"token": {token}})
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("login without its CSRF token: %d", resp.StatusCode)
		}
		resp, _ = c.do("POST", "/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {token}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("token login: %d", resp.StatusCode)
		}
		var sess *http.Cookie
		for _, ck := range resp.Cookies() {
			if strings.Contains(ck.Name, "agentgw_console") && ck.MaxAge > 0 {
				sess = ck
			}
		}
		if sess == nil {
			t.Fatalf("no session cookie: %v", resp.Header["Set-Cookie"])
		}
		wantName := "agentgw_console"
		if secure {
			wantName = "__Host-agentgw_console"
		}
		if sess.Name != wantName || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Secure != secure || sess.Path != "/" {
			t.Errorf("secure=%v: session cookie %+v", secure, sess)
		}
		if secure {
			continue // the test client does not send Secure cookies over http
		}
		resp, body = c.do("GET", "/agents", nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "weather@agents.example.test") {
			t.Fatalf("GET /agents after login: %d", resp.StatusCode)
		}
		// Logging out ends the session on the server, not only the cookie.
		resp, _ = c.do("POST", "/logout", url.Values{"csrf": {csrfOf(t, body)}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("logout: %d", resp.StatusCode)
		}
		req, _ := http.NewRequest("GET", e.srv.URL+"/agents", nil)
		req.AddCookie(&http.Cookie{Name: sess.Name, Value: sess.Value})
		r2, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r2.Body.Close()
		if r2.StatusCode != http.StatusSeeOther {
			t.Errorf("the session cookie still works after logout: %d", r2.StatusCode)
		}
	}
}

func TestXMPPLoginOnlyForAdmins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, opts{})
	try := func(account, pw string) int {
		c := e.client()
		_, page := c.do("GET", "/login", nil)
		resp, body := c.do("POST", "/login", url.Values{"csrf": {csrfOf(t, page)}, "jid": {account}, "password": {pw}})
		if resp.StatusCode != http.StatusSeeOther && !strings.Contains(body, "Login failed: wrong credentials, or the account is not an operator.") {
			t.Errorf("%s: refusal without the one message: %s", account, body)
		}
		if strings.Contains(body, pw) {
			t.Errorf("%s: the password is in the page", account)
		}
		return resp.StatusCode
	}
	if got := try(user, "pw-right-7f3"); got != http.StatusUnauthorized {
		t.Errorf("a non-admin account with its right password: %d, want 401", got)
	}
	if n := e.logins.Load(); n != 0 {
		t.Errorf("a non-admin's password was tried at the XMPP server (%d logins)", n)
	}
	if got := try(admin, "pw-wrong-9c1"); got != http.StatusUnauthorized {
		t.Errorf("an admin with a wrong password: %d", got)
	}
	if got := try(admin+"/laptop", "pw-right-7f3"); got != http.StatusSeeOther {
		t.Errorf("an admin with the right password: %d", got)
	}
	if got := try(strings.Repeat("a", 5000)+"@example.test", "pw-right-7f3"); got != http.StatusUnauthorized {
		t.Errorf("an oversized account: %d", got)
	}
}

func TestCSRFOnEveryStateChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, opts{})
	c := e.client()
	csrf := c.loginToken()
	grant := url.Values{"principal": {"partner.example"}, "scope": {"visibility"}}
	with := func(v url.Values, k, x string) url.Values {
		o := url.Values{}
		for a, b := range v {
			o[a] = b
		}
		o.Set(k, x)
		return o
	}
	posts := []string{"/grants/grant", "/grants/revoke", "/selfreg/ban", "/selfreg/unban", "/logout",
		"/tasks/task-0123456789abcdef/cancel", "/tasks/task-0123456789abcdef/input", "/agents/weather@agents.example.test/run"}
	for _, p := range posts {
		for name, form := range map[string]url.Values{"none": grant, "wrong": with(grant, "csrf", "x"+csrf)} {
			resp, _ := c.do("POST", p, form)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST %s with %s CSRF token: %d, want 403", p, name, resp.StatusCode)
			}
		}
		resp, _ := c.do("POST", p, with(grant, "csrf", csrf), "Origin", "https://evil.example")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s cross-origin: %d, want 403", p, resp.StatusCode)
		}
		resp, _ = c.do("POST", p, with(grant, "csrf", csrf), "Sec-Fetch-Site", "cross-site")
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s cross-site: %d, want 403", p, resp.StatusCode)
		}
	}
	if gs, _ := e.drv.Grants.List(context.Background()); len(gs) != 0 {
		t.Fatalf("a refused request changed the grants: %v", gs)
	}
	// With the token: granted and revoked through the admin commands.
	resp, _ := c.do("POST", "/grants/grant", with(grant, "csrf", csrf), "Origin", e.srv.URL)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("grant: %d", resp.StatusCode)
	}
	_, page := c.do("GET", "/grants", nil)
	if gs, _ := e.drv.Grants.List(context.Background()); len(gs) != 1 || gs[0].Principal != "partner.example" || !strings.Contains(page, "Granted visibility to partner.example") {
		t.Fatalf("after grant: %v\n%s", gs, page)
	}
	resp, _ = c.do("POST", "/grants/revoke", url.Values{"csrf": {csrf}, "principal": {"partner.example"}})
	if gs, _ := e.drv.Grants.List(context.Background()); resp.StatusCode != http.StatusSeeOther || len(gs) != 0 {
		t.Fatalf("after revoke: %d %v", resp.StatusCode, gs)
	}
	// Ban and unban.
	c.do("POST", "/selfreg/ban", url.Values{"csrf": {csrf}, "endpoint": {"bot@example.test"}, "reason": {hostile}})
	_, page = c.do("GET", "/selfreg", nil)
	if ok, _ := e.drv.SelfReg.Banned(context.Background(), "bot@example.test"); !ok || strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(1)") {
		t.Fatalf("ban: banned=%v\n%s", ok, page)
	}
	c.do("POST", "/selfreg/unban", url.Values{"csrf": {csrf}, "endpoint": {"bot@example.test"}})
	if ok, _ := e.drv.SelfReg.Banned(context.Background(), "bot@example.test"); ok {
		t.Fatal("unban did not lift the ban")
	}
}

func TestHostileInputIsText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, opts{})
	c := e.client()
	csrf := c.loginToken()
	for _, p := range []string{"/agents", "/agents/weather@agents.example.test", "/bridges"} {
		_, body := c.do("GET", p, nil)
		for _, bad := range []string{"<script>alert", "<img src=x", "</pre><script>"} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s: %q is markup in the page", p, bad)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;alert(") {
			t.Errorf("GET %s: the hostile text is not shown as text", p)
		}
	}
	// Oversized and hostile form fields: a fixed refusal, never echoed.
	big := strings.Repeat("<b>x</b>", 2000)
	c.do("POST", "/grants/grant", url.Values{"csrf": {csrf}, "principal": {big}, "scope": {"visibility"}})
	_, page := c.do("GET", "/grants", nil)
	if strings.Contains(page, "<b>x</b>") || !strings.Contains(page, "The principal field must be a domain or a bare JID.") {
		t.Errorf("oversized principal:\n%s", page)
	}
	c.do("POST", "/grants/grant", url.Values{"csrf": {csrf}, "principal": {"ok.example"}, "scope": {hostile}})
	_, page = c.do("GET", "/grants", nil)
	if strings.Contains(page, "<script>alert") || !strings.Contains(page, "The scope field takes visibility and invocation only.") {
		t.Errorf("hostile scope:\n%s", page)
	}
	// A body over the console's bound is refused before it is read whole.
	resp, _ := c.do("POST", "/grants/grant", url.Values{"csrf": {csrf}, "principal": {strings.Repeat("a", 2<<20)}})
	if resp.StatusCode != http.StatusRequestEntityTooLarge && resp.StatusCode != http.StatusForbidden {
		t.Errorf("a 2 MiB form: %d", resp.StatusCode)
	}
	if gs, _ := e.drv.Grants.List(context.Background()); len(gs) != 0 {
		t.Errorf("hostile forms stored grants: %v", gs)
	}
	// A hostile search and an unknown agent are not reflected as markup.
	_, body := c.do("GET", "/agents?q="+url.QueryEscape(hostile), nil)
	if strings.Contains(body, "<script>alert") {
		t.Error("the search box reflects markup")
	}
	resp, body = c.do("GET", "/agents/"+url.PathEscape("<script>@x"), nil)
	if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "<script>") {
		t.Errorf("unknown agent: %d %s", resp.StatusCode, body)
	}
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, opts{})
	// Logins: five a minute per address, then 429 whatever the form.
	c := e.client()
	_, page := c.do("GET", "/login", nil)
	lc := csrfOf(t, page)
	codes := []int{}
	for i := 0; i < 7; i++ {
		resp, _ := c.do("POST", "/login", url.Values{"csrf": {lc}, "jid": {admin}, "password": {"wrong"}})
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == http.StatusUnauthorized {
			_, page = c.do("GET", "/login", nil)
			lc = csrfOf(t, page)
		}
	}
	if codes[4] != http.StatusUnauthorized || codes[5] != http.StatusTooManyRequests || codes[6] != http.StatusTooManyRequests {
		t.Errorf("login codes %v: want five 401 then 429", codes)
	}
	if n := e.logins.Load(); n != 5 {
		t.Errorf("%d passwords tried at the XMPP server, want 5", n)
	}
	// Requests: a burst, then 429.
	e2 := newEnv(t, opts{burst: 10})
	c2 := e2.client()
	var got []int
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 12 && time.Now().Before(deadline); i++ {
		resp, _ := c2.do("GET", "/static/console.css", nil)
		got = append(got, resp.StatusCode)
	}
	if got[9] != http.StatusOK || got[10] != http.StatusTooManyRequests || got[11] != http.StatusTooManyRequests {
		t.Errorf("request codes %v: want ten 200 then 429", got)
	}
}

// TestTaskListSearchAndPages: the task list reads the store newest first,
// filters by the search box and by live/settled, pages by 50, and shows a
// hostile tool name as text.
func TestTaskListSearchAndPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, opts{})
	ctx := context.Background()
	tx, err := e.drv.Tasks.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	for i := 0; i < 60; i++ {
		tool := "forecast"
		if i == 59 {
			tool = hostile
		}
		tk := &taskdb.Task{ID: fmt.Sprintf("task-%016x%s", i, "aaaaaaaaaaaaaaaa"), Caller: user, Route: user + "/r", Endpoint: "weather@agents.example.test",
			RequestID: fmt.Sprintf("req-%030d", i), Tool: tool, APIVersion: "1.4.0", ManifestHash: "h", Arguments: []byte(`{}`), Fingerprint: make([]byte, 32), Revision: 1,
			State: agentproto.StateRunning, Created: base.Add(time.Duration(i) * time.Second), Updated: base, RetainUntil: base.Add(48 * time.Hour), PurgeAfter: base.Add(48 * time.Hour)}
		if i%2 == 0 {
			tk.State, tk.Result = agentproto.StateCompleted, []byte(`{"result":{}}`)
		}
		if _, err := tx.InsertTask(tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	c.loginToken()
	count := func(page string) int { return strings.Count(page, `<a href="/tasks/task-`) }
	_, page := c.do("GET", "/tasks", nil)
	if n := count(page); n != 50 || !strings.Contains(page, "older →") || strings.Contains(page, "<script>alert") {
		t.Errorf("first page: %d tasks", n)
	}
	if first := strings.Index(page, "task-000000000000003b"); first < 0 || first > strings.Index(page, "task-000000000000003a") {
		t.Error("the newest task is not first")
	}
	_, page = c.do("GET", "/tasks?page=1", nil)
	if n := count(page); n != 10 || strings.Contains(page, "older →") {
		t.Errorf("second page: %d tasks", n)
	}
	_, page = c.do("GET", "/tasks?show=live", nil)
	if n := count(page); n != 30 || strings.Contains(page, ">completed<") {
		t.Errorf("live: %d tasks", n)
	}
	_, page = c.do("GET", "/tasks?show=settled&q=000000000000001", nil)
	if n := count(page); n != 8 {
		t.Errorf("settled matching 1x: %d tasks", n)
	}
	_, page = c.do("GET", "/tasks?q="+url.QueryEscape("<SCRIPT>"), nil)
	if n := count(page); n != 1 || strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(1)") {
		t.Errorf("hostile tool search: %d tasks", n)
	}
}
