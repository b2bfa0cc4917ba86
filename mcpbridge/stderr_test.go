package mcpbridge

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/backendkit"
)

// A server that floods stderr gets at most stderrBurst lines logged at once,
// then stderrPerSecond a second, with a count of what was suppressed; every
// logged line is redacted.
func TestStderrRateLimited(t *testing.T) {
	t.Parallel()
	log, buf := testLogger(t)
	const secret = "s3cr3t-value-0123"
	b := &Backend{log: log, red: backendkit.NewRedactor(nil)}
	b.red.Set(secret)
	r, w := io.Pipe()
	done := make(chan struct{})
	go func() { b.logStderr(r, 42); close(done) }()
	const lines = 10000
	for i := range lines {
		fmt.Fprintf(w, "line %d key=%s\n", i, secret)
	}
	w.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("logStderr did not return at EOF")
	}
	out := buf.String()
	if strings.Contains(out, secret) {
		t.Fatal("secret in the log")
	}
	logged := strings.Count(out, `msg="MCP server stderr"`)
	// Writing 10,000 lines takes well under a second here, so the bucket
	// refills by at most a few seconds' worth.
	if logged < stderrBurst || logged > stderrBurst+5*stderrPerSecond {
		t.Errorf("%d lines logged of %d, want about %d", logged, lines, stderrBurst)
	}
	suppressed := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "MCP server stderr lines suppressed") {
			var n int
			if _, err := fmt.Sscanf(l[strings.Index(l, "suppressed=")+len("suppressed="):], "%d", &n); err != nil {
				t.Fatalf("no count in %q", l)
			}
			suppressed += n
		}
	}
	if logged+suppressed != lines {
		t.Errorf("logged %d + suppressed %d != %d lines written", logged, suppressed, lines)
	}
	if !strings.Contains(out, "line 0 key=[redacted]") {
		t.Errorf("first line not logged redacted:\n%.500s", out)
	}
}

func TestLineLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	l := newLineLimiter(3, 2, func() time.Time { return now })
	for i := range 3 {
		if ok, n := l.allow(); !ok || n != 0 {
			t.Fatalf("line %d: %v %d", i, ok, n)
		}
	}
	for range 4 {
		if ok, _ := l.allow(); ok {
			t.Fatal("over the burst allowed")
		}
	}
	now = now.Add(500 * time.Millisecond) // one token back
	if ok, n := l.allow(); !ok || n != 4 {
		t.Fatalf("after refill: %v, suppressed %d, want 4", ok, n)
	}
	if ok, _ := l.allow(); ok {
		t.Fatal("second line after a one-token refill allowed")
	}
	if n := l.flush(); n != 1 {
		t.Fatalf("flush %d, want 1", n)
	}
	if n := l.flush(); n != 0 {
		t.Fatalf("second flush %d", n)
	}
	now = now.Add(time.Hour)
	for i := range 3 {
		if ok, _ := l.allow(); !ok {
			t.Fatalf("line %d after an hour refused: the bucket is capped at the burst, not empty", i)
		}
	}
	if ok, _ := l.allow(); ok {
		t.Fatal("bucket grew past the burst")
	}
}
