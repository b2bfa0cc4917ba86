package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/console"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// stream is one open /tasks/{id}/live response.
type stream struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func (c *client) live(id string) (*stream, int) {
	c.t.Helper()
	// Bounded: a stream that never sends fails the test, not hangs it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", c.e.srv.URL+"/tasks/"+id+"/live", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, resp.StatusCode
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	return &stream{resp: resp, sc: bufio.NewScanner(resp.Body)}, resp.StatusCode
}

// next reads the next event: its name and data; "" at the end of the
// stream.
func (s *stream) next(t *testing.T) (string, string) {
	t.Helper()
	var name, data string
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "" && name != "":
			return name, data
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
	return "", ""
}

func (e *env) insertRunning(id string) *taskdb.Task {
	e.t.Helper()
	now := time.Now()
	tk := &taskdb.Task{ID: id, Caller: user, Route: user + "/r", Endpoint: "weather@agents.example.test",
		RequestID: "req-" + id, Tool: "forecast", APIVersion: "1.4.0", ManifestHash: "h", Arguments: []byte(`{}`), Fingerprint: make([]byte, 32), Revision: 1,
		State: agentproto.StateRunning, Created: now, Updated: now, RetainUntil: now.Add(48 * time.Hour), PurgeAfter: now.Add(48 * time.Hour)}
	tx, err := e.drv.Tasks.Begin(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := tx.InsertTask(tk); err != nil {
		e.t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
	return tk
}

func (e *env) settle(tk *taskdb.Task, result string) {
	e.t.Helper()
	tx, err := e.drv.Tasks.Begin(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	prev := tk.Revision
	tk.Revision++
	tk.State, tk.Result, tk.Updated = agentproto.StateCompleted, []byte(result), time.Now()
	if ok, err := tx.UpdateTask(tk, prev, agentproto.StateRunning); !ok || err != nil {
		e.t.Fatalf("update: %v %v", ok, err)
	}
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
}

// TestLiveTaskStream: the task page's Server-Sent Events stream sends the
// task at once (as text/event-stream under the console's CSP), the new
// revision when the gateway reports it (TaskChanged), then "end" and
// closes when the task is settled; a login holds at most four streams
// (the fifth is 429 until one closes); hostile result text is JSON data,
// never markup; a stream of a logged-out session ends.
func TestLiveTaskStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, opts{})
	c := e.client()
	c.loginToken()
	tk := e.insertRunning("task-live0000000000000000000000")

	s, code := c.live(tk.ID)
	if code != http.StatusOK {
		t.Fatalf("live: %d", code)
	}
	if ct := s.resp.Header.Get("Content-Type"); ct != "text/event-stream" || s.resp.Header.Get("Content-Security-Policy") != console.CSP {
		t.Errorf("stream headers: %v", s.resp.Header)
	}
	name, data := s.next(t)
	var v struct {
		State    string
		Revision int64
		Terminal bool
		Result   string
	}
	if name != "task" || json.Unmarshal([]byte(data), &v) != nil || v.State != "running" || v.Revision != 1 {
		t.Fatalf("first event %q %s", name, data)
	}

	// Three more streams for this login; the fifth is refused.
	for i := 0; i < 3; i++ {
		if _, code := c.live(tk.ID); code != http.StatusOK {
			t.Fatalf("stream %d: %d", i+2, code)
		}
	}
	if _, code := c.live(tk.ID); code != http.StatusTooManyRequests {
		t.Errorf("a fifth stream for one login: %d, want 429", code)
	}
	// Another login has its own four.
	c2 := e.client()
	c2.loginToken()
	s2, code := c2.live(tk.ID)
	if code != http.StatusOK {
		t.Fatalf("another login's stream: %d", code)
	}
	s2.next(t)

	// The task settles with hostile text; the gateway reports it.
	start := time.Now()
	e.settle(tk, `{"result":{"content":[{"type":"text","text":"`+strings.ReplaceAll(hostile, `"`, `\"`)+`"}]}}`)
	e.cons.TaskChanged(tk.ID)
	name, data = s.next(t)
	if name != "task" || json.Unmarshal([]byte(data), &v) != nil || v.State != "completed" || !v.Terminal || v.Revision != 2 {
		t.Fatalf("after settling: %q %s", name, data)
	}
	if !strings.Contains(v.Result, "<script>alert(1)") || strings.Contains(data, "<script>") {
		t.Errorf("the hostile result must arrive as escaped JSON text: %s", data)
	}
	t.Logf("settled revision on the stream after %v", time.Since(start).Round(time.Millisecond))
	if name, _ := s.next(t); name != "end" {
		t.Errorf("after the settled task: %q, want end", name)
	}
	if name, _ := s.next(t); name != "" {
		t.Errorf("the stream stays open after end: %q", name)
	}
	// The other login's stream saw the change without TaskChanged for it
	// (the recheck, as for a task another cluster member runs).
	if name, _ := s2.next(t); name != "task" {
		t.Errorf("the second login's stream: %q", name)
	}

	// A settled task's stream: the task and end at once.
	s3, code := c2.live(tk.ID)
	if code != http.StatusOK {
		t.Fatalf("settled task stream: %d", code)
	}
	if a, _ := s3.next(t); a != "task" {
		t.Errorf("settled task stream: %q", a)
	}
	if b, _ := s3.next(t); b != "end" {
		t.Errorf("settled task stream: then %q", b)
	}

	// Logged out: a stream of that login ends at the next recheck.
	tk2 := e.insertRunning("task-live1111111111111111111111")
	c3 := e.client()
	csrf := c3.loginToken()
	s4, code := c3.live(tk2.ID)
	if code != http.StatusOK {
		t.Fatalf("stream before logout: %d", code)
	}
	s4.next(t)
	if resp, _ := c3.do("POST", "/logout", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	e.cons.TaskChanged(tk2.ID)
	if name, _ := s4.next(t); name != "" {
		t.Errorf("a logged-out login's stream still sends %q", name)
	}
	if _, code := c3.live(tk2.ID); code == http.StatusOK {
		t.Error("a logged-out login opened a stream")
	}
	if polls, streams := e.cons.LiveCounts(); polls != 0 || streams != 7 {
		t.Errorf("counts: %d polls, %d streams; want 0 and 7", polls, streams)
	}
}

// TestBridgesPageDetail: the bridges page shows what each bridge tells
// (the row's name under its endpoint) and each cluster member with the
// live leases it holds, hostile names as text.
func TestBridgesPageDetail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, opts{})
	c := e.client()
	c.loginToken()
	_, page := c.do("GET", "/bridges", nil)
	for _, want := range []string{"Leases held", "<td>gw-a</td>", "<code>conn:&lt;script&gt;alert(1)&lt;/script&gt;", "oan account", "<small>weather@agents.example.test</small>", "owner alice@example.test, key ok, key id 0123456789abcdef"} {
		if !strings.Contains(page, want) {
			t.Errorf("bridges page lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script>") {
		t.Error("markup on the bridges page")
	}
}

// TestSessionsShared: a login made at one console works at another on the
// same store (a cluster's members behind a balancer; a restart), with the
// same CSRF token and the note of the last action; the store holds the
// session ID's SHA-256, never the cookie's value; logout at one ends it at
// both.
func TestSessionsShared(t *testing.T) {
	t.Parallel()
	e := newEnv(t, opts{})
	other, err := console.New(e.deps)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(other)
	t.Cleanup(srv2.Close)
	c := e.client()
	csrf := c.loginToken()
	u, _ := url.Parse(e.srv.URL)
	var id string
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == "agentgw_console" {
			id = ck.Value
		}
	}
	if id == "" {
		t.Fatal("no session cookie")
	}
	// The same cookie at the second console.
	c2 := &client{t: t, e: &env{t: t, srv: srv2}, http: &http.Client{Jar: c.http.Jar, CheckRedirect: c.http.CheckRedirect}}
	u2, _ := url.Parse(srv2.URL)
	c.http.Jar.SetCookies(u2, []*http.Cookie{{Name: "agentgw_console", Value: id, Path: "/"}})
	resp, page := c2.do("GET", "/grants", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Log out") || csrfOf(t, page) != csrf {
		t.Fatalf("the login at the second console: %d", resp.StatusCode)
	}
	// An action at the first; its note shows at the second, once.
	if resp, _ := c.do("POST", "/grants/grant", url.Values{"csrf": {csrf}, "principal": {"partner.example"}, "scope": {"visibility"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("grant: %d", resp.StatusCode)
	}
	_, page = c2.do("GET", "/grants", nil)
	if !strings.Contains(page, `class="flash`) {
		t.Errorf("the note of the action at the first console is not shown at the second:\n%s", page)
	}
	if _, page = c.do("GET", "/grants", nil); strings.Contains(page, `class="flash`) {
		t.Error("the note was shown twice")
	}
	// The store holds the ID's hash only.
	var n int
	if err := e.db.Write.QueryRow(`SELECT COUNT(*) FROM console_sessions WHERE id_hash = ?`, id).Scan(&n); err != nil || n != 0 {
		t.Errorf("the session ID itself is in the store: %d %v", n, err)
	}
	if err := e.db.Write.QueryRow(`SELECT COUNT(*) FROM console_sessions WHERE instr(id_hash, ?) > 0 OR instr(operator, ?) > 0 OR instr(note, ?) > 0`, id, id, id).Scan(&n); err != nil || n != 0 {
		t.Errorf("the session ID appears in the store: %d %v", n, err)
	}
	if err := e.db.Write.QueryRow(`SELECT COUNT(*) FROM console_sessions`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d sessions stored, want 1: %v", n, err)
	}
	// Logout at the second ends the login at the first.
	if resp, _ := c2.do("POST", "/logout", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp, _ := c.do("GET", "/grants", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout at the other console: %d, want 303 to /login", resp.StatusCode)
	}
}
