package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/oauthharness"
)

var (
	protectedOnce sync.Once
	protectedPath string
	protectedErr  error
)

// ProtectedMCP is a running testkit/oauthharness/protectedmcp: an MCP
// server behind the go-sdk's auth.RequireBearerToken, accepting tokens
// of one issuer for its own URL only.
type ProtectedMCP struct {
	URL  string // the MCP endpoint, also the resource identifier
	Logs *SyncBuffer
}

// StartProtectedMCP builds and runs the protected MCP server on listen
// (host:port; pick the port first when the issuer must know the
// resource before the server starts), trusting issuer. It is stopped on
// cleanup. args are further flags (--tokens-to FILE).
func StartProtectedMCP(t testing.TB, issuer, listen string, args ...string) *ProtectedMCP {
	t.Helper()
	protectedOnce.Do(func() {
		protectedPath, protectedErr = buildCached("./testkit/oauthharness/protectedmcp", "protectedmcp")
	})
	if protectedErr != nil {
		t.Fatal(protectedErr)
	}
	cmd := exec.Command(protectedPath, append([]string{"--issuer", issuer, "--listen", listen}, args...)...)
	p := &ProtectedMCP{Logs: &SyncBuffer{}}
	cmd.Stderr = p.Logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.StopOnCleanup(t, cmd, "protectedmcp")
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- u
			}
		}
	}()
	select {
	case p.URL = <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("protectedmcp did not start within 60 s:\n%s", p.Logs.String())
	}
	return p
}

// OAuthTOML is an [[agents]] entry for an MCP url server with an
// [agents.mcp.oauth] table (the lines of oauth, already TOML).
func OAuthTOML(localpart, domain, url, oauth string) string {
	return fmt.Sprintf("\n[[agents]]\njid = %q\n[agents.mcp]\nurl = %q\n[agents.mcp.oauth]\n%s\n", localpart+"@"+domain, url, oauth)
}

// OAuthLogin runs `agentgw oauth login` and plays the browser for the URL it
// prints, as user; it returns what the command printed.
func OAuthLogin(t testing.TB, ctx context.Context, e *Env, is *oauthharness.Issuer, listen, agent, user string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, Binary(t), "oauth", "login", "--config", e.ConfigPath, "--listen", listen, agent)
	cmd.Dir = e.Dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			printed.WriteString(sc.Text() + "\n")
			if u := strings.TrimSpace(sc.Text()); strings.HasPrefix(u, is.URL+"/") {
				urls <- u
			}
		}
		close(urls)
	}()
	var u string
	select {
	case u = <-urls:
	case <-time.After(60 * time.Second):
		t.Fatalf("agentgw oauth login printed no authorization URL within 60 s; stderr:\n%s", stderr.String())
	}
	if u == "" {
		_ = cmd.Wait()
		t.Fatalf("agentgw oauth login ended without a URL:\n%s\nstderr:\n%s", printed.String(), stderr.String())
	}
	status, body, err := is.Browse(ctx, u, user)
	if err != nil {
		t.Fatalf("browser step: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agentgw oauth login: %v\nstdout:\n%s\nstderr:\n%s", err, printed.String(), stderr.String())
	}
	if status != http.StatusOK {
		t.Fatalf("the loopback redirect answered %d %q", status, body)
	}
	return printed.String() + stderr.String()
}
