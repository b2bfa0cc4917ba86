package bridgetest

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
)

// Write writes body as agentgw.toml in a fresh directory and returns its
// path.
func Write(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agentgw.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Load writes body and loads it with a table of the given bridges: a
// bridge's config tests, without the others' sections.
func Load(t testing.TB, body string, bridges ...backendkit.Bridge) (*config.Config, error) {
	t.Helper()
	return config.Load(Write(t, body), backendkit.Bridges(bridges))
}

// SilentServer is a TCP address that accepts connections and never
// speaks: an XMPP server a gateway or doctor can be pointed at where the
// XMPP side is not the point.
func SilentServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // open and silent until the test ends
		}
	}()
	return ln.Addr().String()
}
