package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/connectorbridge"
	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/logging"
	"github.com/agentgw/agentgw/mcpbridge"
	"github.com/agentgw/agentgw/oanbridge"
	"github.com/agentgw/agentgw/xep/xmltree"
)

func init() {
	register(command{name: "doctor", summary: "check a config, the XMPP server link, the backends and the store without serving", run: runDoctor})
}

const doctorSynopsis = `doctor --config C [--timeout 10s] [--mcp-timeout 60s] [--verbose]

Checks, one line each ("ok", "FAIL" or "skip"): the config, the component
secret, that the XMPP server's component port answers, the XEP-0114
handshake and an XEP-0199 ping round trip, the store (quick_check), and every
agent's backend (static manifest, MCP initialize, connector Card and
/health). Exits 1 when any check fails. Nothing is served.

The handshake check opens a component session of its own, so while the
gateway is connected it fails with "another component session is connected"
(Prosody, ejabberd and Openfire all refuse a second session). Run doctor
before starting the gateway, or with it stopped.`

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("doctor", doctorSynopsis, stdout)
	cfgPath := configFlag(fs)
	timeout := fs.Duration("timeout", 10*time.Second, "bound of each network check (TCP connect, handshake, ping, connector requests)")
	mcpTimeout := fs.Duration("mcp-timeout", 60*time.Second, "bound of each MCP server's start and initialize (npx may need to install first)")
	verbose := fs.Bool("verbose", false, "write the checked parts' logs to stderr (secrets redacted)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("doctor takes no arguments")
	}
	if *timeout <= 0 || *mcpTimeout <= 0 {
		return usagef("--timeout and --mcp-timeout must be positive")
	}
	d := &doctor{out: stdout, red: backendkit.NewRedactor(nil), cfgPath: *cfgPath, timeout: *timeout, mcpTimeout: *mcpTimeout}

	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		d.fail("config", "%s", strings.TrimPrefix(err.Error(), "config: "))
		return d.result()
	}
	d.ok("config", "%s is valid (%d agents)", *cfgPath, len(cfg.Agents))
	d.red.Add(gateway.Secrets(cfg)...)
	d.log = slog.New(slog.DiscardHandler)
	if *verbose {
		if d.log, err = logging.New(stderr, cfg.Log.Format, "debug", d.red); err != nil {
			return fmt.Errorf("[log]: %w", err)
		}
	}

	secret, secretErr := cfg.ComponentSecret()
	if secretErr != nil {
		d.fail("component secret", "%v — set it to the secret the server has for %s", secretErr, cfg.XMPP.ComponentDomain)
	} else {
		d.red.Add(secret)
		d.ok("component secret", "read from %s", secretSource(cfg))
	}

	d.checkXMPP(ctx, cfg, secret, secretErr == nil)
	// The store opens through gateway.OpenStores, as serve opens it.
	var st *gateway.Store
	if cfg.Store.Driver == config.DriverPostgres {
		if st = d.checkPostgres(ctx, cfg); st != nil {
			d.checkCluster(ctx, cfg, st)
		}
	} else {
		st = d.checkStore(ctx, cfg)
	}
	if st != nil {
		defer st.Close()
		d.bindings, d.accs = st.Bindings, st.ACC
	}
	for _, a := range cfg.Agents {
		d.checkAgent(ctx, cfg, a)
	}
	return d.result()
}

// doctor prints one line per check and counts failures.
type doctor struct {
	out                 io.Writer
	red                 *backendkit.Redactor
	log                 *slog.Logger
	cfgPath             string
	timeout, mcpTimeout time.Duration
	checks, failed      int
	// bindings is the connector binding driver of the store; nil when the
	// store did not open (or does not exist yet).
	bindings bindingdb.Driver
	// accs is the ACC store of either driver; nil when the store did not
	// open (or does not exist yet).
	accs accdb.Driver
}

// The status words are padded to one width so the subjects line up.
func (d *doctor) ok(what, format string, a ...any) { d.line("ok  ", what, format, a...) }
func (d *doctor) skip(what, format string, a ...any) {
	d.line("skip", what, format, a...)
}
func (d *doctor) fail(what, format string, a ...any) {
	d.failed++
	d.line("FAIL", what, format, a...)
}

