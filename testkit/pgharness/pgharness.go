// Package pgharness starts private PostgreSQL servers for tests and
// benchmarks, from the distribution's binaries (Debian's postgresql
// package): initdb into a temp directory, one loopback TCP port, trust
// authentication for the user agentgw, and one fresh database per test.
//
// PostgreSQL refuses to run as root, so as root the server runs as the
// postgres system user on a directory that user owns. The postmaster is a
// direct child started with a parent-death signal, so a test binary that
// dies does not leave it running; its backends exit with it.
package pgharness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/testkit/porttest"
)

// ErrNotInstalled reports that the PostgreSQL server binaries are missing.
var ErrNotInstalled = errors.New("pgharness: PostgreSQL server binaries (initdb, postgres) not installed")

// User is the superuser of every harness server.
const User = "agentgw"

// BinDir finds the directory holding initdb and postgres: $PG_BINDIR, then
// the newest /usr/lib/postgresql/<major>/bin (Debian keeps them off PATH),
// then PATH.
func BinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if d := os.Getenv("PG_BINDIR"); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("%w: PG_BINDIR=%s has no initdb and postgres", ErrNotInstalled, d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major first: compare the version directories numerically.
	major := func(d string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return n
	}
	slices.SortFunc(dirs, func(a, b string) int { return major(b) - major(a) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", ErrNotInstalled
}

// Options adjust a server.
type Options struct {
	// Dir is the private directory (data, socket, log); a fresh temp
	// directory when empty, removed by Close.
	Dir string
	// Durable keeps fsync on, for benchmarks that compare with SQLite's
	// synchronous=FULL. Tests run with fsync off: commits survive a killed
	// server, not a power loss.
	Durable bool
	// Password, when set, makes the server require it (scram-sha-256)
	// instead of trusting loopback clients; URL then carries it.
	Password string
	// LogAll logs every connection and statement (secrets audits).
	LogAll bool
}

// Server is one running private PostgreSQL.
type Server struct {
	Dir  string // private directory
	Addr string // 127.0.0.1:port
	Port int

	ownDir  bool
	bin     string
	cred    *syscall.Credential
	logPath string
	opts    Options

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	seq    int
}

// URL returns the libpq URL of database db on this server.
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgresql", User: url.User(User), Host: s.Addr, Path: "/" + db}
	if s.opts.Password != "" {
		u.User = url.UserPassword(User, s.opts.Password)
	}
	q := url.Values{}
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String()
}

// Launch initializes and starts a server.
func Launch(ctx context.Context, o Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, opts: o, Dir: o.Dir}
	if s.Dir == "" {
		// Not t.TempDir: its parent is mode 0700 and owned by root, which
		// the postgres user cannot traverse.
		if s.Dir, err = os.MkdirTemp("", "agentgw-pg-"); err != nil {
			return nil, err
		}
		s.ownDir = true
	}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgharness: running as root needs the postgres system user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(s.Dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(s.Dir, 0o700); err != nil {
		return nil, err
	}
	data := filepath.Join(s.Dir, "data")
	s.logPath = filepath.Join(s.Dir, "postgres.log")
	args := []string{"-D", data, "-U", User, "-E", "UTF8", "--locale=C", "--no-sync"}
	if o.Password == "" {
		args = append(args, "-A", "trust")
	} else {
		pwfile := filepath.Join(s.Dir, "pwfile")
		if err := os.WriteFile(pwfile, []byte(o.Password+"\n"), 0o600); err != nil {
			return nil, err
		}
		if s.cred != nil {
			os.Chown(pwfile, int(s.cred.Uid), int(s.cred.Gid))
		}
		defer os.Remove(pwfile)
		args = append(args, "-A", "scram-sha-256", "--pwfile", pwfile)
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), args...)
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	initdb.Dir = s.Dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgharness: initdb: %w\n%s", err, tail(out))
	}
	if s.Port, err = freePort(); err != nil {
		return nil, err
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *Server) args() []string {
	a := []string{"-D", filepath.Join(s.Dir, "data"),
		"-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(s.Port),
		"-c", "unix_socket_directories=" + s.Dir,
		"-c", "max_connections=300",
		"-c", "shared_buffers=32MB",
		"-c", "log_min_messages=warning",
	}
	if s.opts.LogAll {
		a = append(a, "-c", "log_connections=on", "-c", "log_disconnections=on", "-c", "log_statement=all")
	}
	if !s.opts.Durable {
		// The WAL still reaches the kernel at every commit, so a killed
		// server (a crash test) loses nothing; only an OS crash would.
		a = append(a, "-c", "fsync=off", "-c", "full_page_writes=off")
	}
	return a
}

