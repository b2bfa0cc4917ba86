package a2afront_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentgw/agentgw/a2abridge/cardsig"
	"github.com/agentgw/agentgw/testkit"
	gatewaytest "github.com/agentgw/agentgw/testkit/e2e"
)

// gateway starts the gateway with the scripted weather agent and no front.
func gateway(tb testing.TB) *e2e {
	tb.Helper()
	node, root := nodeTools(tb)
	weather := gatewaytest.DefaultExecutor()
	opts := gatewaytest.Options{Agents: []gatewaytest.Agent{{Localpart: "weather", Executor: weather}}, Users: []string{"alice"}}
	return &e2e{env: gatewaytest.Start(tb, opts), bin: gatewaytest.Binary(tb), node: node, root: root, weather: weather}
}

// front is one run of `agentgw a2a` the test may kill.
type front struct {
	cmd  *exec.Cmd
	base string
	mu   sync.Mutex
	log  []string
	done chan struct{}
}

// startFront runs `agentgw a2a` with args and sets x.base to it.
func (x *e2e) startFront(tb testing.TB, args ...string) *front {
	tb.Helper()
	s := x.env.Server
	cmd := exec.Command(x.bin, append([]string{"a2a", "--jid", x.env.JID("alice"), "--password-env", pwEnv, "--server", s.C2SAddr, "--ca-file", s.CAFile,
		"--gateway", x.env.Domain, "--http", "127.0.0.1:0", "--bearer-env", bearerEnv, "--refresh", "1s", "--cancel-wait", "5s", "-v"}, args...)...)
	cmd.Env = append(os.Environ(), pwEnv+"="+gatewaytest.Password+"alice", bearerEnv+"="+bearer)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	testkit.StopOnCleanup(tb, cmd, "agentgw a2a")
	f := &front{cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		defer close(f.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			for _, secret := range []string{bearer, "tok-secret", "cred-secret"} {
				if strings.Contains(line, secret) {
					tb.Errorf("agentgw a2a logged a secret: %q", line)
				}
			}
			tb.Log("agentgw a2a: " + line)
			f.mu.Lock()
			f.log = append(f.log, line)
			f.mu.Unlock()
			if i := strings.Index(line, "serving A2A on "); i >= 0 {
				select {
				case urls <- strings.TrimSuffix(strings.Fields(line[i+len("serving A2A on "):])[0], "/agents"):
				default:
				}
			}
		}
	}()
	select {
	case f.base = <-urls:
	case <-time.After(60 * time.Second):
		tb.Fatal("agentgw a2a did not start")
	}
	x.base = f.base
	return f
}