// line writes one check; continuation lines of a multi-line message are
// indented under it. Every registered secret is scrubbed.
func (d *doctor) line(status, what, format string, a ...any) {
	d.checks++
	msg := d.red.Scrub(fmt.Sprintf(format, a...))
	msg = strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "\n     ")
	fmt.Fprintf(d.out, "%s %s: %s\n", status, what, msg)
}

func (d *doctor) result() error {
	if d.failed == 0 {
		return nil
	}
	return exitError{code: 1, msg: fmt.Sprintf("%d of %d checks failed", d.failed, d.checks)}
}

func secretSource(cfg *config.Config) string {
	if cfg.XMPP.SecretEnv != "" {
		return "environment variable " + cfg.XMPP.SecretEnv
	}
	return "file " + cfg.Path(cfg.XMPP.SecretFile)
}

// dialCheck connects to addr and closes again. The error is a sentence
// for the operator; hint names what should be listening.
func (d *doctor) dialCheck(ctx context.Context, addr, hint string) error {
	dctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	var dl net.Dialer
	conn, err := dl.DialContext(dctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return nil
	}
	var dnsErr *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing listens on %s — %s", addr, hint)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("cannot resolve %s (%s) — check the host name", dnsErr.Name, dnsErr.Err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%s did not accept a connection within %v — check the address and any firewall in between", addr, d.timeout)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Errorf("%s is unreachable (no route) — check the address", addr)
	}
	return fmt.Errorf("cannot connect to %s: %s", addr, lastPart(err))
}

// lastPart drops the "dial tcp ...:" prefixes of a net error.
func lastPart(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// checkXMPP reports the component port, the handshake and a ping.
func (d *doctor) checkXMPP(ctx context.Context, cfg *config.Config, secret string, haveSecret bool) {
	addr := cfg.XMPP.Server
	domain := cfg.XMPP.ComponentDomain
	if err := d.dialCheck(ctx, addr, "is the server running and is its component port configured?"); err != nil {
		d.fail("xmpp server", "%v", err)
		d.skip("xmpp handshake", "the server is not reachable")
		d.skip("xmpp ping", "no component session")
		return
	}
	d.ok("xmpp server", "%s accepts connections", addr)
	if !haveSecret {
		d.skip("xmpp handshake", "the component secret is not readable")
		d.skip("xmpp ping", "no component session")
		return
	}

	dom, err := jid.Parse(domain)
	if err != nil { // Validate already refused it
		d.fail("xmpp handshake", "component_domain %q is not a domain", domain)
		return
	}
	errs := &lastError{}
	log := slog.New(&capture{next: d.log.Handler(), last: errs})
	comp := component.New(component.Config{
		Domain:           dom,
		Addr:             addr,
		Secret:           secret,
		Logger:           log,
		HandshakeTimeout: d.timeout,
		IQTimeout:        d.timeout,
		PingInterval:     time.Hour, // the check sends its own ping
		StartupGrace:     -1,        // report an unknown domain at once
		// One attempt fits in the window; a second would only hide why
		// the first failed.
		MinBackoff: 2 * d.timeout,
		MaxBackoff: 2 * d.timeout,
	}, component.NewRouter(dom, nil, log))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- comp.Run(runCtx) }()
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}()

	wait := time.NewTimer(d.timeout + time.Second)
	defer wait.Stop()
	select {
	case <-comp.Ready():
	case err := <-done:
		done <- err // for the deferred wait
		d.fail("xmpp handshake", "%s", handshakeProblem(err, domain))
		d.skip("xmpp ping", "no component session")
		return
	case <-wait.C:
		why := errs.get()
		if why == "" || strings.Contains(why, "closed network connection") || strings.Contains(why, "timeout") || strings.Contains(why, "within") {
			// Our own deadline closed the connection: the server said nothing.
			why = "no answer"
		}
		if strings.Contains(why, "internal-server-error") {
			// Openfire's answer when no secret is configured for the subdomain.
			why += "; on Openfire, set a secret for the subdomain or xmpp.component.defaultSecret"
		}
		d.fail("xmpp handshake", "%s accepted the connection but the handshake for %s did not complete within %v (%s) — is %s the server's component port (not its client port)?", addr, domain, d.timeout, why, addr)
		d.skip("xmpp ping", "no component session")
		return
	case <-ctx.Done():
		d.fail("xmpp handshake", "interrupted")
		return
	}
	d.ok("xmpp handshake", "%s accepted the component secret for %s", addr, domain)

	server := component.ParentDomain(dom)
	ping := component.NewIQ("get", "", dom, server, xmltree.New(ns.Ping, "ping"))
	pctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	start := time.Now()
	_, err = comp.SendIQ(pctx, ping)
	rtt := time.Since(start).Round(10 * time.Microsecond)
	var se *agentproto.StanzaError
	switch {
	case err == nil:
		d.ok("xmpp ping", "%s answered in %v", server, rtt)
	case errors.As(err, &se):
		// Any answer proves that stanzas flow both ways.
		d.ok("xmpp ping", "%s answered in %v (with the error %s; the link works)", server, rtt, se.Condition)
	case errors.Is(err, component.ErrIQTimeout), errors.Is(err, context.DeadlineExceeded):
		d.fail("xmpp ping", "%s did not answer a ping within %v — the stream is up but nothing comes back; check the server's log", server, d.timeout)
	default:
		d.fail("xmpp ping", "%v", err)
	}
}

