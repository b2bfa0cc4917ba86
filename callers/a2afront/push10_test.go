package a2afront_test

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
)

// receiver records push notifications: the task state each carries.
type receiver struct {
	mu     sync.Mutex
	states []string
	tokens []string
	hold   chan struct{} // while open, every request waits (a slow receiver)
	held   int
	srv    *httptest.Server
}

func newReceiver(t *testing.T, slow bool) *receiver {
	r := &receiver{}
	if slow {
		r.hold = make(chan struct{})
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.hold != nil {
			r.mu.Lock()
			r.held++
			r.mu.Unlock()
			select {
			case <-r.hold:
			case <-req.Context().Done():
				return
			}
		}
		b, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		var sr struct {
			Task *struct {
				Status struct{ State string } `json:"status"`
			} `json:"task"`
			StatusUpdate *struct {
				Status struct{ State string } `json:"status"`
			} `json:"statusUpdate"`
		}
		_ = json.Unmarshal(b, &sr)
		r.mu.Lock()
		switch {
		case sr.Task != nil:
			r.states = append(r.states, sr.Task.Status.State)
		case sr.StatusUpdate != nil:
			r.states = append(r.states, sr.StatusUpdate.Status.State)
		}
		r.tokens = append(r.tokens, req.Header.Get("A2A-Notification-Token"))
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) got(state string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.states {
		if s == state {
			return true
		}
	}
	return false
}

// Push notifications from the front (JS SDK 1.3.0 as the 1.0 client): a
// config on a running task delivers its updates to the receiver the test
// runs, with the config's token; targets on loopback (outside the allowed
// prefix), private and link-local ranges are refused when the config is
// made; a receiver that hangs does not hold up its task, and gets the
// notification by a later attempt once it answers.
func TestA2AFrontPush(t *testing.T) {
	t.Parallel()
	x := start(t, false)
	x.a2aArgs = []string{"--push", "--push-allow", "127.0.0.1/32", "--push-timeout", "2s"}
	// The config's token is a secret of the receiver: it goes to the
	// receiver only, never to the front's log.
	pushTok := "push-token-" + rand.Text()
	x.secrets = []string{pushTok}
	x.base = x.startA2A(t)
	weather := "weather@" + x.env.Domain
	fast, slow := newReceiver(t, false), newReceiver(t, true)
	steps := x.runProto(t, "1.0-jsonrpc", nil,
		map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false},
		map[string]any{"op": "pushcreate", "jid": weather, "taskOf": 0, "url": fast.srv.URL + "/hook", "token": pushTok},
		map[string]any{"op": "pushcreate", "jid": weather, "taskOf": 0, "url": "http://127.0.0.2:9/x", "configId": "c2"},
		map[string]any{"op": "pushcreate", "jid": weather, "taskOf": 0, "url": "http://10.1.2.3/x", "configId": "c3"},
		map[string]any{"op": "pushcreate", "jid": weather, "taskOf": 0, "url": "http://169.254.169.254/latest", "configId": "c4"},
		map[string]any{"op": "pushcreate", "jid": weather, "taskOf": 0, "url": "http://[::1]:9/", "configId": "c5"},
		map[string]any{"op": "pushcreate", "jid": weather, "taskOf": 0, "url": "file:///etc/passwd", "configId": "c6"},
		map[string]any{"op": "pushlist", "jid": weather, "taskOf": 0},
		map[string]any{"op": "send", "jid": weather, "skill": "slow", "data": map[string]any{}, "blocking": false},
		map[string]any{"op": "pushcreate", "jid": weather, "taskOf": 8, "url": slow.srv.URL + "/hook", "configId": "slow"},
		map[string]any{"op": "cancel", "jid": weather, "taskOf": 0},
	)
	for _, i := range []int{0, 1, 7, 8, 9, 10} {
		noError(t, steps[i])
	}
	for _, i := range []int{2, 3, 4, 5, 6} {
		if steps[i].Error == nil || !strings.Contains(steps[i].Error.Message, "push target refused") {
			t.Errorf("step %d: a refused target was accepted or refused unclearly: %+v", i, steps[i].Error)
		}
	}
	if steps[7].Push == nil || steps[7].Push.N != 1 {
		t.Errorf("push configs listed: %+v", steps[7].Push)
	}
	testkit.WaitFor(t, 60*time.Second, "the cancelled state at the receiver", func() bool { return fast.got("TASK_STATE_CANCELED") })
	fast.mu.Lock()
	for _, tok := range fast.tokens {
		if tok != pushTok {
			t.Errorf("a notification without the config's token: %q", tok)
		}
	}
	fast.mu.Unlock()

	// The slow task completes while its receiver hangs.
	slowID := steps[8].Task.ID
	testkit.WaitFor(t, 60*time.Second, "the slow task to complete beside a hanging receiver", func() bool {
		g := x.runProto(t, "1.0-jsonrpc", nil, map[string]any{"op": "get", "jid": weather, "taskId": slowID})[0]
		return g.Task != nil && g.Task.State == "TASK_STATE_COMPLETED"
	})
	slow.mu.Lock()
	held, delivered := slow.held, len(slow.states)
	slow.mu.Unlock()
	if held == 0 || delivered != 0 {
		t.Fatalf("the slow receiver was not hanging (held %d, delivered %d)", held, delivered)
	}
	close(slow.hold)
	testkit.WaitFor(t, 60*time.Second, "the completed state at the slow receiver by a later attempt", func() bool { return slow.got("TASK_STATE_COMPLETED") })
}
