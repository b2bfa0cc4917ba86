package a2afront_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
)

// Hostile push configs against `agentgw a2a --push` (JS SDK 1.3.0, 1.0
// and 0.3 clients): a receiver on loopback is refused by default — as a
// CreateTaskPushNotificationConfig and inside SendMessage (which then
// starts nothing) — and never contacted; bad schemes, credentials in the
// URL, overlong URLs, a Basic scheme without credentials and a 2 MiB
// token each get a clear error that echoes none of the config. With
// --push-allow-private the same loopback receiver is served (0.3 JSON-RPC
// and 1.0 HTTP+JSON clients giving the config inside SendMessage), and a receiver that redirects to
// another host is not followed: the notification is given up after
// --push-max-attempts with a log line, and the other host never hears; a
// receiver answering with a 20 MiB body is read 64 KiB and counts as
// delivered.
func TestA2AFrontPushHostile(t *testing.T) {
	t.Parallel()
	x := gateway(t)
	var contacted atomic.Int64
	loop := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { contacted.Add(1) }))
	t.Cleanup(loop.Close)
	weather := "weather@" + x.env.Domain

	x.startFront(t, "--push")
	hostile := []map[string]any{
		{"url": loop.URL + "/hook"},
		{"url": "ftp://push.example/hook"},
		{"url": "javascript:alert(1)"},
		{"url": "http://user:pw-secret@push.example/hook"},
		{"url": "http://push.example/" + strings.Repeat("a", 3000)},
		{"url": "http://169.254.169.254/latest/meta-data"},
		{"url": "http://93.184.215.14/hook", "scheme": "Basic"},
		{"url": "http://93.184.215.14/hook", "tokenRepeat": 2 << 20},
	}
	want := []string{"a loopback address", "not an http or https URL", "not an http or https URL", "credentials in the URL",
		"longer than 2048 bytes", "a link-local address", "only for the Bearer scheme", "larger than"}
	plan := []map[string]any{{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false}}
	for _, h := range hostile {
		plan = append(plan, map[string]any{"op": "pushcreate", "jid": weather, "taskOf": 0, "url": h["url"], "scheme": h["scheme"], "tokenRepeat": h["tokenRepeat"]})
	}
	plan = append(plan,
		map[string]any{"op": "send", "jid": weather, "skill": "echo", "data": map[string]any{"message": "m"}, "blocking": false, "push": map[string]any{"url": loop.URL + "/hook"}},
		map[string]any{"op": "pushlist", "jid": weather, "taskOf": 0},
	)
	steps := x.runProto(t, "1.0-jsonrpc", nil, plan...)
	noError(t, steps[0])
	for i, w := range append(want, "a loopback address") {
		s := steps[i+1]
		if s.Error == nil || !strings.Contains(s.Error.Message, w) {
			t.Errorf("hostile config %d: %+v, want an error saying %q", i, s.Error, w)
			continue
		}
		for _, echo := range []string{"push.example", "pw-secret", "169.254", "93.184", "ttttt", "127.0.0.1", "alert"} {
			if strings.Contains(s.Error.Message, echo) {
				t.Errorf("hostile config %d: the error echoes the config: %q", i, s.Error.Message)
			}
		}
		t.Logf("hostile config %d: %v %s", i, s.Error.Code, s.Error.Message)
	}
	if s := steps[len(steps)-1]; s.Error != nil || s.Push == nil || s.Push.N != 0 {
		t.Errorf("configs stored after the refusals: %+v %+v", s.Push, s.Error)
	}
	echoes := 0
	for _, c := range x.weather.Calls() {
		if c.Tool == "echo" {
			echoes++
		}
	}
	if echoes != 0 {
		t.Errorf("a SendMessage with a refused push config started %d tasks", echoes)
	}

	// Allowed with --push-allow-private: the loopback receiver is served;
	// a redirect to another host is not followed.
	var moved, stolen atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { stolen.Add(1) }))
	t.Cleanup(other.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		moved.Add(1)
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	ok := newReceiver(t, false)
	f := x.startFront(t, "--push-allow-private", "--push", "--push-max-attempts", "2", "--push-timeout", "2s", "-v")
	steps = x.runProto(t, "0.3", nil,
		map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false, "push": map[string]any{"url": ok.srv.URL + "/hook", "token": "tok-secret-ok"}},
		map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false, "push": map[string]any{"url": redirect.URL + "/hook"}},
	)
	noError(t, steps[0])
	noError(t, steps[1])
	testkit.WaitFor(t, 60*time.Second, "the 0.3 client's push config served on loopback", func() bool {
		ok.mu.Lock()
		defer ok.mu.Unlock()
		return len(ok.states) > 0
	})
	// The same inside a 1.0 HTTP+JSON SendMessage, blocking: the
	// completed task's notification arrives.
	rest := x.runProto(t, "1.0-rest", nil, map[string]any{"op": "send", "jid": weather, "skill": "echo", "data": map[string]any{"message": "m"},
		"push": map[string]any{"url": ok.srv.URL + "/hook", "token": "tok-secret-ok"}})[0]
	noError(t, rest)
	testkit.WaitFor(t, 60*time.Second, "the HTTP+JSON client's completed task notified", func() bool { return ok.got("TASK_STATE_COMPLETED") })
	ok.mu.Lock()
	for _, tok := range ok.tokens {
		if tok != "tok-secret-ok" {
			t.Errorf("a notification without the config's token: %q", tok)
		}
	}
	ok.mu.Unlock()
	testkit.WaitFor(t, 60*time.Second, "the redirected notification given up", func() bool {
		return f.logged("giving up", steps[1].Task.ID, "attempts=2", "HTTP 307")
	})
	if moved.Load() < 2 || stolen.Load() != 0 {
		t.Errorf("the redirecting receiver was asked %d times, the other host %d times (want ≥2 and 0)", moved.Load(), stolen.Load())
	}
	for _, id := range []int{0, 1} {
		noError(t, x.runProto(t, "0.3", nil, map[string]any{"op": "cancel", "jid": weather, "taskId": steps[id].Task.ID})[0])
	}

	// A receiver answering 2xx with a 20 MiB body: the answer is read at
	// most 64 KiB and the notification counts as delivered — the next one
	// follows without a retry of the first.
	var bigHits atomic.Int64
	var bigCanceled atomic.Bool
	var bodiesMu sync.Mutex
	bodies := map[string]int{} // a retry sends the same body again
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bigHits.Add(1)
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		bodiesMu.Lock()
		bodies[string(b)]++
		bodiesMu.Unlock()
		if strings.Contains(string(b), "TASK_STATE_CANCELED") {
			bigCanceled.Store(true)
		}
		chunk := make([]byte, 64<<10)
		for i := 0; i < 320; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(big.Close)
	bs := x.runProto(t, "1.0-jsonrpc", nil, map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false,
		"push": map[string]any{"url": big.URL + "/hook"}})[0]
	noError(t, bs)
	testkit.WaitFor(t, 60*time.Second, "the first notification at the big receiver", func() bool { return bigHits.Load() >= 1 })
	noError(t, x.runProto(t, "1.0-jsonrpc", nil, map[string]any{"op": "cancel", "jid": weather, "taskId": bs.Task.ID})[0])
	testkit.WaitFor(t, 60*time.Second, "the cancellation at the big receiver", bigCanceled.Load)
	bodiesMu.Lock()
	for _, n := range bodies {
		if n != 1 {
			t.Errorf("the big-answer receiver got one notification %d times (a retry: the 2xx did not count)", n)
		}
	}
	t.Logf("the big-answer receiver took %d notifications, %d distinct", bigHits.Load(), len(bodies))
	bodiesMu.Unlock()
	if f.logged("giving up", bs.Task.ID) || f.logged("retrying", bs.Task.ID) {
		t.Error("a notification answered 2xx with a 20 MiB body was retried or given up")
	}
	if n := contacted.Load(); n != 0 {
		t.Errorf("the receiver refused by default was contacted %d times", n)
	}
}