// handshakeProblem words the reason Run gave up: the component's own
// advice (component.FatalAdvice), except for a conflict, which while doctor
// runs means the doctor's session met another one.
func handshakeProblem(err error, domain string) string {
	var fe *component.FatalError
	if errors.As(err, &fe) {
		if fe.Condition == "conflict" {
			return "another component session is connected for " + domain + ": a gateway (or something else) is already connected as " + domain + "; stop it before running doctor"
		}
		return fe.Advice
	}
	if err == nil {
		return "the component stopped before the handshake"
	}
	return err.Error()
}

// lastError keeps the most recent "err" attribute the component logged, so
// a handshake timeout can say what happened.
type lastError struct {
	mu  sync.Mutex
	msg string
}

func (l *lastError) set(s string) { l.mu.Lock(); l.msg = s; l.mu.Unlock() }
func (l *lastError) get() string  { l.mu.Lock(); defer l.mu.Unlock(); return l.msg }

type capture struct {
	next slog.Handler
	last *lastError
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }

func (c *capture) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			c.last.set(a.Value.String())
		}
		return true
	})
	if c.next.Enabled(ctx, r.Level) {
		return c.next.Handle(ctx, r)
	}
	return nil
}

func (c *capture) WithAttrs(as []slog.Attr) slog.Handler {
	return &capture{next: c.next.WithAttrs(as), last: c.last}
}

func (c *capture) WithGroup(name string) slog.Handler {
	return &capture{next: c.next.WithGroup(name), last: c.last}
}

// checkStore opens the store and runs quick_check. A store that does not
// exist yet is fine when its directory is writable; it is not created.
func (d *doctor) checkStore(ctx context.Context, cfg *config.Config) *gateway.Store {
	path := cfg.Path(cfg.Store.Path)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		dir := filepath.Dir(path)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			d.fail("store", "%s does not exist and neither does its directory %s — create the directory or fix [store] path", path, dir)
			return nil
		}
		f, err := os.CreateTemp(dir, ".agentgw-doctor-*")
		if err != nil {
			d.fail("store", "%s does not exist and %s is not writable (%s) — give the gateway's user write access", path, dir, lastPart(err))
			return nil
		}
		f.Close()
		os.Remove(f.Name())
		d.ok("store", "%s does not exist yet; serve creates it (the directory is writable)", path)
		return nil
	}
	octx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	st, err := gateway.OpenStores(octx, cfg)
	if err != nil {
		d.fail("store", "cannot open %s: %s — check the path, its permissions, and that the file is an agentgw SQLite database", path, strings.TrimPrefix(err.Error(), "store: "))
		return nil
	}
	if err := st.SQLite.QuickCheck(octx); err != nil {
		st.Close()
		d.fail("store", "%s failed its integrity check: %s — stop the gateway and restore the latest backup (docs/operations.md)", path, strings.TrimPrefix(err.Error(), "store: "))
		return nil
	}
	d.ok("store", "%s opens and passes quick_check", path)
	return st
}

