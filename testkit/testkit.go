// Package testkit holds what every test of the module shares: the one wait
// on a condition and the one rule for a missing dependency (skip on a
// developer machine, fail under CI=true). Its subpackages start the real
// servers (xmppharness, pgharness), pick ports (porttest), replay golden
// exchanges (goldentest), check fuzz targets (fuzzcheck) and run the
// in-process gateway for the end-to-end suites (e2e). Nothing here is
// linked into the binary.
package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// InCI reports whether CI=true, where a missing server, binary or package
// must fail the run instead of skipping it.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable reports that something a test needs is missing: it skips the
// test on a developer machine and fails it under CI=true.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatal(msg)
	}
	t.Skip("skipping: " + msg)
}

// MinWait is the least any wait on a condition lasts: timeouts written for
// a quiet machine are missed on a loaded 2-core CI runner, where the suites
// share the CPU with real servers and the other test binaries. A longer
// wait only delays a failure; it never hides one.
const MinWait = 30 * time.Second

// WaitFor polls cond until it holds or the timeout (at least MinWait)
// passes, then fails the test naming what it waited for.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout = max(timeout, MinWait)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StopOnCleanup ends a started child process when the test ends: SIGTERM,
// then SIGKILL and a test error if it has not exited within 20 s (a
// program that ignores SIGTERM is a finding, not noise).
func StopOnCleanup(tb testing.TB, cmd *exec.Cmd, what string) {
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			tb.Errorf("%s did not exit on SIGTERM", what)
		}
	})
}
