package secrets

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/testkit/e2e"
)

// plConsole is every console page the audit fetched, and the login
// answers.
const plConsole = "console pages"

var secCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// secConsole logs in to the console of the served gateway at addr: once
// with alice's XMPP password (refused: she is not in [xmpp] admins), once
// with the token; it fetches every page, records them, and returns the
// session cookie's value.
func secConsole(t *testing.T, addr, token, alice, password, endpoint string, rec *e2e.SecRecorder) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "http://" + addr
	get := func(path string) string {
		resp, err := c.Get(base + path)
		if err != nil {
			t.Fatalf("console GET %s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		rec.Add(plConsole, b)
		return string(b)
	}
	login := func(form url.Values) *http.Response {
		m := secCSRF.FindStringSubmatch(get("/login"))
		if m == nil {
			t.Fatal("console: no login form")
		}
		form.Set("csrf", m[1])
		resp, err := c.PostForm(base+"/login", form)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		rec.Add(plConsole, b)
		return resp
	}
	if resp := login(url.Values{"jid": {alice}, "password": {password}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("console login of non-admin alice: %d, want 401", resp.StatusCode)
	}
	resp := login(url.Values{"token": {token}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("console token login: %d", resp.StatusCode)
	}
	var session string
	for _, ck := range resp.Cookies() {
		if ck.Name == "agentgw_console" {
			session = ck.Value
		}
	}
	if len(session) < 32 {
		t.Fatalf("console: no session cookie: %v", resp.Header["Set-Cookie"])
	}
	for _, p := range []string{"/agents", "/agents/" + endpoint, "/tasks", "/grants", "/selfreg"} {
		if body := get(p); !strings.Contains(body, "Log out") {
			t.Errorf("console %s: not the logged-in page", p)
		}
	}
	// The bridges page tells what each bridge knows (the xAgent channel,
	// the OAN account and its key's health by key id), with no secret:
	// the page is recorded like the others.
	if body := get("/bridges"); !strings.Contains(body, "xagent channel") || !strings.Contains(body, "oan account") || !strings.Contains(body, "owner alice@") {
		t.Errorf("console /bridges lacks the bridges' detail:\n%s", body)
	}
	return session
}
