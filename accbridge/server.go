package accbridge

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/backendkit"
)

// Path is the connector WebSocket path (DESIGN.md).
const Path = "/v1/connector"

// Options configure the control-center listener.
type Options struct {
	Listen string
	Files  Files
	Store  accdb.Driver
	Logger *slog.Logger
	// Publisher and Availability are the gateway's; nil for none.
	Publisher    backendkit.Publisher
	Availability backendkit.Availability
	// Redactor scrubs secrets out of connector text before it is shown.
	Redactor *backendkit.Redactor

	Heartbeat       time.Duration // default 30s
	Grace           time.Duration // default 60s
	RegisterTimeout time.Duration // default 10s
	AcceptTimeout   time.Duration // default 30s
	CancelTimeout   time.Duration // default 15s
	BusyRetry       time.Duration // default 60s
	ApprovalTimeout time.Duration // default 5m
	// HighRiskApprovers, when set, are the only callers whose approval of
	// a high or critical risk action counts.
	HighRiskApprovers []string
	ForwardToolOutput bool
	MaxFrameBytes     int // default 1 MiB
	MaxAgents         int // default 1000
}

func (o *Options) defaults() {
	d := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	d(&o.Heartbeat, 30*time.Second)
	d(&o.Grace, 60*time.Second)
	d(&o.RegisterTimeout, 10*time.Second)
	d(&o.AcceptTimeout, 30*time.Second)
	d(&o.CancelTimeout, 15*time.Second)
	d(&o.BusyRetry, 60*time.Second)
	d(&o.ApprovalTimeout, 5*time.Minute)
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = 1 << 20
	}
	if o.MaxAgents <= 0 {
		o.MaxAgents = 1000
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Redactor == nil {
		o.Redactor = backendkit.NewRedactor(nil)
	}
}

// Server is the control-center side of Connector API v1: the TLS 1.3
// listener, authentication, the connector sessions and the agents
// (endpoints) they serve.
type Server struct {
	o      Options
	log    *slog.Logger
	jwtPub *ecdsa.PublicKey
	tlsCfg *tls.Config

	mu       sync.Mutex
	sessions map[string]*session // connector_id → live session
	agents   map[string]*Agent   // connector name + "\x00" + agent_id → endpoint
	runs     map[string]*liveRun // run_id → run in flight
	nameByID map[string]string   // connector_id → name, learned at register
	settled  settled             // runs that ended, agents a cancelled run may still hold
	ctx      context.Context
	addr     net.Addr
	ready    chan struct{}
	readyOne sync.Once
	leased   bool // cluster mode: the listener runs on the lease holder
}

// NewServer loads the key material and returns the server; Start listens.
func NewServer(o Options) (*Server, error) {
	o.defaults()
	if o.Store == nil {
		return nil, errors.New("accbridge: no store")
	}
	cert, err := tls.LoadX509KeyPair(o.Files.Cert, o.Files.Key)
	if err != nil {
		return nil, fmt.Errorf("accbridge: server certificate: %w (run `agentgw acc init`)", err)
	}
	ca, err := ReadCert(o.Files.CA)
	if err != nil {
		return nil, fmt.Errorf("accbridge: connector CA: %w (run `agentgw acc init`)", err)
	}
	jk, err := ReadKey(o.Files.JWTKey)
	if err != nil {
		return nil, fmt.Errorf("accbridge: JWT key: %w (run `agentgw acc init`)", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	s := &Server{
		o: o, log: o.Logger, jwtPub: &jk.PublicKey,
		sessions: map[string]*session{}, agents: map[string]*Agent{}, runs: map[string]*liveRun{},
		nameByID: map[string]string{}, ready: make(chan struct{}),
	}
	s.tlsCfg = &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
	}
	return s, nil
}

// closing reports whether the listener is shutting down.
func (s *Server) closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctx != nil && s.ctx.Err() != nil
}

func (s *Server) runContext() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

// Endpoints lists the endpoints mapped onto the server.
func (s *Server) Endpoints() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.agents))
	for _, a := range s.agents {
		out = append(out, a.o.Endpoint)
	}
	return out
}

func agentKey(connector, agentID string) string { return connector + "\x00" + agentID }

// Addr is the listening address once Start has bound it.
func (s *Server) Addr() net.Addr {
	<-s.ready
	return s.addr
}

