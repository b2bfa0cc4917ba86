// Package mcpbridge implements MCP servers as agent backends: the gateway is
// an MCP client that publishes a server's tools as an urn:xmpp:agent-api:0
// manifest and runs tasks as tools/call requests.
//
// One Backend serves one [[agents]] entry with an [agents.mcp] table (the
// gateway turns it into Options). It spawns the stdio command (or connects
// to the streamable HTTP URL, or uses an injected transport), initializes,
// lists every tool page, publishes the manifest through a
// backendkit.Publisher, and keeps the server running: a server that exits
// or drops the connection fails its in-flight tasks with the reserved code
// unavailable (retryable) and is restarted by backendkit's supervise loop,
// the endpoint's availability following along. docs/mcp-bridge.md describes the
// mapping and what it loses.
package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/mcpbridge/mcpoauth"
	"github.com/agentgw/agentgw/tasks"
)

// Options configure a Backend: one [[agents]] entry with an [agents.mcp]
// table, as the gateway reads it. Exactly one of Command, URL and
// Transport is required.
type Options struct {
	// JID is the agent's bare JID, the endpoint it serves.
	JID string
	// Manifest overrides: Name, Title and Description replace the server's
	// own; Version pins agent.version instead of deriving it.
	Name, Title, Description, Version string

	// Command is the stdio server's argv; Env is added to the little of
	// the gateway's environment it inherits.
	Command []string
	Env     map[string]string
	// URL is a streamable HTTP server. Headers, when set, returns the
	// headers to send; it is called at every connect, so rotated header
	// files take effect on the next reconnect. Its errors name the header
	// and its source, never a value; every value is redacted.
	URL     string
	Headers func() (http.Header, error)
	// Transport, when set, is called at every connect for a fresh
	// transport to the server instead of spawning Command or dialing URL:
	// a test's in-memory server (mcp.NewInMemoryTransports), or an
	// embedder's own. The raw-frame tap sees its frames as it sees
	// stdio's and HTTP's.
	Transport func(ctx context.Context) (mcp.Transport, error)

	ComponentDomain string // when set, JID must be below it
	// ConfigDir is the stdio command's working directory ("" keeps the
	// gateway's).
	ConfigDir    string
	Publisher    backendkit.Publisher    // nil: manifests are built but not published
	Availability backendkit.Availability // nil: not reported
	Logger       *slog.Logger            // nil: slog.Default()
	// Secrets returns further values to redact (the component secret, other
	// backends' keys). Header values and long Env values are always
	// redacted.
	Secrets func() []string
	// ClientVersion is sent as clientInfo.version ("dev" when empty).
	ClientVersion string
	// Restart backoff (backendkit.Supervisor): from MinBackoff, growing
	// after each failure up to MaxBackoff. Defaults 1s and 60s.
	MinBackoff, MaxBackoff time.Duration
	// ConnectTimeout bounds one spawn-and-initialize (and the tool
	// listing after it). Default 60s, which leaves npx time to install.
	ConnectTimeout time.Duration
	// HealthInterval is how often a live session is pinged; two failed
	// pings in a row end it (and restart the server). Default 30s. It
	// matters most for HTTP servers, whose death is otherwise noticed only
	// by the next call.
	HealthInterval time.Duration
	// MaxSessions bounds the server sessions that run calls, one call at
	// a time each, so that every elicitation is attributed with
	// certainty (pool.go). Default DefaultMaxSessions. For a stdio server
	// every session is one more server process.
	MaxSessions int
	// OAuth, when set, authorizes every request to URL with its access
	// tokens ([agents.mcp.oauth], oauth.go).
	OAuth *mcpoauth.Source
}

// sessionStable is how long a session must have lived for the next restart
// to start again from MinBackoff.
const sessionStable = 30 * time.Second

