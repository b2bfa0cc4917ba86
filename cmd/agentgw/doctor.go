package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
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
	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/logging"
	"github.com/agentgw/agentgw/xep/xmltree"
)

func init() {
	register(command{name: "doctor", summary: "check a config, the XMPP server link, the backends and the store without serving", run: runDoctor})
}

const doctorSynopsis = `doctor --config C [--timeout 10s] [--mcp-timeout 60s] [--verbose] [--json]

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
	asJSON := fs.Bool("json", false, "print the checks as a JSON array of {status, check, message}")
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
	d := &doctor{out: stdout, red: backendkit.NewRedactor(nil), cfgPath: *cfgPath, timeout: *timeout, mcpTimeout: *mcpTimeout, asJSON: *asJSON}

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
	// asJSON collects the checks for one JSON array instead of lines.
	asJSON bool
	lines  []doctorLine
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
	if d.asJSON {
		d.lines = append(d.lines, doctorLine{Status: strings.ToLower(strings.TrimSpace(status)), Check: what, Message: strings.TrimRight(msg, "\n")})
		return
	}
	msg = strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "\n     ")
	fmt.Fprintf(d.out, "%s %s: %s\n", status, what, msg)
}

// doctorLine is one check in doctor --json.
type doctorLine struct {
	Status  string `json:"status"` // ok, fail or skip
	Check   string `json:"check"`
	Message string `json:"message"`
}

func (d *doctor) result() error {
	if d.asJSON {
		if d.lines == nil {
			d.lines = []doctorLine{}
		}
		if err := printJSON(d.out, d.lines); err != nil {
			return err
		}
	}
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
	ccfg := component.Config{
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
	}
	defer d.clusterSession(ctx, cfg, &ccfg)()
	comp := component.New(ccfg, component.NewRouter(dom, nil, log))
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

// checkAgent checks one [[agents]] entry's backend: a manifest here, a
// bridge section by its bridge's line of the table.
func (d *doctor) checkAgent(ctx context.Context, cfg *config.Config, a config.Agent) {
	what := "agent " + a.JID
	if a.Manifest != "" {
		d.checkManifest(cfg, a, what)
		return
	}
	if b, ok := bridges.Lookup(a.Backend); ok && a.Section != nil && b.Doctor != nil {
		b.Doctor(ctx, &bridgeDoctor{d: d, what: what}, backendkit.NewAgent(cfg, a))
	}
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

// Helpers shared with the bridges' doctor checks.
var (
	hostPort  = backendkit.HostPort
	redactURL = backendkit.RedactURL
	firstLine = backendkit.FirstLine
	lastPart  = backendkit.LastPart
)
