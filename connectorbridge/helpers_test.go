package connectorbridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = testkit.SyncBuffer

func randomSecret(prefix string) string {
	var b [18]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// recRun is a recording tasks.Run that answers no input.
type recRun = taskstest.Run

func newRun() *recRun {
	r := taskstest.NewRun()
	r.Answer = func(tasks.InputRequest) (json.RawMessage, error) { return nil, errors.New("no input in tests") }
	return r
}

// fakePublisher validates every manifest against the spec's normative
// schema and records it.
type fakePublisher struct {
	t         testing.TB
	mu        sync.Mutex
	manifests [][]byte
	fail      bool
}

func (p *fakePublisher) Publish(_ context.Context, m []byte) (string, string, error) {
	if err := validateManifest(m); err != nil {
		p.t.Errorf("published manifest violates the spec schema: %v\n%s", err, m)
	}
	var doc struct {
		Agent struct {
			Version string `json:"version"`
		} `json:"agent"`
	}
	json.Unmarshal(m, &doc)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail {
		return "", "", errors.New("publisher down")
	}
	p.manifests = append(p.manifests, append([]byte(nil), m...))
	sum := sha256.Sum256(m)
	return doc.Agent.Version, base64.StdEncoding.EncodeToString(sum[:]), nil
}

func (p *fakePublisher) last() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.manifests) == 0 {
		return nil
	}
	return p.manifests[len(p.manifests)-1]
}

func (p *fakePublisher) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.manifests = nil
}

func (p *fakePublisher) all() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.manifests...)
}

func (p *fakePublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.manifests)
}

type manifestView struct {
	Agent struct {
		JID, Name, Title, Description, Version, Vendor string
	} `json:"agent"`
	Implementation struct{ Name, Version string } `json:"implementation"`
	Tools          []struct {
		Name         string                     `json:"name"`
		Title        string                     `json:"title"`
		Description  string                     `json:"description"`
		InputSchema  map[string]json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage            `json:"outputSchema"`
		Meta         map[string]json.RawMessage `json:"_meta"`
	} `json:"tools"`
}

func (p *fakePublisher) lastView(t testing.TB) manifestView {
	var v manifestView
	if err := json.Unmarshal(p.last(), &v); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return v
}

func (v manifestView) toolNames() []string {
	var out []string
	for _, t := range v.Tools {
		out = append(out, t.Name)
	}
	return out
}

// fakeAvailability records SetAvailable calls.
type fakeAvailability struct {
	mu  sync.Mutex
	up  map[string]bool
	log []bool
}

func (a *fakeAvailability) SetAvailable(endpoint string, up bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.up == nil {
		a.up = map[string]bool{}
	}
	a.up[endpoint] = up
	a.log = append(a.log, up)
}

func (a *fakeAvailability) get(endpoint string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.up[endpoint]
}

// everUp reports whether the agent was ever marked available.
func (a *fakeAvailability) everUp() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, up := range a.log {
		if up {
			return true
		}
	}
	return false
}

// waitAvailable waits until the agent is marked up (or down). The backend
// publishes availability from its projector goroutine after a state change
// (health, data plane, descriptor), so it lags the Client's accessors
// (HealthState, ConnectorID): reading it right after one of those changed
// races the projector.
func (e *env) waitAvailable(up bool, what string) {
	e.t.Helper()
	testkit.WaitFor(e.t, 5*time.Second, what, func() bool { return e.avail.get(e.endpoint) == up })
}

// waitLog waits until the gateway log contains want. Some lines are
// written just after the state they report becomes visible (setHealth logs
// after releasing its lock), so a check right after that state races them.
func (e *env) waitLog(want string) {
	e.t.Helper()
	testkit.WaitFor(e.t, 5*time.Second, fmt.Sprintf("the log line %q", want), func() bool { return strings.Contains(e.logs.String(), want) })
}