// Backend bridges one MCP server. It implements tasks.Backend.
type Backend struct {
	o      Options
	jid    string
	local  string
	log    *slog.Logger
	red    *backendkit.Redactor
	client *mcp.Client
	pub    *backendkit.Manifests
	avail  *backendkit.Presence

	mu       sync.Mutex
	cur      *session
	sessions map[*mcp.ClientSession]*session
	losses   map[string]bool

	// The sessions for calls (pool.go), under mu.
	maxSessions int
	extras      []*session    // further sessions, beside cur
	connecting  int           // further sessions being connected
	gen         uint64        // counts supervised sessions
	poolChanged chan struct{} // closed when a session is released

	running atomic.Bool

	// Task-augmented calls (taskcall.go), under mu: by remote task id and
	// by progress token.
	remote       map[string]*taskCall
	remoteTokens map[string]*taskCall
	// extCalls are the extension-form tools/call requests in flight
	// (taskext.go), by progress token: a server that answers one
	// synchronously may send progress first.
	extCalls       map[string]*callState
	unknownLogged  atomic.Bool
	unknownDropped atomic.Int64
	leftBehind     atomic.Int64    // HTTP tasks left running at shutdown
	creating       atomic.Int64    // task-augmented tools/call awaiting their task
	recent         map[string]bool // ended remote task ids, under mu
	recentOrder    []string

	authLost chan struct{} // the OAuth login was lost (oauth.go)

	// observe, when set before Start (tests), sees every JSON-RPC frame.
	observe func(out bool, frame []byte)
}

var (
	_ tasks.Backend        = (*Backend)(nil)
	_ backendkit.Readiness = (*Backend)(nil)
)

// New checks the options and prepares the MCP client. Nothing is started.
func New(o Options) (*Backend, error) {
	if o.Transport == nil && (len(o.Command) == 0) == (o.URL == "") {
		return nil, errors.New("mcpbridge: [agents.mcp] needs exactly one of command or url")
	}
	if o.Transport != nil && (len(o.Command) > 0 || o.URL != "") {
		return nil, errors.New("mcpbridge: a Transport replaces command and url")
	}
	if len(o.Command) > 0 && o.Command[0] == "" {
		return nil, errors.New("mcpbridge: [agents.mcp] command is empty")
	}
	bare, local, err := bareJID(o.JID)
	if err != nil {
		return nil, fmt.Errorf("mcpbridge: %w", err)
	}
	if v := o.Version; v != "" && !ids.ValidVersion(v) {
		return nil, errors.New("mcpbridge: agent version does not match [A-Za-z0-9._~-]{1,64}")
	}
	if o.ComponentDomain != "" {
		d, err := jid.Parse(o.ComponentDomain)
		if err != nil || !strings.EqualFold(bare[strings.IndexByte(bare, '@')+1:], d.Domainpart()) {
			return nil, errors.New("mcpbridge: agent jid is not below the component domain")
		}
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(60*time.Second, o.MinBackoff)
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 60 * time.Second
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = 30 * time.Second
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	b := &Backend{
		o:        o,
		jid:      bare,
		local:    local,
		log:      log.With(slog.String("agent", bare)),
		red:      backendkit.NewRedactor(oauthSecrets(o)),
		pub:      backendkit.NewManifests(o.Publisher),
		avail:    backendkit.NewPresence(bare, o.Availability),
		sessions: map[*mcp.ClientSession]*session{},
		losses:   map[string]bool{},

		maxSessions: o.MaxSessions,
		poolChanged: make(chan struct{}),
		authLost:    make(chan struct{}, 1),
	}
	b.setSecrets(nil)
	if o.OAuth != nil {
		o.OAuth.OnLoginRequired(b.oauthLost)
	}
	b.client = mcp.NewClient(&mcp.Implementation{Name: "agentgw", Version: o.ClientVersion}, &mcp.ClientOptions{
		Logger: b.log.With(slog.String("component", "mcp-sdk")),
		// No roots: the gateway has no workspace to offer. Setting the
		// handler below makes the SDK add form elicitation.
		Capabilities:                &mcp.ClientCapabilities{},
		ElicitationHandler:          b.onElicit,
		ProgressNotificationHandler: b.onProgress,
		ToolListChangedHandler:      b.onToolsChanged,
	})
	b.client.AddReceivingMiddleware(b.declineUnsupported)
	return b, nil
}

// Endpoint returns the normalized bare JID the backend serves.
func (b *Backend) Endpoint() string { return b.jid }

// Features implements tasks.Backend: MCP carries progress, cancellation
// (notifications/cancelled) and input (form elicitation).
func (b *Backend) Features() tasks.Features {
	return tasks.Features{Progress: true, Cancel: true, Input: true}
}

// Current returns the version and hash last published ("" before the first).
func (b *Backend) Current() (version, hash string) { return b.pub.Current() }

// Ready implements backendkit.Readiness: the backend has published its
// manifest, which it does only with a live session.
func (b *Backend) Ready() bool { return b.pub.Ready() }

// SemanticLosses lists the losses observed at run time (a server asked for
// sampling, roots or URL elicitation, or an elicitation could not be
// attributed), sorted. The manifest carries only the losses known when it
// was built; these are logged and reflected in the affected task's failure
// code.
func (b *Backend) SemanticLosses() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var l []string
	for k := range b.losses {
		l = append(l, k)
	}
	slices.Sort(l)
	return l
}