// checkPostgres reads the DSN, connects, applies pending migrations (as
// serve would) and checks that the database takes writes. The DSN and its
// password are added to the redactor first: no line shows them.
func (d *doctor) checkPostgres(ctx context.Context, cfg *config.Config) *gateway.Store {
	if _, err := cfg.StoreDSN(); err != nil {
		d.fail("store", "%v — set it to the database's libpq URL (postgresql://user:password@host:5432/database)", err)
		return nil
	}
	d.red.Add(gateway.DSNSecrets(cfg)...)
	octx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	st, err := gateway.OpenStores(octx, cfg)
	if err != nil {
		d.fail("store", "%s — check the DSN's host, port, user and database, and that PostgreSQL accepts this client (pg_hba.conf)", d.red.Scrub(strings.TrimPrefix(err.Error(), "pgstore: ")))
		return nil
	}
	if err := st.CheckWritable(octx); err != nil {
		st.Close()
		d.fail("store", "%s — the gateway needs a primary (not a standby) and a user that may write", d.red.Scrub(strings.TrimPrefix(err.Error(), "pgstore: ")))
		return nil
	}
	applied, err := st.Postgres.Applied(octx)
	if err != nil {
		st.Close()
		d.fail("store", "%s", d.red.Scrub(err.Error()))
		return nil
	}
	d.ok("store", "postgres %s answers, takes writes, %d migrations applied (instance %s)", st.Where, len(applied), cfg.Cluster.Instance)
	return st
}

// checkAgent checks one [[agents]] entry's backend.
func (d *doctor) checkAgent(ctx context.Context, cfg *config.Config, a config.Agent) {
	what := "agent " + a.JID
	switch {
	case a.Manifest != "":
		d.checkManifest(cfg, a, what)
	case a.MCP != nil:
		d.checkMCP(ctx, cfg, a, what)
	case a.Connector != nil:
		d.checkConnector(ctx, cfg, a, what)
	case a.OAN != nil:
		d.checkOAN(ctx, cfg, a, what)
	case a.ACC != nil:
		d.checkACC(ctx, cfg, a, d.accs, what)
	}
}

// checkOAN checks an OpenAgentNetwork agent: its key file and that OAN
// accepts the key.
func (d *doctor) checkOAN(ctx context.Context, cfg *config.Config, a config.Agent, what string) {
	keyFile := cfg.Path(a.OAN.APIKeyFile)
	if k, err := oanbridge.ReadKey(keyFile); err == nil {
		d.red.Add(k)
	}
	hctx, cancel := context.WithTimeout(ctx, 2*d.timeout+time.Second)
	defer cancel()
	if err := oanbridge.Check(hctx, a.OAN.BaseURL, keyFile); err != nil {
		d.fail(what, "OAN at %s: %s", redactURL(a.OAN.BaseURL), d.red.Scrub(err.Error()))
		return
	}
	d.ok(what, "OAN at %s accepts the API key", redactURL(a.OAN.BaseURL))
}

func (d *doctor) checkManifest(cfg *config.Config, a config.Agent, what string) {
	path := cfg.Path(a.Manifest)
	raw, err := os.ReadFile(path)
	if err != nil {
		d.fail(what, "cannot read manifest %s: %s — fix the [[agents]] manifest path", path, lastPart(err))
		return
	}
	m, err := directory.ParseManifest(raw)
	if err != nil {
		d.fail(what, "manifest %s is invalid: %v", path, err)
		return
	}
	if want, _ := jid.Parse(a.JID); m.Endpoint != want.Bare().String() {
		d.fail(what, "manifest %s declares agent.jid %s, not %s — make them match", path, m.Endpoint, a.JID)
		return
	}
	d.ok(what, "manifest %s is valid (version %s, %d tools)", path, m.Version, len(m.Tools))
}