// logged reports whether a line holding all of parts was logged.
func (f *front) logged(parts ...string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.log {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// kill9 kills the front as a crash would.
func (f *front) kill9(tb testing.TB) {
	tb.Helper()
	if err := f.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		tb.Fatal(err)
	}
	<-f.done
}

// notification is one push a receiver took.
type notification struct {
	taskID, state, token string
	jwt                  bool // a JWT that verified against the front's JWKS
}

// hookReceiver is a push receiver on a fixed loopback address that the
// test takes down and brings back; it verifies a Bearer JWT against the
// front's JWKS (kid, ES256, exp, aud, the body's SHA-256, the task id).
type hookReceiver struct {
	t    *testing.T
	addr string
	jwks func() []byte
	mu   sync.Mutex
	got  []notification
	bad  []string
	srv  *http.Server
}

func newHookReceiver(t *testing.T, jwks func() []byte) *hookReceiver {
	r := &hookReceiver{t: t, jwks: jwks}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(func() { r.down() })
	return r
}

func (r *hookReceiver) url() string { return "http://" + r.addr + "/hook" }

func (r *hookReceiver) serve(ln net.Listener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv = &http.Server{Handler: http.HandlerFunc(r.handle)}
	go r.srv.Serve(ln)
}

func (r *hookReceiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

func (r *hookReceiver) up() {
	var ln net.Listener
	testkit.WaitFor(r.t, 30*time.Second, "the receiver's port again", func() bool {
		var err error
		ln, err = net.Listen("tcp", r.addr)
		return err == nil
	})
	r.serve(ln)
}

func (r *hookReceiver) handle(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 4<<20))
	var sr struct {
		Task *struct {
			ID     string
			Status struct{ State string }
		} `json:"task"`
		StatusUpdate *struct {
			TaskID string
			Status struct{ State string }
		} `json:"statusUpdate"`
		ArtifactUpdate *struct{ TaskID string } `json:"artifactUpdate"`
	}
	_ = json.Unmarshal(body, &sr)
	n := notification{token: req.Header.Get("X-A2A-Notification-Token")}
	switch {
	case sr.Task != nil:
		n.taskID, n.state = sr.Task.ID, sr.Task.Status.State
	case sr.StatusUpdate != nil:
		n.taskID, n.state = sr.StatusUpdate.TaskID, sr.StatusUpdate.Status.State
	case sr.ArtifactUpdate != nil:
		n.taskID, n.state = sr.ArtifactUpdate.TaskID, "artifact"
	}
	var bad string
	if tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok {
		bad = "JWT: "
		v, err := cardsig.ParseVerifier(r.jwks())
		if err != nil {
			bad += err.Error()
		} else if c, err := v.VerifyJWT(tok, time.Now()); err != nil {
			bad += err.Error()
		} else {
			sum := sha256.Sum256(body)
			switch {
			case c["request_body_sha256"] != hex.EncodeToString(sum[:]):
				bad += "the body hash differs"
			case c["aud"] != r.url():
				bad += "aud is not this receiver"
			case c["taskId"] != n.taskID:
				bad += "taskId is not the body's"
			default:
				bad, n.jwt = "", true
			}
		}
	}
	r.mu.Lock()
	r.got = append(r.got, n)
	if bad != "" {
		r.bad = append(r.bad, bad)
	}
	r.mu.Unlock()
}

// saw reports whether a notification of taskID in state arrived.
func (r *hookReceiver) saw(taskID, state string) (notification, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.got {
		if n.taskID == taskID && n.state == state {
			return n, true
		}
	}
	return notification{}, false
}

func (r *hookReceiver) sawAny(taskID string) (notification, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.got {
		if n.taskID == taskID {
			return n, true
		}
	}
	return notification{}, false
}