func (b *Backend) recordLoss(st *callState, code string) {
	b.mu.Lock()
	first := !b.losses[code]
	b.losses[code] = true
	b.mu.Unlock()
	if first {
		b.log.Warn("MCP server used a feature the bridge does not carry", slog.String("loss", code))
	}
	if st != nil {
		st.unsupported.CompareAndSwap(nil, &code)
	}
}

// setSecrets installs the per-connection secrets plus the env values long
// enough to be taken for secrets.
func (b *Backend) setSecrets(headerValues []string) {
	s := append([]string(nil), headerValues...)
	for _, v := range b.o.Env {
		if len(v) >= minEnvSecret {
			s = append(s, v)
		}
	}
	b.red.Set(s...)
}

// session is one connected MCP client session.
type session struct {
	cs          *mcp.ClientSession
	tap         *tap
	proc        *process // nil for HTTP
	state       serverState
	started     time.Time
	done        chan struct{} // closed when the connection ended
	listChanged chan struct{}

	nd *ndjsonConn // stdio: the connection, whose wire carries task requests

	mu          sync.Mutex
	calls       map[string]*callState // by progress token
	taskSupport map[string]string     // tool name → execution.taskSupport

	// Under Backend.mu (pool.go).
	busy  bool        // a call holds the session
	extra bool        // a further session, not the supervised one
	gen   uint64      // the supervised session it was opened beside
	idle  *time.Timer // closes an idle further session
}

func (s *session) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *session) add(st *callState) {
	s.mu.Lock()
	s.calls[st.token] = st
	s.mu.Unlock()
}

func (s *session) remove(st *callState) {
	s.mu.Lock()
	delete(s.calls, st.token)
	s.mu.Unlock()
}

func (s *session) call(token string) *callState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[token]
}

// soleCall returns the call a server request without call context must
// belong to, if attribution is certain, or why it is not. Before MCP
// 2026-07-28 such a request carries nothing tying it to the tools/call that
// caused it. It is certain only when exactly one call is in flight and no
// request the bridge gave up on (a cancelled call, a passed deadline) is
// still unanswered: the server may still be running such a call, and a
// late question of caller A must never reach caller B. The session pool
// (pool.go) makes both hold for every call it hands out; this check stays
// as the guard.
func (s *session) soleCall() (*callState, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.calls) == 0:
		return nil, "no call in flight"
	case len(s.calls) > 1:
		return nil, "several calls in flight"
	case s.tap.unanswered() > 0:
		return nil, "an abandoned call may still be running at the server"
	}
	for _, st := range s.calls {
		return st, ""
	}
	return nil, ""
}

// abortCalls ends every call of a session whose connection is gone.
func (s *session) abortCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.calls {
		st.gone.Store(true)
		st.cancel()
	}
}

// close ends the session and waits for a stdio server to stop. Calls still
// in flight are aborted first: the SDK's Close waits for them.
func (s *session) close() {
	s.abortCalls()
	if s.proc != nil {
		s.proc.stop()
	}
	done := make(chan struct{})
	go func() { _ = s.cs.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

func (b *Backend) sessionOf(cs *mcp.ClientSession) *session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[cs]
}

func (b *Backend) current() *session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cur
}