func (d *doctor) checkMCP(ctx context.Context, cfg *config.Config, a config.Agent, what string) {
	m := a.MCP
	if len(m.Command) > 0 {
		if problem := commandProblem(cfg, m.Command[0]); problem != "" {
			d.fail(what, "%s", problem)
			return
		}
	} else {
		u, err := url.Parse(m.URL)
		if err != nil {
			d.fail(what, "[agents.mcp] url is not a URL")
			return
		}
		if err := d.dialCheck(ctx, hostPort(u), "is the MCP server running? check [agents.mcp] url"); err != nil {
			d.fail(what, "%v", err)
			return
		}
	}
	o := gateway.MCPOptions(cfg, a)
	o.ComponentDomain = cfg.XMPP.ComponentDomain
	o.Logger = d.log
	// Our context ends first, so a timeout reads as one.
	o.ConnectTimeout = d.mcpTimeout + 5*time.Second
	b, err := mcpbridge.New(o)
	if err != nil {
		d.fail(what, "%s", strings.TrimPrefix(err.Error(), "mcpbridge: "))
		return
	}
	ictx, cancel := context.WithTimeout(ctx, d.mcpTimeout)
	defer cancel()
	start := time.Now()
	err = b.Initialize(ictx)
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case err == nil:
		d.ok(what, "MCP server answered initialize in %v", took)
	case len(m.Command) > 0 && errors.Is(err, context.DeadlineExceeded):
		d.fail(what, "the MCP server started but did not answer initialize within %v — run the command by hand: it must speak MCP on stdin/stdout (raise --mcp-timeout if npx is still installing)", d.mcpTimeout)
	case len(m.Command) > 0 && strings.Contains(err.Error(), "cannot start MCP server command"):
		d.fail(what, "%v — check [agents.mcp] command", err)
	case len(m.Command) > 0:
		d.fail(what, "the MCP server command exited or closed its output before answering initialize (%s) — run %q by hand to see its error", strings.TrimPrefix(firstLine(err.Error()), "MCP initialize failed: "), filepath.Base(m.Command[0]))
	case errors.Is(err, context.DeadlineExceeded):
		d.fail(what, "the MCP server at %s did not answer initialize within %v", redactURL(m.URL), d.mcpTimeout)
	default:
		d.fail(what, "the MCP server at %s refused initialize (%s) — check the url and headers_env/headers_file", redactURL(m.URL), firstLine(err.Error()))
	}
}

// commandProblem checks that a stdio command can be started, the way
// exec resolves it (a bare name on PATH, a path relative to the config
// directory, which is the command's working directory).
func commandProblem(cfg *config.Config, name string) string {
	if !strings.Contains(name, "/") {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Sprintf("MCP server command %q is not found in PATH — install it or give its full path in [agents.mcp] command (serve's PATH may differ, e.g. under systemd)", name)
		}
		return ""
	}
	p := cfg.Path(name)
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return fmt.Sprintf("MCP server command %s does not exist — fix [agents.mcp] command", p)
	case st.IsDir():
		return fmt.Sprintf("MCP server command %s is a directory — fix [agents.mcp] command", p)
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Sprintf("MCP server command %s is not executable — chmod +x it", p)
	}
	return ""
}

func (d *doctor) checkConnector(ctx context.Context, cfg *config.Config, a config.Agent, what string) {
	o, err := gateway.ConnectorOptions(cfg, a)
	if err != nil {
		d.fail(what, "%s — set it to the connector's system API key", strings.TrimPrefix(err.Error(), "agent "+a.JID+": "))
		return
	}
	d.red.Add(o.APIKey)
	u, err := url.Parse(a.Connector.BaseURL)
	if err != nil || u.Host == "" {
		d.fail(what, "[agents.connector] base_url is not an http(s) URL")
		return
	}
	if err := d.dialCheck(ctx, hostPort(u), "is the connector running? check [agents.connector] base_url"); err != nil {
		d.fail(what, "%v", err)
		return
	}
	o.Logger = d.log
	if d.bindings != nil {
		o.Bindings = d.bindings
	}
	o.RequestTimeout = d.timeout
	b, err := connectorbridge.New(o)
	if err != nil {
		d.fail(what, "%s", strings.TrimPrefix(err.Error(), "connectorbridge: "))
		return
	}
	defer b.Close()
	hctx, cancel := context.WithTimeout(ctx, 2*d.timeout+time.Second)
	defer cancel()
	if err := b.Health(hctx); err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		if strings.Contains(msg, "authenticated binding") && !strings.Contains(msg, "connector auth") {
			msg += " — authenticate its channel: agentgw connector auth --config " + d.cfgPath + " --flow FLOW_ID " + a.JID
		}
		d.fail(what, "connector at %s is not healthy: %s", redactURL(a.Connector.BaseURL), msg)
		return
	}
	d.ok(what, "connector at %s: Card valid, /health ok", redactURL(a.Connector.BaseURL))
}

// hostPort is the URL's host:port, with the scheme's default port.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// redactURL drops userinfo and query, which may hold credentials.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable url)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
