package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/internal/procsec"
	"github.com/agentgw/agentgw/internal/telemetry"
)

// inheritedEnv is what a stdio server inherits from the gateway's
// environment. Everything else (the component secret, connector keys, other
// agents' header variables) stays out of the child; the operator adds what
// the server needs with [agents.mcp] env.
var inheritedEnv = []string{
	"HOME", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "LANG", "LC_ALL",
	"LC_CTYPE", "TZ", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME",
	"XDG_CACHE_HOME", "XDG_DATA_HOME", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"NODE_EXTRA_CA_CERTS", "NODE_PATH", "NPM_CONFIG_CACHE", "NPM_CONFIG_PREFIX",
	"npm_config_cache", "npm_config_prefix", "GOPATH", "GOCACHE", "GOMODCACHE",
	"VIRTUAL_ENV", "PYTHONPATH",
}

// Grace periods when stopping a stdio server: after closing its stdin, and
// after SIGTERM, before the whole process group is killed.
const (
	stdinGrace = 2 * time.Second
	termGrace  = 2 * time.Second
)

// maxStderrLine bounds one logged line of server stderr.
const maxStderrLine = 2048

// A server's stderr is logged at most stderrBurst lines at once and
// stderrPerSecond lines a second after that: a server stuck in a loop must
// not flood the gateway log (or its disk). Lines beyond are counted, and the
// count is logged before the next line that passes, and at EOF.
const (
	stderrBurst     = 100
	stderrPerSecond = 10
)

// process is a running stdio MCP server.
type process struct {
	pid    int
	exited chan struct{} // closed once the direct child has been reaped
	stdin  io.WriteCloser
	once   sync.Once
}

// stop closes stdin, waits, then signals the process group: the MCP stdio
// shutdown sequence, extended to the group so a wrapper (npx, sh) cannot
// leave the real server behind.
func (p *process) stop() {
	p.once.Do(func() {
		_ = p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(stdinGrace):
			_ = syscall.Kill(-p.pid, syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(termGrace):
			}
		}
		// The leader may be gone while children linger in the group.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	})
}

// stdioTransport spawns the configured command. It implements mcp.Transport.
type stdioTransport struct {
	b    *Backend
	tap  *tap
	proc *process    // set by Connect
	conn *ndjsonConn // set by Connect
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	o := t.b.o
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Env = childEnv(o.Env)
	cmd.Dir = t.b.o.ConfigDir
	// Its own process group, so stop can signal wrappers (npx, sh) and
	// what they started; killed by the kernel if the gateway dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	// Our own pipes rather than StdoutPipe: exec closes those as soon as
	// the child is reaped, which could drop its last response.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := procsec.Start(cmd); err != nil {
		for _, f := range []*os.File{outR, outW, inR, inW, errR, errW} {
			f.Close()
		}
		// Name the program and the cause (an errno, "not found"), not the
		// arguments, which may hold values.
		cause := errors.Unwrap(err)
		if cause == nil {
			cause = err
		}
		return nil, fmt.Errorf("cannot start MCP server command %q: %w", filepath.Base(o.Command[0]), cause)
	}
	outW.Close()
	inR.Close()
	errW.Close()

	p := &process{pid: cmd.Process.Pid, exited: make(chan struct{}), stdin: inW}
	t.proc = p
	go t.b.logStderr(errR, p.pid)
	go func() {
		_ = cmd.Wait()
		close(p.exited)
		// Children that inherited stdout would keep the session alive.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}()

	t.conn = newNDJSONConn(outR, &procStdin{p: p}, mcp.DefaultMaxLineLength, t.tap.incoming, t.tap.outgoing)
	return t.conn, nil
}

// procStdin closes the server by the stop sequence when the SDK closes the
// connection.
type procStdin struct{ p *process }

func (s *procStdin) Write(b []byte) (int, error) { return s.p.stdin.Write(b) }
func (s *procStdin) Close() error                { go s.p.stop(); return nil }

func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if _, set := extra[k]; set {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// logStderr copies the server's stderr to the gateway log, a bounded and
// redacted line at a time, rate-limited.
func (b *Backend) logStderr(r io.ReadCloser, pid int) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 4096)
	lim := newLineLimiter(stderrBurst, stderrPerSecond, time.Now)
	suppressed := func(n int) {
		if n > 0 {
			b.log.Warn("MCP server stderr lines suppressed", slog.Int("pid", pid), slog.Int("suppressed", n))
		}
	}
	for {
		line, err := readBoundedLine(br, maxStderrLine)
		if len(line) > 0 {
			if ok, n := lim.allow(); ok {
				suppressed(n)
				b.log.Info("MCP server stderr", slog.Int("pid", pid), slog.String("line", safeText(b.red, line, maxStderrLine)))
			}
		}
		if err != nil {
			suppressed(lim.flush())
			return
		}
	}
}