// connect spawns or dials the server and initializes a session.
func (b *Backend) connect(ctx context.Context) (*session, error) {
	tp := newTap()
	tp.observe = b.observe
	var (
		t  mcp.Transport
		st *stdioTransport
	)
	switch {
	case b.o.Transport != nil:
		b.setSecrets(nil)
		inner, err := b.o.Transport(ctx)
		if err != nil {
			return nil, fmt.Errorf("MCP transport: %s", b.red.Scrub(err.Error()))
		}
		t = &tapTransport{t: inner, tap: tp}
	case len(b.o.Command) > 0:
		b.setSecrets(nil)
		st = &stdioTransport{b: b, tap: tp}
		t = st
	default:
		if err := b.oauthReady(ctx); err != nil {
			return nil, err
		}
		var err error
		if t, err = b.httpTransport(tp); err != nil {
			return nil, err
		}
	}
	initRaw := tp.expectMethod("initialize")
	discRaw := tp.expectMethod("server/discover")
	cctx, cancel := context.WithTimeout(ctx, b.o.ConnectTimeout)
	defer cancel()
	cs, err := b.client.Connect(cctx, t, nil)
	tp.forgetMethod("initialize")
	tp.forgetMethod("server/discover")
	if err != nil {
		if st != nil && st.proc != nil {
			go st.proc.stop()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("MCP initialize failed: %s", safeText(b.red, err.Error(), 512))
	}
	s := &session{
		cs:          cs,
		tap:         tp,
		started:     time.Now(),
		done:        make(chan struct{}),
		listChanged: make(chan struct{}, 1),
		calls:       map[string]*callState{},
	}
	if st != nil {
		s.proc = st.proc
		s.nd = st.conn
		if s.nd != nil {
			fn := b.onTaskStatus
			s.nd.wire.notify.Store(&fn)
		}
	}
	ir := cs.InitializeResult()
	s.state.info = ir.ServerInfo
	s.state.protocolVersion = ir.ProtocolVersion
	s.state.instructions = ir.Instructions != ""
	raw := initRaw.get()
	if raw == nil {
		raw = discRaw.get()
	}
	var caps struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if raw != nil && json.Unmarshal(raw, &caps) == nil {
		s.state.capabilities = caps.Capabilities
	} else if ir.Capabilities != nil {
		data, _ := json.Marshal(ir.Capabilities)
		_ = json.Unmarshal(data, &s.state.capabilities)
	}
	b.mu.Lock()
	b.sessions[cs] = s
	b.mu.Unlock()
	go func() {
		_ = cs.Wait()
		close(s.done)
		s.abortCalls()
		b.mu.Lock()
		delete(b.sessions, cs)
		b.mu.Unlock()
	}()
	return s, nil
}

// Initialize connects, initializes and closes again: the `agentgw doctor`
// check that the server starts and speaks MCP.
func (b *Backend) Initialize(ctx context.Context) error {
	s, err := b.connect(ctx)
	if err != nil {
		return err
	}
	s.close()
	return nil
}

// BuildManifest connects, builds the manifest the backend would publish, and
// closes again. It publishes nothing.
func (b *Backend) BuildManifest(ctx context.Context) ([]byte, error) {
	s, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	bm, err := b.buildManifest(ctx, s)
	if err != nil {
		return nil, err
	}
	return bm.canonical, nil
}

// Start connects, publishes the manifest and supervises the server until
// ctx ends: it republishes on notifications/tools/list_changed and restarts
// a server that went away, with backoff. It returns nil once ctx is done,
// after closing the server; it fails only if called twice.
func (b *Backend) Start(ctx context.Context) error {
	if !b.running.CompareAndSwap(false, true) {
		return errors.New("mcpbridge: Start called twice")
	}
	defer b.running.Store(false)
	sup := backendkit.Supervisor{Min: b.o.MinBackoff, Max: b.o.MaxBackoff, StableAfter: sessionStable}
	sup.Run(ctx, b.runSession, func(err error, wait time.Duration) {
		if b.o.OAuth != nil && b.o.OAuth.LoginRequired() {
			return // said once, when the login was lost (oauth.go)
		}
		if err == nil {
			b.log.Warn("MCP server went away; restarting", slog.Duration("after", wait))
			return
		}
		b.log.Error("MCP server unavailable", slog.String("error", err.Error()), slog.Duration("retry_in", wait))
	})
	return nil
}

// runSession connects, publishes and supervises one session to its end. It
// returns how long the session was up, or why it did not come up.
func (b *Backend) runSession(ctx context.Context) (time.Duration, error) {
	s, err := b.connect(ctx)
	if err != nil {
		return 0, err
	}
	pctx, cancel := context.WithTimeout(ctx, b.o.ConnectTimeout)
	err = b.publish(pctx, s)
	cancel()
	if err != nil {
		s.close()
		return 0, err
	}
	b.supervise(ctx, s)
	return time.Since(s.started), nil
}

// supervise runs one live session until it ends or ctx does.
func (b *Backend) supervise(ctx context.Context, s *session) {
	b.mu.Lock()
	b.cur = s
	b.gen++
	b.signalPool()
	b.mu.Unlock()
	b.setAvailable(true)
	defer func() {
		b.mu.Lock()
		if b.cur == s {
			b.cur = nil
		}
		b.signalPool()
		b.mu.Unlock()
		b.setAvailable(false)
		b.closeExtras()
		s.close()
	}()
	select {
	case <-b.authLost: // from before this session came up
	default:
	}
	tick := time.NewTicker(b.o.HealthInterval)
	defer tick.Stop()
	failed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-b.authLost:
			return
		case <-tick.C:
			if b.ping(ctx, s) {
				failed = 0
			} else if failed++; failed >= 2 {
				b.log.Warn("MCP server does not answer pings")
				return
			}
		case <-s.listChanged:
			pctx, cancel := context.WithTimeout(ctx, b.o.ConnectTimeout)
			if err := b.publish(pctx, s); err != nil && ctx.Err() == nil {
				b.log.Error("republishing after tools/list_changed failed", slog.String("error", err.Error()))
			}
			cancel()
		}
	}
}

