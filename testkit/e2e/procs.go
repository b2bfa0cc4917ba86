package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// Prepare is Start without the in-process gateway: it brings up the server,
// registers users and writes the config, so that the gateway can run as an
// `agentgw serve` subprocess (Env.Serve). Scripted agents get their
// manifests but no backend there; use MCP or connector agents in o.TOML.
func Prepare(t testing.TB, o Options) *Env {
	t.Helper()
	e := &Env{T: t, Opts: o, Dir: t.TempDir(), Agents: map[string]*taskstest.Executor{}, Log: &SyncBuffer{}}
	switch {
	case o.Server != nil:
		e.Server = o.Server
	case o.Ejabberd:
		e.Server = xmppharness.StartEjabberd(t, xmppharness.EjabberdOptions{})
	default:
		e.Server = xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	}
	e.Domain = e.Server.ComponentDomain
	// A minute for each account, not for all of them: ejabberdctl boots an
	// Erlang node per call, which takes seconds on a loaded 2-core runner.
	for _, u := range o.Users {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := e.Server.Register(ctx, u, Password+u)
		cancel()
		if err != nil {
			t.Fatalf("register %s: %v", u, err)
		}
	}
	e.WriteConfig()
	return e
}

// EverythingTOML is an [[agents]] entry for the reference MCP server
// @modelcontextprotocol/server-everything (installed by npm at the module
// root) over stdio, as endpoint localpart@domain. A missing node or package
// skips the test, and fails it under CI=true.
func EverythingTOML(t testing.TB, localpart, domain string) string {
	t.Helper()
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	node, nerr := exec.LookPath("node")
	if _, serr := os.Stat(entry); nerr != nil || serr != nil {
		testkit.Unavailable(t, "node or server-everything missing (run npm ci at the module root): %v %v", nerr, serr)
	}
	return fmt.Sprintf("\n[[agents]]\njid = %q\n[agents.mcp]\ncommand = [%q, %q, \"stdio\"]\n", localpart+"@"+domain, node, entry)
}

// Proc is one `agentgw serve` subprocess.
type Proc struct {
	T       testing.TB
	Cmd     *exec.Cmd
	LogPath string // combined stdout and stderr

	exited chan struct{}
	State  *os.ProcessState
}

// Serve runs `agentgw serve --config <e.ConfigPath>` as a subprocess of the
// built binary, logging to <e.Dir>/<name>.log, and waits until its
// component stream to the server is up. It is stopped (SIGTERM) on cleanup.
func (e *Env) Serve(name string) *Proc {
	e.T.Helper()
	return e.ServeConfig(name, e.ConfigPath)
}

// ServeConfig is Serve with another config file (one per cluster member).
func (e *Env) ServeConfig(name, configPath string) *Proc {
	t := e.T
	t.Helper()
	bin := Binary(t)
	p := NewProc(t, filepath.Join(e.Dir, name+".log"))
	out, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", configPath)
	cmd.Dir = e.Dir
	cmd.Stdout, cmd.Stderr = out, out
	// A test process that dies must not leave a gateway holding the
	// component domain.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread() // Pdeathsig follows the starting thread
	err = cmd.Start()
	runtime.UnlockOSThread()
	out.Close()
	if err != nil {
		t.Fatalf("start agentgw serve: %v", err)
	}
	p.Cmd = cmd
	p.Reap()
	t.Cleanup(func() { p.Stop() })

	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.Log(), "component: connected") {
		select {
		case <-p.exited:
			t.Fatalf("agentgw serve exited (%v) before connecting:\n%s", p.State, Tail(p.Log(), 4000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("agentgw serve did not connect within 60 s:\n%s", Tail(p.Log(), 4000))
		}
	}
	return p
}

// Log returns everything the process logged so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// WaitLog waits until the process has logged s (fails the test after
// timeout, or when the process exits first).
func (p *Proc) WaitLog(s string, timeout time.Duration) {
	p.T.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.Log(), s) {
		select {
		case <-p.exited:
			p.T.Fatalf("agentgw exited (%v) before logging %q:\n%s", p.State, s, Tail(p.Log(), 4000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.T.Fatalf("agentgw did not log %q within %v:\n%s", s, timeout, Tail(p.Log(), 4000))
		}
	}
}

// PID is the gateway's process ID.
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Exited is closed once the process has been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Kill sends SIGKILL, as a crash would, and waits for the process to exit.
// The backends it spawned (MCP stdio servers, each in its own process
// group) would outlive it; they are killed too, as a supervisor's cgroup
// would, so that the restarted gateway starts from nothing.
func (p *Proc) Kill() {
	p.T.Helper()
	kids := Descendants(p.PID())
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.T.Errorf("agentgw %d did not exit after SIGKILL", p.PID())
	}
	KillAll(kids)
}

// Stop sends SIGTERM and waits up to 30 s for a clean exit (then SIGKILL).
// It is idempotent.
func (p *Proc) Stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	kids := Descendants(p.PID())
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.T.Errorf("agentgw %d did not stop within 30 s of SIGTERM; killing it\n%s", p.PID(), Tail(p.Log(), 3000))
		_ = p.Cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
	KillAll(kids) // normally gone already
}

// Descendants lists pid's descendant processes (children first).
func Descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", cur))
		for _, f := range tasks {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, s := range strings.Fields(string(data)) {
				if k, err := strconv.Atoi(s); err == nil {
					out = append(out, k)
					queue = append(queue, k)
					if st, ok := startTime(k); ok {
						listed.Store(k, st)
					}
				}
			}
		}
	}
	return out
}

// listed remembers the start time of each process Descendants listed,
// so that KillAll kills that process and never another that got its PID
// since: pid_max is 32768 here, and a full test run wraps it.
var listed sync.Map // pid → start time (clock ticks after boot)

// startTime is field 22 of /proc/pid/stat.
func startTime(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return st, err == nil
}

// KillAll kills the listed processes (each only if it is still the
// process Descendants listed), and the process group of each one that
// leads its own group.
func KillAll(pids []int) {
	for _, pid := range pids {
		was, ok := listed.Load(pid)
		if now, alive := startTime(pid); !ok || !alive || now != was.(uint64) {
			continue // gone, or its PID now belongs to another process
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TryDial logs user in on the environment's server and returns a protocol
// client, or the error; unlike Dial it does not fail the test. The
// connection closes on cleanup.
func (e *Env) TryDial(ctx context.Context, user string) (*agentclient.Client, *xmppclient.Client, error) {
	conn, err := xmppclient.Dial(ctx, xmppclient.Options{
		JID: user + "@" + e.Server.Domain, Password: Password + user, Server: e.Server.C2SAddr,
		TLS: &tls.Config{InsecureSkipVerify: true}, IQTimeout: 10 * time.Second, Presence: true,
	})
	if err != nil {
		return nil, nil, err
	}
	e.T.Cleanup(func() { conn.Close() })
	c := agentclient.New(conn, slog.New(slog.NewTextHandler(TestWriter{e.T}, &slog.HandlerOptions{Level: slog.LevelError})))
	c.IQTimeout = 10 * time.Second
	return c, conn, nil
}

// NewProc is a Proc for a command the test starts itself, logging to
// logPath; set Cmd, start it, then call Reap.
func NewProc(t testing.TB, logPath string) *Proc {
	return &Proc{T: t, LogPath: logPath, exited: make(chan struct{})}
}

// Reap waits for the started Cmd in the background, recording its State
// and closing Exited when it is gone.
func (p *Proc) Reap() {
	go func() { _ = p.Cmd.Wait(); p.State = p.Cmd.ProcessState; close(p.exited) }()
}