func (s *Server) start(ctx context.Context) error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), s.args()...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	// Pdeathsig fires when the starting thread exits: start on a locked
	// thread that is never reused mid-start.
	runtime.LockOSThread()
	err = cmd.Start()
	runtime.UnlockOSThread()
	logf.Close()
	if err != nil {
		return fmt.Errorf("pgharness: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if err := s.waitReady(ctx, exited); err != nil {
		s.Kill()
		return fmt.Errorf("pgharness: postgres did not come up: %w\n--- %s ---\n%s", err, s.logPath, s.LogTail())
	}
	return nil
}

func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			c.Close(ctx)
			return nil
		}
		select {
		case <-exited:
			return errors.New("postgres exited")
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", s.Addr, ctx.Err(), err)
		case <-time.After(30 * time.Millisecond):
		}
	}
}

// LogTail returns the end of the server log.
func (s *Server) LogTail() string {
	b, _ := os.ReadFile(s.logPath)
	return string(tail(b))
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// PID returns the postmaster's PID, or 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop shuts the server down cleanly (fast shutdown: SIGINT).
func (s *Server) Stop() error { return s.stop(syscall.SIGINT) }

// Kill stops the server with SIGKILL of its process group: a crash.
func (s *Server) Kill() error { return s.stop(syscall.SIGKILL) }

func (s *Server) stop(sig syscall.Signal) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	var children []int
	if sig == syscall.SIGKILL {
		// Each backend is its own process-group leader (the postmaster
		// setsid()s its children), so the group kill reaches only the
		// postmaster: a surviving backend could still commit, and its
		// shared memory would stop the restart. Kill them all, as a
		// machine crash would.
		children = childPIDs(cmd.Process.Pid)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, c := range children {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
	} else {
		_ = cmd.Process.Signal(sig)
	}
	select {
	case <-exited:
		waitGone(children, 30*time.Second)
		return nil
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return errors.New("pgharness: postgres did not stop within 30s; killed")
	}
}

// Start starts a stopped server again on the same port and data.
func (s *Server) Start(ctx context.Context) error {
	if s.PID() != 0 {
		return errors.New("pgharness: already running")
	}
	return s.start(ctx)
}

// Close stops the server and removes its directory when Launch made it.
func (s *Server) Close() error {
	err := s.Stop()
	if s.ownDir {
		os.RemoveAll(s.Dir)
	}
	return err
}

// CreateDatabase creates a fresh database and returns its URL.
func (s *Server) CreateDatabase(ctx context.Context) (name, dsn string, err error) {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name = fmt.Sprintf("t%d_%s", n, hex.EncodeToString(b))
	if err := s.admin(ctx, `CREATE DATABASE `+name); err != nil {
		return "", "", err
	}
	return name, s.URL(name), nil
}

// DropDatabase drops a database, closing its remaining sessions.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
}

func (s *Server) admin(ctx context.Context, q string) error {
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgharness: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, q); err != nil {
		return fmt.Errorf("pgharness: %s: %w", strings.Fields(q)[0], err)
	}
	return nil
}

// freePort picks the server's port outside the ephemeral range, so that
// no client socket takes it before postgres binds it.
func freePort() (int, error) {
	return porttest.Free("127.0.0.1")
}

// childPIDs lists the processes whose parent is pid, from /proc.
func childPIDs(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ")".
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b)[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// waitGone waits until none of pids is alive (or a zombie) any more.
func waitGone(pids []int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for _, p := range pids {
		for time.Now().Before(deadline) {
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
			if err != nil {
				break
			}
			i := strings.LastIndexByte(string(b), ')')
			if f := strings.Fields(string(b)[i+1:]); len(f) > 0 && f[0] == "Z" {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