// manifestSchema is the normative manifest JSON Schema of the spec's
// "Manifest Model" section, copied verbatim.
const manifestSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "urn:xmpp:agent-api:0:manifest-json",
  "type": "object",
  "required": ["manifestSpecVersion", "agent", "tools"],
  "properties": {
    "manifestSpecVersion": {"const": "0"},
    "agent": {
      "type": "object",
      "required": ["jid", "name", "version"],
      "properties": {
        "jid": {"type":"string","minLength":3,"maxLength":3071},
        "name": {"type":"string","minLength":1,"maxLength":128},
        "title": {"type":"string","maxLength":256},
        "description": {"type":"string","maxLength":4096},
        "version": {
          "type":"string",
          "pattern":"^[A-Za-z0-9._~-]{1,64}$"
        },
        "vendor": {"type":"string","maxLength":256},
        "homepage": {"type":"string","format":"uri","pattern":"^https://","maxLength":2048},
        "avatarUrl": {"type":"string","format":"uri","pattern":"^https://","maxLength":2048}
      },
      "additionalProperties": false
    },
    "implementation": {
      "type": "object",
      "required": ["name", "version"],
      "properties": {
        "name": {"type":"string","minLength":1,"maxLength":128},
        "version": {"type":"string","minLength":1,"maxLength":128}
      },
      "additionalProperties": false
    },
    "mcpProtocolVersion": {
      "type":"string",
      "pattern":"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
    },
    "tools": {
      "type": "array",
      "maxItems": 4096,
      "items": {
        "type": "object",
        "required": ["name", "inputSchema"],
        "properties": {
          "name": {
            "type":"string",
            "minLength":1
          },
          "title": {"type":"string","maxLength":256},
          "description": {"type":"string","maxLength":8192},
          "inputSchema": {"type":"object"},
          "outputSchema": {"type":"object"},
          "annotations": {"type":"object"},
          "execution": {"type":"object"},
          "_meta": {"type":"object"},
          "urn:xmpp:agent-api:0": {
            "type":"object",
            "properties":{
              "supportsProgress":{"type":"boolean"},
              "supportsCancellation":{"type":"boolean"},
              "supportsInput":{"type":"boolean"},
              "defaultTimeoutSeconds":{"type":"integer","minimum":1},
              "maximumTimeoutSeconds":{"type":"integer","minimum":1},
              "requiredPermissions":{
                "type":"array",
                "items":{"type":"string","minLength":1,"maxLength":256},
                "uniqueItems":true
              },
              "approvalRequired":{"type":"boolean"},
              "tags":{
                "type":"array",
                "items":{"type":"string","minLength":1,"maxLength":128},
                "uniqueItems":true
              }
            },
            "additionalProperties":false
          }
        },
        "patternProperties": {
          "^[a-z][a-z0-9+.-]*:": {}
        },
        "additionalProperties": false
      }
    }
  },
  "additionalProperties": false
}`

var (
	schemaOnce sync.Once
	schemaC    *jsonschema.Schema
	schemaErr  error
)

func validateManifest(m []byte) error {
	schemaOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(manifestSchema))
		if err != nil {
			schemaErr = err
			return
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("urn:xmpp:agent-api:0:manifest-json", doc); err != nil {
			schemaErr = err
			return
		}
		schemaC, schemaErr = c.Compile("urn:xmpp:agent-api:0:manifest-json")
	})
	if schemaErr != nil {
		return schemaErr
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(m))
	if err != nil {
		return err
	}
	if err := schemaC.Validate(inst); err != nil {
		return err
	}
	// Every tool's schemas must themselves be JSON objects that compile.
	var v struct {
		Tools []struct {
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	json.Unmarshal(m, &v)
	for i, t := range v.Tools {
		for j, s := range []json.RawMessage{t.InputSchema, t.OutputSchema} {
			if len(s) == 0 {
				continue
			}
			d, err := jsonschema.UnmarshalJSON(bytes.NewReader(s))
			if err != nil {
				return err
			}
			c := jsonschema.NewCompiler()
			url := fmt.Sprintf("urn:test:%d:%d", i, j)
			c.AddResource(url, d)
			if _, err := c.Compile(url); err != nil {
				return fmt.Errorf("tool %d schema %d: %w", i, j, err)
			}
		}
	}
	return nil
}

// env is one reference connector, one store and one backend.
type env struct {
	t         testing.TB
	dir       string
	srv       *connectortest.Server
	apiKey    string
	formToken string
	db        *sqlite.DB
	bindings  *sqlite.Bindings
	logs      *syncBuffer
	srvLogs   *syncBuffer
	pub       *fakePublisher
	avail     *fakeAvailability
	b         *Backend
	endpoint  string
}

type envOpt func(*connectortest.Options, *Options)

func newEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	e := &env{
		t:         t,
		dir:       t.TempDir(),
		apiKey:    randomSecret("sk-"),
		formToken: randomSecret("ft-"),
		logs:      &syncBuffer{},
		srvLogs:   &syncBuffer{},
		pub:       &fakePublisher{t: t},
		avail:     &fakeAvailability{},
		endpoint:  "im@agents.example.test",
	}
	so := connectortest.Options{
		APIKey:    e.apiKey,
		FormToken: e.formToken,
		Logger:    slog.New(slog.NewTextHandler(e.srvLogs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	bo := e.options()
	for _, f := range opts {
		f(&so, &bo)
	}
	srv, err := connectortest.Start(so)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	t.Cleanup(srv.Close)
	db, err := sqlite.Open(context.Background(), filepath.Join(e.dir, "agentgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	e.bindings = sqlite.NewBindings(db)
	t.Cleanup(func() { db.Close() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", e.logs.String())
		}
	})
	return e
}

// options are the backend options for this env (fast intervals).
func (e *env) options() Options {
	return Options{
		Endpoint:            e.endpoint,
		APIKey:              e.apiKey,
		Logger:              slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		RequestTimeout:      3 * time.Second,
		HealthInterval:      100 * time.Millisecond,
		PingInterval:        200 * time.Millisecond,
		BindingPollInterval: 50 * time.Millisecond,
		ReconnectMin:        20 * time.Millisecond,
		ReconnectMax:        200 * time.Millisecond,
		ReadyWait:           3 * time.Second,
	}
}

func (e *env) backendOptions(mod func(*Options)) Options {
	o := e.options()
	o.BaseURL = e.srv.URL()
	o.Bindings = e.bindings
	o.Publisher = e.pub
	o.Availability = e.avail
	if mod != nil {
		mod(&o)
	}
	return o
}

func (e *env) start(mod func(*Options)) *Backend {
	e.t.Helper()
	b, err := New(e.backendOptions(mod))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Start(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case <-errc:
		case <-time.After(10 * time.Second):
			e.t.Error("Start did not return after its context ended")
		}
	})
	testkit.WaitFor(e.t, 10*time.Second, "the backend's first connection", func() bool {
		b.c.mu.Lock()
		defer b.c.mu.Unlock()
		return b.c.everOpened || b.c.fatal != nil || b.c.health == HealthUnauthorized
	})
	e.b = b
	return b
}

// client is an operator-command client (as `agentgw connector auth` uses).
func (e *env) client() *Client {
	e.t.Helper()
	return e.clientWith(nil)
}

// clientWith is client with mod applied to its Options.
func (e *env) clientWith(mod func(*Options)) *Client {
	e.t.Helper()
	o := e.options()
	o.BaseURL = e.srv.URL()
	o.Bindings = e.bindings
	if mod != nil {
		mod(&o)
	}
	c, err := NewClient(o)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// authForm binds the channel through the form flow, as the CLI would.
func (e *env) authForm() string {
	e.t.Helper()
	c := e.client()
	defer c.Close()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Auth(ctx, "token_form", map[string]string{"account": "alice", "token": e.formToken}, &out); err != nil {
		e.t.Fatalf("auth: %v\n%s", err, out.String())
	}
	return out.String()
}

func (e *env) waitTools(want int) manifestView {
	e.t.Helper()
	var v manifestView
	testkit.WaitFor(e.t, 10*time.Second, fmt.Sprintf("a manifest with %d tools", want), func() bool {
		if e.pub.last() == nil {
			return false
		}
		v = e.pub.lastView(e.t)
		return len(v.Tools) == want
	})
	return v
}

// call runs one tool call through the backend and waits for settlement.
func (e *env) call(tool string, args string) *recRun {
	e.t.Helper()
	r := newRun()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e.b.Execute(ctx, tasks.Call{TaskID: randomSecret("task-"), Caller: "alice@example.test", Endpoint: e.endpoint,
		Tool: tool, Arguments: json.RawMessage(args)}, r)
	select {
	case <-r.Done:
	default:
		e.t.Fatalf("Execute returned without settling the task")
	}
	return r
}

// dirBytes concatenates every file under dir (database, WAL, journal).
func dirBytes(t testing.TB, dir string) []byte {
	var all []byte
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			all = append(all, b...)
		}
		return nil
	})
	return all
}