func writeKey(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalECPrivateKey(k)
	path := filepath.Join(t.TempDir(), "card.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// jwksOf reads a front's JWKS (as a receiver would, from the issuer).
func jwksOf(base func() string) func() []byte {
	return func() []byte {
		req, _ := http.NewRequest("GET", base()+"/jwks.json", nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return b
	}
}

// Push notifications survive a kill -9 of `agentgw a2a` (JS SDK 1.3.0 as
// the 1.0 client; the push configs given inside SendMessage): task A's
// cancellation is queued while the receiver is down, the front is killed
// with it pending, the receiver comes back, the restarted front delivers
// it (a JWT the receiver verifies against the front's JWKS); task B's
// config survives too: its task is followed again and its cancellation,
// made after the restart, is delivered with the config's token; the
// task index came back from the file too (ListTasks pages over both
// tasks, and A keeps the context id its client chose).
func TestA2AFrontPushDurable(t *testing.T) {
	t.Parallel()
	x := gateway(t)
	outbox := filepath.Join(t.TempDir(), "push.db")
	key := writeKey(t)
	args := []string{"--push-outbox", outbox, "--push-allow-private", "--card-key-file", key, "--push-timeout", "2s"}
	var baseMu sync.Mutex
	f := x.startFront(t, args...)
	base := func() string { baseMu.Lock(); defer baseMu.Unlock(); return x.base }
	r := newHookReceiver(t, jwksOf(base))
	weather := "weather@" + x.env.Domain

	steps := x.runProto(t, "1.0-jsonrpc", nil,
		map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false, "contextId": "ctx-durable-a",
			"push": map[string]any{"url": r.url(), "token": "tok-secret-a", "scheme": "Bearer"}},
		map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false,
			"push": map[string]any{"url": r.url(), "token": "tok-secret-b", "id": "b1"}},
		map[string]any{"op": "pushlist", "jid": weather, "taskOf": 1},
	)
	for _, s := range steps {
		noError(t, s)
	}
	if steps[2].Push == nil || steps[2].Push.N != 1 {
		t.Fatalf("the config of SendMessage is not listed: %+v", steps[2].Push)
	}
	a, b := steps[0].Task.ID, steps[1].Task.ID
	testkit.WaitFor(t, 60*time.Second, "the first notifications of both tasks", func() bool {
		_, okA := r.sawAny(a)
		_, okB := r.sawAny(b)
		return okA && okB
	})
	if n, _ := r.sawAny(a); !n.jwt || n.token != "tok-secret-a" {
		t.Errorf("task A's notification: JWT verified %v, token %q", n.jwt, n.token)
	}

	// The receiver goes down; A is cancelled; its notification fails and
	// waits in the outbox when the front is killed.
	r.down()
	noError(t, x.runProto(t, "1.0-jsonrpc", nil, map[string]any{"op": "cancel", "jid": weather, "taskId": a})[0])
	testkit.WaitFor(t, 60*time.Second, "a failed delivery of A's cancellation", func() bool {
		return f.logged("a push notification was not delivered; retrying", a)
	})
	f.kill9(t)
	if _, ok := r.saw(a, "TASK_STATE_CANCELED"); ok {
		t.Fatal("the receiver was down but got the cancellation")
	}
	r.up()
	baseMu.Lock()
	f2 := x.startFront(t, args...)
	baseMu.Unlock()
	testkit.WaitFor(t, 60*time.Second, "A's cancellation delivered by the restarted front", func() bool {
		_, ok := r.saw(a, "TASK_STATE_CANCELED")
		return ok
	})
	if n, _ := r.saw(a, "TASK_STATE_CANCELED"); !n.jwt {
		t.Error("A's cancellation came without a verified JWT")
	}
	// The task index came back from the file: ListTasks pages over both
	// tasks, and A keeps its context.
	page1 := x.runProto(t, "1.0-jsonrpc", nil, map[string]any{"op": "list", "jid": weather, "pageSize": 1})[0]
	noError(t, page1)
	if page1.List == nil || len(page1.List.Tasks) != 1 || page1.List.NextPageToken == "" || page1.List.TotalSize != 2 {
		t.Fatalf("ListTasks after the restart: %+v", page1.List)
	}
	page2 := x.runProto(t, "1.0-jsonrpc", nil, map[string]any{"op": "list", "jid": weather, "pageSize": 1, "pageToken": page1.List.NextPageToken},
		map[string]any{"op": "get", "jid": weather, "taskId": a})
	noError(t, page2[0])
	listed := map[string]bool{page1.List.Tasks[0].ID: true}
	for _, lt := range page2[0].List.Tasks {
		listed[lt.ID] = true
	}
	if !listed[a] || !listed[b] || page2[0].List.NextPageToken != "" {
		t.Errorf("the two pages after the restart list %v (next %q), want A and B", listed, page2[0].List.NextPageToken)
	}
	if page2[1].Task == nil || page2[1].Task.ContextID != "ctx-durable-a" {
		t.Errorf("A's context after the restart: %+v", page2[1].Task)
	}
	testkit.WaitFor(t, 60*time.Second, "task B followed again", func() bool {
		return f2.logged("following tasks with push configs again")
	})
	noError(t, x.runProto(t, "1.0-jsonrpc", nil, map[string]any{"op": "cancel", "jid": weather, "taskId": b})[0])
	testkit.WaitFor(t, 60*time.Second, "B's cancellation (after the restart) delivered", func() bool {
		_, ok := r.saw(b, "TASK_STATE_CANCELED")
		return ok
	})
	if n, _ := r.saw(b, "TASK_STATE_CANCELED"); n.token != "tok-secret-b" || n.jwt {
		t.Errorf("B's cancellation: token %q, JWT %v (none asked)", n.token, n.jwt)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Errorf("notifications the receiver could not verify: %q", r.bad)
	}
}
