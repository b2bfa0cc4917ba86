package e2e

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
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
// cleanup.
func StartProtectedMCP(t testing.TB, issuer, listen string) *ProtectedMCP {
	t.Helper()
	protectedOnce.Do(func() {
		protectedPath, protectedErr = buildCached("./testkit/oauthharness/protectedmcp", "protectedmcp")
	})
	if protectedErr != nil {
		t.Fatal(protectedErr)
	}
	cmd := exec.Command(protectedPath, "--issuer", issuer, "--listen", listen)
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
