package gateway

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit/bridgetest"
	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// The table's order is the order the config names the sections in, as
// before the bridges owned them.
func TestBridgeTableNamesTheSections(t *testing.T) {
	_, err := LoadConfig(bridgetest.Write(t, `
[xmpp]
component_domain = "agents.example.test"
server = "127.0.0.1:5347"
secret_env = "S"
[[agents]]
jid = "none@agents.example.test"
`))
	want := "[[agents]] #1: set exactly one backend: manifest, [agents.mcp], [agents.connector], [agents.oan], [agents.acc] or [agents.a2a]"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// A bridge is one folder and one line: bridgetest.Echo, appended to a copy
// of the table, is decoded from [agents.echo], built, started, published
// and runs tasks through the gateway that `agentgw serve` runs. Without
// its line the same file is refused.
func TestBridgeOneLine(t *testing.T) {
	server := bridgetest.SilentServer(t) // an XMPP server that never answers
	dir := t.TempDir()
	t.Setenv("AGENTGW_TEST_BRIDGE_SECRET", "s3cret-component")
	path := bridgetest.Write(t, `
[xmpp]
component_domain = "agents.example.test"
server = "`+server+`"
secret_env = "AGENTGW_TEST_BRIDGE_SECRET"
local_domains = ["example.test"]
[store]
path = "`+filepath.Join(dir, "agentgw.db")+`"
[[agents]]
jid = "echo@agents.example.test"
[agents.echo]
greeting = "hello"
`)
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "unknown keys: agents.echo.greeting") {
		t.Fatalf("the root table took [agents.echo]: %v", err)
	}
	table := append(Bridges[:len(Bridges):len(Bridges)], bridgetest.Echo)
	if _, err := config.Load(bridgetest.Write(t, strings.Replace(mustRead(t, path), `greeting = "hello"`, "", 1)), table); err == nil ||
		!strings.Contains(err.Error(), "[[agents]] #1: [agents.echo] greeting is required") {
		t.Fatalf("the bridge's validation: %v", err)
	}
	cfg, err := config.Load(path, table)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, err := New(ctx, cfg, slog.New(slog.DiscardHandler), &Options{Bridges: table})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() { cancel(); <-done }()

	const ep, caller = "echo@agents.example.test", "alice@example.test"
	var hash string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m, ok := g.Registry.Active(ep); ok {
			hash = m.Hash
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the echo bridge's manifest was not published")
		}
	}
	inv := tasks.Invocation{Caller: caller, Route: caller + "/r", Endpoint: ep,
		RequestID: ids.New("req"), Tool: "echo", APIVersion: "1.0.0", ManifestHash: hash, Arguments: []byte(`{"text":"world"}`), MediaType: ns.MediaJSON}
	var acc tasks.Accepted
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// Run starts the engine once the backends are ready.
		if acc, err = g.Engine.Admit(ctx, inv); err == nil {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(err.Error(), "engine not running") {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := g.Engine.Result(ctx, caller, ep, acc.TaskID)
		if err == nil {
			if r.State != agentproto.StateCompleted || !strings.Contains(string(r.Payload), "hello, world") {
				t.Fatalf("result %s %s", r.State, r.Payload)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the echo task did not finish: %v", err)
		}
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The host hands each bridge the driver of the interface it asks for,
// never another store's that happens to fit.
func TestBridgeHostStoreHandsOutEachDriver(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) *config.Config
	}{
		{"sqlite", func(t *testing.T) *config.Config {
			return &config.Config{Dir: t.TempDir(), Store: config.Store{Path: "agentgw.db"}}
		}},
		{"postgres", func(t *testing.T) *config.Config { return pgConfig(t, pgharness.Start(t).NewDatabase(t)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := OpenStores(ctx, tc.cfg(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			h := &bridgeHost{g: &Gateway{Store: st}}
			var (
				b bindingdb.Driver
				c chatdb.Driver
				a accdb.Driver
				o oandb.Driver
			)
			if !h.Store(&b) || !h.Store(&c) || !h.Store(&a) || !h.Store(&o) {
				t.Fatal("a driver is missing")
			}
			if any(b) != any(st.Bindings) || any(c) != any(st.Chats) || any(a) != any(st.ACC) || any(o) != any(st.OAN) {
				t.Fatalf("wrong drivers handed out: %T %T %T %T", b, c, a, o)
			}
		})
	}
}
