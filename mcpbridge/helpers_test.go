package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
)

const testJID = "everything@agents.example.test"

// everythingCmd is the stdio command of the real reference server installed
// by npm at the module root. Under CI=true a missing server fails the test.
func everythingCmd(tb testing.TB) []string {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(entry); err != nil || serr != nil {
		testkit.Unavailable(tb, "server-everything or node missing (run npm install at the module root): %v %v", err, serr)
	}
	return []string{node, entry, "stdio"}
}

// syncBuffer is a log sink tests can grep.
type syncBuffer = testkit.SyncBuffer

func testLogger(tb testing.TB) (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// recPublisher records every published manifest.
type recPublisher struct {
	mu        sync.Mutex
	manifests [][]byte
	ch        chan []byte
}

func newRecPublisher() *recPublisher { return &recPublisher{ch: make(chan []byte, 16)} }

func (p *recPublisher) Publish(_ context.Context, m []byte) (string, string, error) {
	var doc struct {
		Agent struct {
			Version string `json:"version"`
		} `json:"agent"`
	}
	if err := json.Unmarshal(m, &doc); err != nil {
		return "", "", err
	}
	p.mu.Lock()
	p.manifests = append(p.manifests, append([]byte(nil), m...))
	p.mu.Unlock()
	p.ch <- m
	return doc.Agent.Version, ijson.Hash(m), nil
}

func (p *recPublisher) all() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.manifests...)
}

// recAvailability records availability changes in order.
type recAvailability struct {
	ch chan bool
}

func (a *recAvailability) SetAvailable(endpoint string, up bool) {
	if endpoint != testJID {
		panic("availability for the wrong endpoint: " + endpoint)
	}
	a.ch <- up
}

// fakeRun records what an executor reports.
type fakeRun = taskstest.Run

func newFakeRun() *fakeRun { return taskstest.NewRun() }

// started is a running Backend under test.
type started struct {
	b     *Backend
	pub   *recPublisher
	avail *recAvailability
	logs  *syncBuffer
	stop  func()

	fmu    sync.Mutex
	frames []frame
}

type frame struct {
	out  bool
	data []byte
}

func (s *started) framesCopy() []frame {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return append([]frame(nil), s.frames...)
}

// start runs a Backend for agent (the [[agents]] part of its Options)
// until the test ends and waits for its
// first publication.
func start(t *testing.T, agent Options, tweak func(*Options)) *started {
	t.Helper()
	log, buf := testLogger(t)
	s := &started{pub: newRecPublisher(), avail: &recAvailability{ch: make(chan bool, 16)}, logs: buf}
	o := agent
	o.ComponentDomain = "agents.example.test"
	o.Publisher = s.pub
	o.Availability = s.avail
	o.Logger = log
	o.MinBackoff = 100 * time.Millisecond
	o.MaxBackoff = time.Second
	if tweak != nil {
		tweak(&o)
	}
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	b.observe = func(out bool, data []byte) {
		s.fmu.Lock()
		s.frames = append(s.frames, frame{out, append([]byte(nil), data...)})
		s.fmu.Unlock()
	}
	s.b = b
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Start(ctx) }()
	var once sync.Once
	s.stop = func() { once.Do(func() { stopOnce(t, cancel, done) }) }
	t.Cleanup(func() {
		s.stop()
		// Every manifest and result must come from the raw frames.
		if strings.Contains(s.logs.String(), "unavailable; using the SDK's") {
			t.Errorf("the tap missed a frame:\n%s", s.logs.String())
		}
	})
	s.waitUp(t, 60*time.Second)
	return s
}

func stopOnce(t *testing.T, cancel func(), done chan error) {
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("Start did not return after cancel")
	}
}

func (s *started) waitUp(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case up := <-s.avail.ch:
			if up {
				return
			}
		case <-deadline:
			t.Fatalf("backend not available within %v; log:\n%s", d, s.logs.String())
		}
	}
}

// exec runs one call and waits for settlement.
func (s *started) exec(t *testing.T, tool, args string, r *fakeRun) *fakeRun {
	t.Helper()
	if r == nil {
		r = newFakeRun()
	}
	s.b.Execute(context.Background(), tasks.Call{TaskID: "task-1", Tool: tool, Arguments: json.RawMessage(args), Endpoint: testJID}, r)
	r.Wait(t, 30*time.Second)
	return r
}

func stdioAgent(cmd []string) Options {
	return Options{JID: testJID, Command: cmd}
}

// httpAgent is the streamable HTTP server at url, with the test token
// header read from MCPBRIDGE_TEST_TOKEN at every connect (as the gateway
// reads headers_env).
func httpAgent(url string) Options {
	return Options{JID: testJID, URL: url, Headers: func() (http.Header, error) {
		v := os.Getenv("MCPBRIDGE_TEST_TOKEN")
		if v == "" {
			return nil, fmt.Errorf("header %s: environment variable MCPBRIDGE_TEST_TOKEN is not set or empty", tokenHeader)
		}
		h := http.Header{}
		h.Set(tokenHeader, v)
		return h, nil
	}}
}

// textOf joins the text content items of a result.
func textOf(tb testing.TB, tr *tasks.ToolResult) string {
	tb.Helper()
	if tr == nil {
		tb.Fatal("no result")
	}
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(tr.Content, &items); err != nil {
		tb.Fatal(err)
	}
	var parts []string
	for _, it := range items {
		if it.Type == "text" {
			parts = append(parts, it.Text)
		}
	}
	return strings.Join(parts, "\n")
}

var errAnswer = errors.New("no answer")