// Start listens until ctx ends. It may be called again after it returned
// (in cluster mode it runs while this instance holds the listener's
// lease). Nothing reaches the protocol before the
// TLS handshake (a client certificate of the connector CA) and the token
// check on the upgrade request.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.o.Listen)
	if err != nil {
		s.readyOne.Do(func() { close(s.ready) })
		return fmt.Errorf("accbridge: listen: %w", err)
	}
	s.mu.Lock()
	s.ctx = ctx
	s.addr = ln.Addr()
	s.mu.Unlock()
	s.readyOne.Do(func() { close(s.ready) })
	s.log.Info("acc listener up", "addr", ln.Addr().String(), "path", Path)
	mux := http.NewServeMux()
	mux.HandleFunc(Path, s.serveConnector)
	hs := &http.Server{
		Handler: mux, TLSConfig: s.tlsCfg, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10,
		ErrorLog:    slog.NewLogLogger(s.log.With("part", "acc-listener").Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	go s.watchRevocations(ctx)
	go func() {
		<-ctx.Done()
		sc, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.closeAll()
		hs.Shutdown(sc)
	}()
	err = hs.Serve(tls.NewListener(ln, s.tlsCfg))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) closeAll() {
	s.mu.Lock()
	ss := make([]*session, 0, len(s.sessions))
	for _, x := range s.sessions {
		ss = append(ss, x)
	}
	s.mu.Unlock()
	for _, x := range ss {
		x.close(websocket.StatusGoingAway, "gateway shutting down")
	}
}

// authenticate checks the client certificate against the enrolled one
// and the bearer token, and returns the connector.
func (s *Server) authenticate(r *http.Request) (accdb.Connector, string, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return accdb.Connector{}, "", errors.New("no client certificate")
	}
	der := r.TLS.PeerCertificates[0].Raw
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return accdb.Connector{}, "", ErrNoToken
	}
	id, err := verifyToken(s.jwtPub, strings.TrimSpace(tok), der, time.Now())
	if err != nil {
		return accdb.Connector{}, "", err
	}
	c, ok, err := s.o.Store.ConnectorByID(r.Context(), id)
	if err != nil {
		return accdb.Connector{}, "", fmt.Errorf("store: %w", err)
	}
	if !ok {
		return accdb.Connector{}, "", ErrUnknown
	}
	if c.Revoked() {
		return accdb.Connector{}, "", ErrRevoked
	}
	if c.CertSHA256 != Fingerprint(der) {
		return accdb.Connector{}, "", ErrCertMismatch
	}
	return c, strings.TrimSpace(tok), nil
}