// lineLimiter is a token bucket over log lines that counts what it refuses.
type lineLimiter struct {
	burst, perSecond float64
	now              func() time.Time
	tokens           float64
	last             time.Time
	suppressed       int
}

func newLineLimiter(burst, perSecond int, now func() time.Time) *lineLimiter {
	return &lineLimiter{burst: float64(burst), perSecond: float64(perSecond), now: now, tokens: float64(burst), last: now()}
}

// allow takes a token. When it has one it also returns the number of lines
// refused since the last report, which the caller logs first.
func (l *lineLimiter) allow() (bool, int) {
	t := l.now()
	l.tokens = min(l.burst, l.tokens+t.Sub(l.last).Seconds()*l.perSecond)
	l.last = t
	if l.tokens < 1 {
		l.suppressed++
		return false, 0
	}
	l.tokens--
	return true, l.flush()
}

// flush returns and resets the count of refused lines.
func (l *lineLimiter) flush() int {
	n := l.suppressed
	l.suppressed = 0
	return n
}

// readBoundedLine reads one line, keeping at most max bytes of it.
func readBoundedLine(br *bufio.Reader, max int) (string, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf) < max {
			n := min(len(frag), max-len(buf))
			buf = append(buf, frag[:n]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return strings.TrimRight(string(buf), "\r\n"), err
	}
}

// httpTap adds the configured headers to every request and lets the tap see
// request and response bodies.
type httpTap struct {
	base    http.RoundTripper
	headers http.Header
	tap     *tap
	// keep, when it returns true, keeps the server's session: the
	// session's DELETE is not sent, because a task the gateway will
	// resume after its restart lives in it (taskcall.go).
	keep func() bool
}

func (h *httpTap) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodDelete && h.keep != nil && h.keep() {
		return &http.Response{StatusCode: http.StatusNoContent, Status: "204 No Content", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header[k] = v
	}
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(io.LimitReader(req.Body, maxTapFrame+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(body) <= maxTapFrame {
			h.tap.outgoing(bytes.TrimSpace(body))
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := h.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "text/event-stream":
		resp.Body = newBodyTap(resp.Body, true, h.tap.incoming)
	case "application/json":
		resp.Body = newBodyTap(resp.Body, false, h.tap.incoming)
	}
	return resp, nil
}

// httpTransport builds the streamable HTTP transport with headers read now,
// so rotated header files take effect on the next reconnect.
func (b *Backend) httpTransport(tp *tap) (mcp.Transport, error) {
	h := http.Header{}
	if b.o.Headers != nil {
		var err error
		if h, err = b.o.Headers(); err != nil {
			return nil, err
		}
	}
	var secrets []string
	for _, vs := range h {
		secrets = append(secrets, vs...)
	}
	b.setSecrets(secrets)
	base := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{
		// The W3C trace context of each call goes along (docs/telemetry.md).
		Transport: &httpTap{base: b.withOAuth(telemetry.Transport(base)), headers: h, tap: tp, keep: b.keepSession},
		// Headers carry credentials; a redirect must not take them
		// elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &mcp.StreamableClientTransport{Endpoint: b.o.URL, HTTPClient: client, MaxRetries: 2}, nil
}
