package console

import (
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// TestConsoleSessionsAcrossCluster: two `agentgw serve` members on one
// PostgreSQL behind ejabberd, each with its console. A login made at gw-1
// works at gw-2 (as behind a balancer) with the same CSRF token; an action
// at gw-2 shows its note once; the login survives gw-1's restart; logout
// at gw-2 ends it at gw-1. The store holds no session ID.
func TestConsoleSessionsAcrossCluster(t *testing.T) {
	t.Parallel()
	pg := pgharness.Start(t)
	dsn := pg.NewDatabase(t)
	srv := xmppharness.StartEjabberd(t, xmppharness.EjabberdOptions{Snippet: "deploy/cluster/ejabberd-listener.yml"})
	addr1, addr2 := e2e.FreeAddr(t), e2e.FreeAddr(t)
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"ops"}, Admins: []string{"ops"}, PostgresDSN: dsn, Instance: "gw-1",
		TOML: fmt.Sprintf("[console]\nlisten = %q\ntoken_file = \"console.token\"\n", addr1)})
	token := "console-cluster-token-" + strings.Repeat("c", 32)
	if err := os.WriteFile(filepath.Join(e.Dir, "console.token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg1, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg2 := strings.Replace(strings.Replace(string(cfg1), `instance = "gw-1"`, `instance = "gw-2"`, 1), addr1, addr2, 1)
	path2 := filepath.Join(e.Dir, "gw-2.toml")
	if err := os.WriteFile(path2, []byte(cfg2), 0o600); err != nil {
		t.Fatal(err)
	}
	gw1 := e.Serve("gw-1")
	gw2 := e.ServeConfig("gw-2", path2)
	gw1.WaitLog("console listening", 30*time.Second)
	gw2.WaitLog("console listening", 30*time.Second)
	base1, base2 := "http://"+addr1, "http://"+addr2

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Timeout: 30 * time.Second, Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp := loginAt(t, hc, base1, url.Values{"token": {token}})
	ck := sessionCookie(resp, "agentgw_console")
	if resp.StatusCode != http.StatusSeeOther || ck == nil {
		t.Fatalf("login at gw-1: %d", resp.StatusCode)
	}
	// The same cookie at gw-2 (a cookie names a host, not a port).
	u2, _ := url.Parse(base2)
	jar.SetCookies(u2, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/"}})
	code, page := getPage(t, hc, base1+"/grants")
	m := csrfField.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		t.Fatalf("gw-1 grants page: %d", code)
	}
	code, page2 := getPage(t, hc, base2+"/grants")
	m2 := csrfField.FindStringSubmatch(page2)
	if code != http.StatusOK || !strings.Contains(page2, "Log out") || m2 == nil || m2[1] != m[1] {
		t.Fatalf("the login made at gw-1 at gw-2: %d (same CSRF token: %v)", code, m2 != nil && m2[1] == m[1])
	}
	// An action at gw-2; its note is shown once, at gw-1.
	r, err := hc.PostForm(base2+"/grants/grant", url.Values{"csrf": {m[1]}, "principal": {"partner.example"}, "scope": {"visibility"}})
	if err != nil || r.StatusCode != http.StatusSeeOther {
		t.Fatalf("grant at gw-2: %v %v", r, err)
	}
	r.Body.Close()
	if _, page := getPage(t, hc, base1+"/grants"); !strings.Contains(page, `class="flash ok"`) || !strings.Contains(page, "partner.example") {
		t.Errorf("gw-1 does not show the note of the grant made at gw-2:\n%s", page)
	}
	if _, page := getPage(t, hc, base2+"/grants"); strings.Contains(page, `class="flash`) {
		t.Error("the note was shown twice")
	}
	// gw-1 restarts; the login stays.
	gw1.Stop()
	gw1 = e.Serve("gw-1")
	gw1.WaitLog("console listening", 30*time.Second)
	if code, page := getPage(t, hc, base1+"/agents"); code != http.StatusOK || !strings.Contains(page, "Log out") {
		t.Errorf("after gw-1's restart: %d", code)
	}
	// The bridges page lists both members, live, with the leases they hold.
	if _, page := getPage(t, hc, base2+"/bridges"); !strings.Contains(page, "<td>gw-1</td>") || !strings.Contains(page, "<td>gw-2</td>") || !strings.Contains(page, "Leases held") {
		t.Errorf("the bridges page does not list the members:\n%s", page)
	} else {
		t.Logf("members on the bridges page: %d live", strings.Count(page, "<td>live</td>"))
	}
	// The store holds the ID's SHA-256 only.
	db := pgharness.Open(t, dsn)
	var n int
	if err := db.Pool.QueryRow(t.Context(), `SELECT COUNT(*) FROM console_sessions WHERE strpos(id_hash || operator || note, $1) > 0`, ck.Value).Scan(&n); err != nil || n != 0 {
		t.Errorf("the session ID is in the store: %d %v", n, err)
	}
	if err := db.Pool.QueryRow(t.Context(), `SELECT COUNT(*) FROM console_sessions`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d sessions stored, want 1: %v", n, err)
	}
	// Logout at gw-2 ends the login at gw-1.
	r, err = hc.PostForm(base2+"/logout", url.Values{"csrf": {m[1]}})
	if err != nil || r.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout at gw-2: %v %v", r, err)
	}
	r.Body.Close()
	jar.SetCookies(u2, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/"}}) // a client that kept it
	if code, _ := getPage(t, hc, base1+"/agents"); code != http.StatusSeeOther {
		t.Errorf("gw-1 after logout at gw-2: %d, want 303 to /login", code)
	}
}