func (s *Server) serveConnector(w http.ResponseWriter, r *http.Request) {
	c, tok, err := s.authenticate(r)
	if err != nil {
		// The reason is ours (no token bytes); the peer learns only 401.
		s.log.Warn("acc connection refused", "remote", r.RemoteAddr, "reason", err.Error())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"type":"error","code":4007,"message":"unauthorized"}`))
		return
	}
	// A connector that echoes its own token (in an event, a result) must
	// not get it past the redactor.
	s.o.Redactor.Add(tok)
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionContextTakeover})
	if err != nil {
		s.log.Warn("acc websocket upgrade failed", "connector", c.Name, "error", err)
		return
	}
	conn.SetReadLimit(int64(s.o.MaxFrameBytes))
	sess := newSession(s, c, conn, r.RemoteAddr)
	sess.run(r.Context())
}

// watchRevocations closes the live socket of a connector revoked by
// `agentgw acc revoke` (another process) within a second.
func (s *Server) watchRevocations(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		ss := make([]*session, 0, len(s.sessions))
		for _, x := range s.sessions {
			ss = append(ss, x)
		}
		s.mu.Unlock()
		for _, x := range ss {
			c, ok, err := s.o.Store.ConnectorByID(ctx, x.conn.ID)
			if err != nil {
				continue
			}
			if !ok || c.Revoked() {
				s.log.Warn("acc connector revoked; closing its connection", "connector", x.conn.Name)
				x.close(websocket.StatusPolicyViolation, "revoked")
			}
		}
	}
}

// attach makes sess the connector's live session, replacing (and closing)
// an earlier one, and hands it the runs in flight.
func (s *Server) attach(sess *session) {
	s.mu.Lock()
	old := s.sessions[sess.conn.ID]
	s.sessions[sess.conn.ID] = sess
	s.nameByID[sess.conn.ID] = sess.conn.Name
	var adopt []*liveRun
	for _, lr := range s.runs {
		if lr.connectorID == sess.conn.ID {
			adopt = append(adopt, lr)
		}
	}
	s.mu.Unlock()
	if old != nil {
		s.log.Warn("acc connector connected again; the new connection replaces the old one",
			"connector", sess.conn.Name, "old_remote", old.remote, "new_remote", sess.remote)
		old.close(websocket.StatusCode(4000), "replaced by a new connection")
	}
	// A new connection starts healthy.
	s.setDegraded(sess.conn.Name, false)
	for _, lr := range adopt {
		lr.setSession(sess)
	}
}

// detach forgets sess if it is still the live one; the runs it carried
// wait for the grace period.
func (s *Server) detach(sess *session) {
	s.mu.Lock()
	live := s.sessions[sess.conn.ID] == sess
	if live {
		delete(s.sessions, sess.conn.ID)
	}
	var orphans []*liveRun
	for _, lr := range s.runs {
		if lr.connectorID == sess.conn.ID {
			orphans = append(orphans, lr)
		}
	}
	agents := s.agentsOf(sess.conn.Name)
	s.mu.Unlock()
	if !live {
		return
	}
	for _, a := range agents {
		a.setDeclared(nil, false)
	}
	for _, lr := range orphans {
		lr.setSession(nil)
	}
}

func (s *Server) agentsOf(name string) []*Agent {
	var out []*Agent
	for _, a := range s.agents {
		if a.connector == name {
			out = append(out, a)
		}
	}
	return out
}

func (s *Server) session(connectorID string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[connectorID]
}

// connectorID returns the id of a connector name once it registered.
func (s *Server) connectorID(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, n := range s.nameByID {
		if n == name {
			return id
		}
	}
	return ""
}

// capabilities publishes the declared agents that endpoints map; others
// are logged and never published.
func (s *Server) capabilities(sess *session, agents []agentDecl) {
	s.mu.Lock()
	mine := s.agentsOf(sess.conn.Name)
	s.mu.Unlock()
	declared := map[string]agentDecl{}
	for _, d := range agents {
		declared[d.AgentID] = d
	}
	mapped := map[string]bool{}
	for _, a := range mine {
		d, ok := declared[a.agentID]
		mapped[a.agentID] = true
		if ok {
			a.setDeclared(&d, true)
		} else {
			a.setDeclared(nil, true)
		}
	}
	unmapped := 0
	for _, d := range agents {
		if !mapped[d.AgentID] {
			unmapped++
			if unmapped <= 10 {
				s.log.Info("acc connector declares an agent no endpoint maps; not published",
					"connector", sess.conn.Name, "agent_id", clip(d.AgentID, 64))
			}
		}
	}
	if unmapped > 10 {
		s.log.Info("acc connector declares more unmapped agents", "connector", sess.conn.Name, "more", unmapped-10)
	}
}

// route hands a run frame to its run, if the run is this connector's and
// in flight; it reports false otherwise (the answer is then 4004, the
// same for another connector's run, a finished run and no run).
func (s *Server) route(sess *session, f *frame) bool {
	s.mu.Lock()
	lr := s.runs[f.RunID]
	s.mu.Unlock()
	if lr == nil || lr.connectorID != sess.conn.ID {
		return false
	}
	return lr.deliver(f)
}

// addRun makes a run routable. A connection that replaced the one the run
// was created on meanwhile is the run's from now (attach adopts runs under
// the same lock, so one of the two sees the other).
func (s *Server) addRun(lr *liveRun) {
	s.mu.Lock()
	s.runs[lr.runID] = lr
	cur := s.sessions[lr.connectorID]
	s.mu.Unlock()
	if cur != lr.session() {
		lr.setSession(cur)
	}
}

func (s *Server) removeRun(lr *liveRun) {
	s.mu.Lock()
	if s.runs[lr.runID] == lr {
		delete(s.runs, lr.runID)
	}
	s.mu.Unlock()
}

// reconcile runs after register: runs the store holds open for this
// connector that no task is following any more (the gateway restarted,
// or the grace period ran out) are cancelled on the connector.
func (s *Server) reconcile(ctx context.Context, sess *session) {
	open, err := s.o.Store.OpenRuns(ctx, sess.conn.ID)
	if err != nil {
		s.log.Warn("acc: cannot read open runs", "connector", sess.conn.Name, "error", err)
		return
	}
	for _, r := range open {
		s.mu.Lock()
		live := s.runs[r.RunID] != nil
		s.mu.Unlock()
		if live {
			continue
		}
		// Remembered before cancel_run goes out: the connector's
		// run_cancelled may be read before send returns, and must find the
		// run settled rather than get 4004.
		s.settled.noteEnded(r.RunID, sess.conn.ID, agentKey(sess.conn.Name, r.AgentID), true, time.Time{})
		if err := sess.send(map[string]any{"type": TypeCancelRun, "run_id": r.RunID}); err != nil {
			return
		}
		s.log.Info("acc: cancelled a run no task follows any more", "connector", sess.conn.Name, "run", r.RunID, "task", r.TaskID)
		if err := s.o.Store.SetRunState(ctx, r.RunID, accdb.RunDone); err != nil {
			s.log.Warn("acc: cannot record a cancelled run", "run", r.RunID, "error", err)
		}
	}
}

func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
