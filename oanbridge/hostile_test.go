package oanbridge_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/oanbridge"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit"
)

// TestKeysAndPages: a key with a newline is never written or used, and a
// server answering full pages forever cannot hold the back-fill.
func TestKeysAndPages(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "oan.key")

	srv.Mode(map[string]any{"hostile": "newline-key"})
	code, _ := srv.PairingCode()
	if _, _, err := oanbridge.Redeem(context.Background(), srv.URL, code); err == nil || !strings.Contains(err.Error(), "malformed API key") {
		t.Fatalf("a key with a newline: %v", err)
	}
	srv.Mode(map[string]any{"hostile": ""})
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Fatal("a key file was written")
	}
	os.WriteFile(keyFile, []byte("gofers_abcdefghijkl\nX-Evil: 1\n"), 0o600)
	if _, err := oanbridge.ReadKey(keyFile); err == nil || strings.Contains(err.Error(), "abcdef") {
		t.Fatalf("ReadKey of a key with a newline: %v", err)
	}
	if err := oanbridge.WriteKey(keyFile, "gofers_abc\r\ndef0123456", true); err == nil {
		t.Fatal("WriteKey accepted a key with a newline")
	}
	os.Remove(keyFile)
	if _, _, err := oanbridge.Redeem(context.Background(), srv.URL, "0000000000000000"); err == nil || !strings.Contains(err.Error(), "refused the pairing code") {
		t.Fatalf("unknown code: %v", err)
	}

	pair(t, srv, keyFile, false)
	db, _ := storetest.OpenTwo(t)
	st := sqlite.NewOAN(db)
	f := newFixture(t, srv, st, keyFile, func(o *oanbridge.Options) { o.MaxPages = 3; o.PageLimit = 5 })
	testkit.WaitFor(t, 30*time.Second, "connected", f.b.Connected)
	srv.Mode(map[string]any{"endlessPages": true})
	srv.Drop()
	testkit.WaitFor(t, 30*time.Second, "the bounded back-fill", func() bool {
		return strings.Contains(f.logs.String(), "back-fill stopped after 3 full pages")
	})
	srv.Mode(map[string]any{"endlessPages": false})
	// The noise pages moved the cursor (they were real pages); the bridge
	// comes back and keeps working.
	testkit.WaitFor(t, 30*time.Second, "reconnected", f.b.Connected)
	c1, _ := st.Cursor(context.Background(), endpoint)
	time.Sleep(200 * time.Millisecond)
	c2, _ := st.Cursor(context.Background(), endpoint)
	if c2 < c1 {
		t.Fatalf("cursor went back %d → %d", c1, c2)
	}
	if s, _, _ := st.Status(context.Background(), endpoint); s != oandb.StatusOK {
		t.Fatalf("status %q", s)
	}
}
