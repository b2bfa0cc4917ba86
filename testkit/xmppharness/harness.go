// Package xmppharness starts private Prosody and ejabberd servers for tests,
// the demo and benchmarks.
//
// Every server gets its own temp directory, config, self-signed certificate
// and free loopback ports, so several suites can run at once. The component
// part of each config is rendered from the operator snippets in
// deploy/prosody and deploy/ejabberd, so the guides show exactly what the
// tests run.
package xmppharness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentgw/agentgw/testkit/porttest"
)

// Server kinds.
const (
	KindProsody  = "prosody"
	KindEjabberd = "ejabberd"
)

// Snippet paths, relative to the module root.
const (
	ProsodySnippet  = "deploy/prosody/agentgw-component.cfg.lua"
	EjabberdSnippet = "deploy/ejabberd/agentgw-listener.yml"
)

// errShared refuses to stop or start a shared server through one tenant.
var errShared = errors.New("xmppharness: a shared server's tenant cannot stop or start it; use StartEjabberd")

// ErrNotInstalled reports that the server binary is missing.
var ErrNotInstalled = errors.New("xmppharness: server binary not installed")

// Server is one running private XMPP server.
type Server struct {
	Kind            string // KindProsody or KindEjabberd
	Dir             string // private directory holding config, data, certs and logs
	ConfigPath      string
	Domain          string // the VirtualHost, e.g. example.test
	ComponentDomain string // e.g. agents.example.test
	ComponentSecret string // never log it
	Interface       string // IP address every listener binds
	C2SAddr         string // host:port of the C2S listener (STARTTLS)
	ComponentAddr   string // host:port of the XEP-0114 listener
	S2SAddr         string // host:port of the S2S listener, "" without S2S
	CAFile          string // PEM certificate that clients should trust
	// UploadDomain is the XEP-0363 service (Prosody's mod_http_file_share,
	// ejabberd's mod_http_upload), "" unless HTTPUpload was asked; HTTPAddr is the plain-HTTP listener (of
	// the upload service or of WebSocket), "" without either.
	UploadDomain string
	HTTPAddr     string
	// WebSocketURL is the RFC 7395 endpoint (mod_websocket), "" unless
	// ProsodyOptions.WebSocket.
	WebSocketURL string

	start    func() (*exec.Cmd, error) // starts the process with the same config
	pidOf    func() int                // the PID to signal, once started
	register func(ctx context.Context, user, password string) error
	logPath  string
	release  func() // frees reservations (s2s address locks) after the last stop
	// host is the server a tenant view (SharedEjabberd) lives on: the
	// view cannot stop, kill or restart it, since other tests share it.
	host  *Server
	ports []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// PID returns the PID of the server process (beam.smp for ejabberd), or 0
// when it is not running.
func (s *Server) PID() int {
	if s.host != nil {
		return s.host.PID()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.pidOf()
}

// LogPath returns the server's main log file.
func (s *Server) LogPath() string { return s.logPath }

// Register creates a user on the server's domain.
func (s *Server) Register(ctx context.Context, user, password string) error {
	if !safeName.MatchString(user) {
		return fmt.Errorf("xmppharness: invalid user name %q", user)
	}
	return s.register(ctx, user, password)
}

// Stop sends SIGTERM and waits for the process to exit (SIGKILL after 10 s).
func (s *Server) Stop() error {
	return s.stop(syscall.SIGTERM, 10*time.Second)
}

// Kill sends SIGKILL and waits for the process to exit.
func (s *Server) Kill() error {
	return s.stop(syscall.SIGKILL, 10*time.Second)
}

// Close stops the server and frees what it reserved. The directory stays
// (tests remove their temp dirs themselves).
func (s *Server) Close() error {
	if s.host != nil {
		return nil // the shared server stops when the test binary ends
	}
	err := s.Stop()
	if s.release != nil {
		s.release()
		s.release = nil
	}
	return err
}

func (s *Server) stop(sig syscall.Signal, grace time.Duration) error {
	if s.host != nil {
		return errShared
	}
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	pid := 0
	if cmd != nil {
		pid = s.pidOf()
	}
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	// Signal only the server process: ejabberdctl's wrapper exits by itself
	// once beam.smp is gone, and killing it first would orphan beam.smp with
	// its ports still bound.
	if pid <= 0 {
		pid = cmd.Process.Pid
	}
	_ = syscall.Kill(pid, sig)
	var err error
	deadline := time.After(grace)
	select {
	case <-exited:
	case <-deadline:
		err = fmt.Errorf("xmppharness: %s did not exit within %v of %v; killed", s.Kind, grace, sig)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	for alive(pid) {
		select {
		case <-deadline:
			_ = syscall.Kill(pid, syscall.SIGKILL)
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Kill whatever the wrapper left in its process group. The wrapper is
	// still an unreaped zombie here (waitNoReap), so its PID, the group's
	// id, cannot have been handed to another test's process yet; only then
	// is it reaped.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
	return err
}

// waitNoReap blocks until the child pid has exited, leaving it a zombie:
// the PID stays taken until cmd.Wait reaps it, which stop does only after
// its last signal to the process group.
func waitNoReap(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) {
		return data[i+2] != 'Z'
	}
	return true
}

// Restart stops the server and starts it again with the same ports, config
// and data.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.launch(ctx)
}

// Start starts a stopped server again (after Stop or Kill).
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return errors.New("xmppharness: server already running")
	}
	return s.launch(ctx)
}

func (s *Server) launch(ctx context.Context) error {
	if s.host != nil {
		return errShared
	}
	cmd, err := s.start()
	if err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		waitNoReap(cmd.Process.Pid)
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if err := waitPorts(ctx, s.ports, exited); err != nil {
		_ = s.Kill()
		return fmt.Errorf("xmppharness: %s did not come up: %w\n--- tail of %s ---\n%s",
			s.Kind, err, s.logPath, s.logTail())
	}
	return nil
}

// logTail returns the end of the log, with the component secret masked.
func (s *Server) logTail() string {
	var b []byte
	for _, p := range []string{s.logPath, filepath.Join(s.Dir, "stdout.log")} {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		b = append(b, data...)
	}
	out := string(b)
	if s.ComponentSecret != "" {
		out = strings.ReplaceAll(out, s.ComponentSecret, "[secret]")
	}
	return out
}

// waitPorts polls until every address accepts TCP connections.
func waitPorts(ctx context.Context, addrs []string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, addr := range addrs {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				return errors.New("process exited")
			case <-ctx.Done():
				return fmt.Errorf("%s not accepting connections: %w", addr, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// safeName restricts values spliced into configs: domains, users, secrets.
var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$`)

func checkSafe(what, v string) error {
	if !safeName.MatchString(v) {
		return fmt.Errorf("xmppharness: %s must match %s", what, safeName)
	}
	return nil
}

func randomSecret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freePort returns a port on ip that was free a moment ago, outside the
// ephemeral range so that no client socket takes it before the server
// binds it.
func freePort(ip string) (int, error) {
	return porttest.Free(ip)
}

// SnippetData fills the placeholders of the operator snippets.
type SnippetData struct {
	ComponentDomain    string
	ComponentSecret    string
	ComponentPort      int
	ComponentInterface string
}

// RenderSnippet reads an operator snippet (ProsodySnippet or
// EjabberdSnippet) from the module root and fills in its placeholders.
func RenderSnippet(rel string, d SnippetData) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	src, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return "", fmt.Errorf("xmppharness: read snippet: %w", err)
	}
	tmpl, err := template.New(rel).Option("missingkey=error").Parse(string(src))
	if err != nil {
		return "", fmt.Errorf("xmppharness: parse snippet %s: %w", rel, err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, d); err != nil {
		return "", fmt.Errorf("xmppharness: render snippet %s: %w", rel, err)
	}
	return b.String(), nil
}

// ModuleRoot finds the agentgw module root: $AGENTGW_ROOT, else the first
// directory holding go.mod above the working directory, else above this
// source file.
func ModuleRoot() (string, error) {
	if r := os.Getenv("AGENTGW_ROOT"); r != "" {
		return r, nil
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
				bytes.Contains(data, []byte("module github.com/agentgw/agentgw")) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("xmppharness: cannot find the agentgw module root (set AGENTGW_ROOT)")
}

// makeCert writes a self-signed certificate for names into dir as
// <names[0]>.crt and <names[0]>.key.
func makeCert(ctx context.Context, dir string, names ...string) (crt, key string, err error) {
	if _, err := exec.LookPath("openssl"); err != nil {
		return "", "", fmt.Errorf("%w: openssl", ErrNotInstalled)
	}
	crt = filepath.Join(dir, names[0]+".crt")
	key = filepath.Join(dir, names[0]+".key")
	san := make([]string, len(names))
	for i, n := range names {
		san[i] = "DNS:" + n
	}
	cmd := exec.CommandContext(ctx, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
		"-days", "2", "-subj", "/CN="+names[0], "-addext", "subjectAltName="+strings.Join(san, ","),
		"-keyout", key, "-out", crt)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("xmppharness: openssl: %v: %s", err, out)
	}
	return crt, key, nil
}

func mkdirs(dirs ...string) error {
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// newCmd prepares a server process in its own process group, with output
// into dir/stdout.log.
func newCmd(dir, name string, args ...string) (*exec.Cmd, error) {
	out, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// startCmd starts cmd on a locked OS thread: Pdeathsig fires when the
// starting thread exits, and a locked thread is never reused mid-start.
func startCmd(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := cmd.Start()
	if f, ok := cmd.Stdout.(*os.File); ok {
		f.Close() // the child holds its own copy
	}
	return err
}

// serverDefaults fills the options Prosody and ejabberd share (domain,
// component domain, secret, interface) and checks each is safe to write
// into a server config.
func serverDefaults(domain, componentDomain, secret, iface *string) error {
	if *domain == "" {
		*domain = "example.test"
	}
	if *componentDomain == "" {
		*componentDomain = "agents." + *domain
	}
	if *secret == "" {
		*secret = randomSecret()
	}
	if *iface == "" {
		*iface = "127.0.0.1"
	}
	for what, v := range map[string]string{"Domain": *domain, "ComponentDomain": *componentDomain,
		"ComponentSecret": *secret, "Interface": *iface} {
		if err := checkSafe(what, v); err != nil {
			return err
		}
	}
	return nil
}
