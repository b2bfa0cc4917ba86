package accbridge

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/accbridge/acctest"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
)

// syncBuf is a goroutine-safe log sink that also reads the JSON lines the
// reference connector printed.
type syncBuf struct{ testkit.SyncBuffer }

// lines returns the JSON lines the reference connector printed.
func (s *syncBuf) got() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func (s *syncBuf) count(typ, runID string) int {
	n := 0
	for _, m := range s.got() {
		if m["got"] == typ && (runID == "" || m["run_id"] == runID) {
			n++
		}
	}
	return n
}

// availRec records availability and status reports.
type availRec struct {
	mu     sync.Mutex
	up     map[string]bool
	status map[string]string
}

func (a *availRec) SetAvailable(ep string, up bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.up[ep] = up
}

func (a *availRec) SetStatus(ep, status string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status[ep] = status
}

func (a *availRec) get(ep string) (bool, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.up[ep], a.status[ep]
}

type env struct {
	t      testing.TB
	dir    string
	files  Files
	store  accdb.Driver
	srv    *Server
	agent  *Agent
	avail  *availRec
	log    *syncBuf
	url    string
	cancel context.CancelFunc
}

const testEndpoint = "hermes@agents.example.test"

func newEnv(t testing.TB, tweak func(*Options)) *env {
	t.Helper()
	dir := t.TempDir()
	f := Files{
		Cert: filepath.Join(dir, "acc/server.crt"), Key: filepath.Join(dir, "acc/server.key"),
		CA: filepath.Join(dir, "acc/ca.crt"), CAKey: filepath.Join(dir, "acc/ca.key"),
		JWTKey: filepath.Join(dir, "acc/jwt.key"), Hostnames: []string{"127.0.0.1", "localhost"},
	}
	if _, err := Init(f); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "agentgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{t: t, dir: dir, files: f, store: sqlite.NewACC(db), log: &syncBuf{},
		avail: &availRec{up: map[string]bool{}, status: map[string]string{}}}
	o := Options{
		Listen: "127.0.0.1:0", Files: f, Store: e.store, Availability: e.avail,
		Logger:    slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Heartbeat: time.Second, Grace: 2 * time.Second, RegisterTimeout: time.Second,
		AcceptTimeout: 3 * time.Second, CancelTimeout: 500 * time.Millisecond, BusyRetry: 200 * time.Millisecond,
		ApprovalTimeout: 5 * time.Second,
	}
	if tweak != nil {
		tweak(&o)
	}
	s, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = s
	e.agent = s.AddAgent(AgentOptions{Endpoint: testEndpoint, Connector: "farm", AgentID: "agent-1"})
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	done := make(chan struct{})
	go func() { s.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e.url = "wss://" + s.Addr().String() + Path
	return e
}

// enroll writes a connector's files and records it.
func (e *env) enroll(name string) string {
	e.t.Helper()
	f := e.files
	f.URL = e.url
	out := filepath.Join(e.dir, "conn-"+name)
	en, err := Enroll(f, name, out)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.Enroll(context.Background(), accdb.Connector{Name: name, ID: en.ConnectorID, CertSHA256: en.CertSHA256, CreatedAt: "2026-01-01T00:00:00Z"}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

var defaultAgents = []acctest.Agent{{AgentID: "agent-1", Runtime: "hermes", Model: "m", Tools: []string{"terminal", "browser"}, Supports: []string{"cancellation"}}}

// connect starts the reference connector (in process) on dir.
func (e *env) connect(dir string, log *syncBuf) (*acctest.Connector, context.CancelFunc) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := acctest.Dial(ctx, acctest.Options{Dir: dir, Heartbeat: 200 * time.Millisecond, Agents: defaultAgents, Log: log})
	if err != nil {
		cancel()
		e.t.Fatalf("connector dial: %v", err)
	}
	go c.Serve(ctx)
	e.t.Cleanup(func() { cancel(); c.Close() })
	return c, func() { cancel(); c.Close() }
}

func (e *env) ready() {
	e.t.Helper()
	testkit.WaitFor(e.t, 5*time.Second, "the agent declared and up", func() bool {
		up, _ := e.avail.get(testEndpoint)
		return up && e.agent.Declared() != nil
	})
}

func call(args string) tasks.Call {
	return tasks.Call{TaskID: ids.New("task-"), Caller: "alice@example.test", Endpoint: testEndpoint, Tool: "run",
		Arguments: json.RawMessage(args)}
}

func goal(g string) string { b, _ := json.Marshal(map[string]string{"goal": g}); return string(b) }

// exec runs a call to its settlement.
func (e *env) exec(c tasks.Call, r *taskstest.Run) {
	e.t.Helper()
	done := make(chan struct{})
	go func() { e.agent.Execute(context.Background(), c, r); close(done) }()
	r.Wait(e.t, 20*time.Second)
	<-done
}

// dialRaw opens a WebSocket with the given client certificate and token.
func (e *env) dialRaw(cert *tls.Certificate, token string) (*websocket.Conn, *http.Response, error) {
	caPEM, _ := os.ReadFile(e.files.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}, HTTPHeader: h})
}

func loadCreds(t *testing.T, dir string) (tls.Certificate, string, string) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := os.ReadFile(filepath.Join(dir, "token.jwt"))
	var cj struct {
		ConnectorID string `json:"connector_id"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "connector.json"))
	json.Unmarshal(b, &cj)
	return cert, strings.TrimSpace(string(tok)), cj.ConnectorID
}

func readJSON(t *testing.T, c *websocket.Conn) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, data, err := c.Read(ctx)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not JSON: %q", data)
	}
	return m, nil
}

func writeJSON(c *websocket.Conn, v any) error {
	b, _ := json.Marshal(v)
	return c.Write(context.Background(), websocket.MessageText, b)
}
