package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/accbridge"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

const accBenchAgents = 32

func accBenchAgentsJSON() string {
	var as []map[string]any
	for i := 0; i < accBenchAgents; i++ {
		as = append(as, map[string]any{"agent_id": fmt.Sprintf("agent-%d", i), "runtime": "hermes", "model": "m",
			"tools": []string{"terminal"}, "supports": []string{"cancellation"}})
	}
	b, _ := json.Marshal(as)
	return string(b)
}

// BenchmarkACCRun compares one run ("echo hello", run_accepted, one
// progress event, completion) through the gateway — an XMPP caller, Prosody,
// the task engine, accbridge, the reference connector as its own process —
// with the same run sent by a bare control center straight to the same
// reference connector (direct). Both at 1 and 32 callers; 32 callers use
// 32 agents (one active run per agent is the protocol's rule). The ratio
// gateway/direct at callers=1 is the gateway's overhead per run.
func BenchmarkACCRun(b *testing.B) {
	srv := xmppharness.StartProsody(b, xmppharness.ProsodyOptions{})
	users := benchUserNames("acc", 8)
	var toml strings.Builder
	toml.WriteString(strings.SplitN(e2e.AccTOML(e2e.FreePort(b), srv.ComponentDomain), "[[agents]]", 2)[0])
	for i := 0; i < accBenchAgents; i++ {
		fmt.Fprintf(&toml, "\n[[agents]]\njid = \"hermes%d@%s\"\n[agents.acc]\nconnector = \"farm\"\nagent_id = \"agent-%d\"\n", i, srv.ComponentDomain, i)
	}
	e := e2e.Prepare(b, e2e.Options{Server: srv, Users: users, Mutate: benchUnlimited, TOML: toml.String()})
	e.Agentgw(0, "acc", "init", "--config", e.ConfigPath)
	dir := filepath.Join(e.Dir, "farm-conn")
	e.Agentgw(0, "acc", "enroll", "--config", e.ConfigPath, "--name", "farm", "--out", dir)

	b.Run("direct", func(b *testing.B) {
		d := startDirectCC(b, e.Dir)
		conn := e2e.StartRefConnector(b, dir, "--url", d.url, "--agents", accBenchAgentsJSON(), "--once")
		defer conn.Kill()
		d.waitReady(b)
		for _, callers := range []int{1, 32} {
			b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
				lat, el, err := driveCalls(callers, benchPhase(), func(ctx context.Context, w int) error {
					return d.run(ctx, fmt.Sprintf("agent-%d", w%accBenchAgents))
				})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(lat))/el.Seconds(), "runs/s")
				b.ReportMetric(lat.mean(), "mean-ms")
				b.ReportMetric(lat.q(0.99), "p99-ms")
			})
		}
	})
	b.Run("gateway", func(b *testing.B) {
		e.StartGateway()
		defer e.StopGateway()
		conn := e2e.StartRefConnector(b, dir, "--agents", accBenchAgentsJSON(), "--heartbeat", "500ms")
		defer conn.Kill()
		clients := dialAll(b, e, users)
		eps := make([]jid.JID, accBenchAgents)
		pins := make([]*agentclient.Pinned, accBenchAgents)
		for i := range eps {
			eps[i] = e2e.MustJID(fmt.Sprintf("hermes%d@%s", i, srv.ComponentDomain))
			pins[i] = pinWhenReady(b, clients[0], eps[i], "run")
		}
		for _, callers := range []int{1, 32} {
			b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
				lat, el, err := driveCalls(callers, benchPhase(), func(ctx context.Context, w int) error {
					i := w % accBenchAgents
					return invokeAndFollow(ctx, clients[w%len(clients)], eps[i], pins[i], "run", `{"goal":"echo hello"}`)
				})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(lat))/el.Seconds(), "runs/s")
				b.ReportMetric(lat.mean(), "mean-ms")
				b.ReportMetric(lat.q(0.99), "p99-ms")
			})
		}
	})
}

// directCC is a bare control center: it accepts the reference connector
// with the same mTLS material and sends create_run itself.
type directCC struct {
	url   string
	mu    sync.Mutex
	ws    *websocket.Conn
	wmu   sync.Mutex
	ready chan struct{}
	waits map[string]chan struct{}
	n     int
}

func startDirectCC(b *testing.B, gwDir string) *directCC {
	b.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(gwDir, "acc/server.crt"), filepath.Join(gwDir, "acc/server.key"))
	if err != nil {
		b.Fatal(err)
	}
	caPEM, _ := os.ReadFile(filepath.Join(gwDir, "acc/ca.crt"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	d := &directCC{url: "wss://" + ln.Addr().String() + accbridge.Path, ready: make(chan struct{}), waits: map[string]chan struct{}{}}
	hs := &http.Server{TLSConfig: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			ws.SetReadLimit(1 << 20)
			d.serve(r.Context(), ws)
		})}
	go hs.Serve(tls.NewListener(ln, hs.TLSConfig))
	b.Cleanup(func() { hs.Close() })
	return d
}

func (d *directCC) send(v any) error {
	raw, _ := json.Marshal(v)
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.ws.Write(context.Background(), websocket.MessageText, raw)
}

func (d *directCC) serve(ctx context.Context, ws *websocket.Conn) {
	d.ws = ws
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		var m map[string]any
		json.Unmarshal(data, &m)
		switch m["type"] {
		case "register":
			d.send(map[string]any{"type": "register_ack", "connector_id": m["connector_id"], "server_time": time.Now().UTC().Format(time.RFC3339)})
		case "capabilities":
			close(d.ready)
		case "run_event":
			if m["event"] == "completion" {
				id, _ := m["run_id"].(string)
				d.mu.Lock()
				ch := d.waits[id]
				delete(d.waits, id)
				d.mu.Unlock()
				if ch != nil {
					close(ch)
				}
			}
		}
	}
}

func (d *directCC) waitReady(b *testing.B) {
	select {
	case <-d.ready:
	case <-time.After(30 * time.Second):
		b.Fatal("the reference connector did not connect to the direct control center")
	}
}

func (d *directCC) run(ctx context.Context, agent string) error {
	d.mu.Lock()
	d.n++
	id := fmt.Sprintf("direct-run-%d", d.n)
	ch := make(chan struct{})
	d.waits[id] = ch
	d.mu.Unlock()
	if err := d.send(map[string]any{"type": "create_run", "run_id": id, "agent_id": agent, "goal": "echo hello"}); err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("run %s did not complete", id)
	}
}