// ping reports whether the server answers. A JSON-RPC error is an answer
// (MCP 2026-07-28 servers need not implement ping).
func (b *Backend) ping(ctx context.Context, s *session) bool {
	pctx, cancel := context.WithTimeout(ctx, min(b.o.HealthInterval, 10*time.Second))
	defer cancel()
	err := s.cs.Ping(pctx, nil)
	var werr *jsonrpc.Error
	return err == nil || errors.As(err, &werr)
}

func (b *Backend) setAvailable(up bool) { b.avail.Set(up) }

// publish builds the manifest and hands it to the Publisher unless it is
// byte-identical to the last one published.
func (b *Backend) publish(ctx context.Context, s *session) error {
	bm, err := b.buildManifest(ctx, s)
	if err != nil {
		return err
	}
	for _, d := range bm.dropped {
		b.log.Warn("MCP tool left out of the manifest", slog.String("reason", safeText(b.red, d, 512)))
	}
	published, version, _, err := b.pub.Publish(ctx, bm.version, bm.canonical)
	if err != nil {
		return fmt.Errorf("publishing manifest version %s: %w", bm.version, err)
	}
	if !published {
		return nil
	}
	b.log.Info("published MCP manifest", slog.String("version", version), slog.Int("tools", bm.tools))
	return nil
}

func (b *Backend) onToolsChanged(_ context.Context, req *mcp.ToolListChangedRequest) {
	// Runs on the SDK's read loop: only signal.
	if s := b.sessionOf(req.Session); s != nil {
		select {
		case s.listChanged <- struct{}{}:
		default:
		}
	}
}

// declineUnsupported answers the server requests the gateway cannot honour
// with a clear error, and records the loss.
func (b *Backend) declineUnsupported(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		var code, msg string
		switch method {
		case "sampling/createMessage":
			code, msg = agentproto.CodeUnsupportedSampling, "agentgw does not support sampling: the gateway has no model to sample from"
		case "roots/list":
			code, msg = agentproto.CodeUnsupportedRoots, "agentgw does not support roots: the gateway exposes no filesystem roots"
		default:
			return next(ctx, method, req)
		}
		var st *callState
		if cs, ok := req.GetSession().(*mcp.ClientSession); ok {
			if s := b.sessionOf(cs); s != nil {
				st, _ = s.soleCall()
			}
		}
		b.recordLoss(st, code)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: msg}
	}
}
