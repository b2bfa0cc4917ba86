// Package console is the operator web console served by `agentgw serve`
// on [console] listen (docs/console.md): agents, their versions, hashes
// and tools; a form that runs a tool as the operator through the task
// engine and follows the task; tasks with cancel and input; federation
// grants; self-registered endpoints and their bans.
//
// Every administrative action runs the code the CLI and the admin IQs run:
// the admin ad-hoc commands' table (adhoc/admincmd Exec) and the task
// engine. Pages are server-rendered html/template (agent names, tool
// descriptions and task output are text, never markup), with a small
// embedded script and stylesheet and a Content-Security-Policy that
// allows nothing else. Login is by an operator's XMPP account, checked
// against [xmpp] admins and by a real SASL login to the XMPP server, or by
// a token for automation.
package console

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/agentgw/agentgw/adhoc/admincmd"
	"github.com/agentgw/agentgw/console/sessiondb"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/directory/selfregdb"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

//go:embed web/*.html web/static/*
var webFS embed.FS

// Deps is what the console shows and acts on.
type Deps struct {
	// IsAdmin tells the operators ([xmpp] admins) by bare JID.
	IsAdmin func(bareJID string) bool
	// Token is the automation token; "" turns login by token off.
	Token string
	// CheckPassword verifies an account's password by a SASL login to the
	// XMPP server; nil turns login by XMPP account off. XMPPLogin makes one.
	CheckPassword func(ctx context.Context, bareJID, password string) error
	// TokenUser is the principal a token login acts as (its tasks' caller):
	// the first admin; "" leaves the token read-and-admin only (no tool runs).
	TokenUser string

	// RouteResource is the resource of the route of the tasks the console
	// runs (gateway.ConsoleResource: their events are not sent over XMPP).
	RouteResource string

	Directory *directory.Registry
	Admin     *admincmd.Service
	Engine    *tasks.Engine
	Tasks     taskdb.Driver
	Grants    federation.GrantStore
	SelfReg   selfregdb.Driver
	// Sessions keeps the logins; the gateway's store shares them between
	// a cluster's members and keeps them over a restart. Nil: in memory.
	Sessions sessiondb.Driver
	// Health, when set, tells a backend's state for an endpoint
	// ("ready", "starting", "none").
	Health func(endpoint string) string
	// Bridges, when set, lists the connectors and bridges for their page.
	Bridges func(ctx context.Context) []BridgeRow
	// Cluster, when set, lists the members and leases for the bridges
	// page; a nil view outside cluster mode.
	Cluster func(ctx context.Context) (*ClusterView, error)

	// Secure marks cookies Secure (the console is served over TLS).
	Secure bool
	// SessionTTL bounds a login. Default 8 h.
	SessionTTL time.Duration
	// RequestsPerSecond and RequestsBurst limit each client address.
	RequestsPerSecond float64
	RequestsBurst     int
	Log               *slog.Logger
	Now               func() time.Time
}

// BridgeRow is one connector, channel, account or card on the bridges page.
type BridgeRow struct {
	Kind, Name, Endpoint, State, Detail string
}

// ClusterView is the cluster's members and leases.
type ClusterView struct {
	Members []MemberRow
	Leases  []LeaseRow
}

// MemberRow is one cluster member: its lease and its unsettled tasks.
type MemberRow struct {
	Instance string
	Joined   time.Time
	Expires  time.Time
	Live     bool
	Tasks    int
}

// LeaseRow is one named lease (a bridge connection, a singleton).
type LeaseRow struct {
	Name, Holder string
	Expires      time.Time
	Live         bool
}

// Server is the console's HTTP handler.
type Server struct {
	d        Deps
	tmpl     map[string]*template.Template
	static   http.Handler
	sessions *sessionStore
	reqLimit *limiter
	logLimit *limiter
	mux      *http.ServeMux
	live     *hub
}

// New builds the console.
func New(d Deps) (*Server, error) {
	if d.IsAdmin == nil || d.Directory == nil || d.Admin == nil {
		return nil, errors.New("console: New needs IsAdmin, Directory and Admin")
	}
	if d.Token == "" && d.CheckPassword == nil {
		return nil, errors.New("console: no way to log in (neither a token nor an XMPP login server)")
	}
	if d.Token != "" && d.TokenUser == "" {
		return nil, errors.New("console: a token login needs an operator to act as (the first of [xmpp] admins)")
	}
	if d.RouteResource == "" {
		d.RouteResource = "agentgw-console"
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.SessionTTL <= 0 {
		d.SessionTTL = 8 * time.Hour
	}
	if d.RequestsPerSecond <= 0 {
		d.RequestsPerSecond = 20
	}
	if d.RequestsBurst <= 0 {
		d.RequestsBurst = 60
	}
	s := &Server{d: d, sessions: newSessionStore(d.Sessions, d.Now, d.SessionTTL),
		reqLimit: newLimiter(d.RequestsPerSecond, d.RequestsBurst, d.Now),
		logLimit: newLimiter(5.0/60, 5, d.Now), live: newHub()}
	var err error
	if s.tmpl, err = parseTemplates(); err != nil {
		return nil, err
	}
	sub, _ := fs.Sub(webFS, "web/static")
	s.static = http.StripPrefix("/static/", http.FileServer(http.FS(sub)))
	s.routes()
	return s, nil
}

// ServeHTTP applies the headers, the rate limit and the login to every
// request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if s.d.Secure {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if !s.reqLimit.allow(clientAddr(r)) {
		h.Set("Retry-After", "1")
		http.Error(w, "Too many requests: slow down.", http.StatusTooManyRequests)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	s.mux.ServeHTTP(w, r)
}

// CSP is the console's Content-Security-Policy: its own script and
// stylesheet, nothing inline, no framing, forms only to itself.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// maxBody bounds a request body (the largest form is a tool's arguments).
const maxBody = 1 << 20

// Serve serves on ln until ctx ends; with certFile and keyFile over TLS.
func (s *Server) Serve(ctx context.Context, ln net.Listener, certFile, keyFile string) error {
	var err error
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	go func() {
		<-ctx.Done()
		sc, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sc)
	}()
	if certFile != "" {
		err = srv.ServeTLS(ln, certFile, keyFile)
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
