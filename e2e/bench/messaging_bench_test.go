package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/component/componenttest"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Chat benchmarks: the same chat exchange (a person's message, the
// endpoint's XEP-0461 reply) through the gateway's messaging service and a
// minimal conversing backend, and through a trivial component that echoes
// every message, on the same Prosody setup in the same run. Each gateway
// benchmark reports its rate as a percentage of its baseline's.

// Load shape of the throughput benchmarks.
const (
	chatConns    = 4
	chatInFlight = 8
)

var chatRTTBaseline, chatRateBaseline float64

// BenchmarkChatRoundTripBaseline: one message outstanding, a trivial
// component echoing. ns/op is the round trip.
func BenchmarkChatRoundTripBaseline(b *testing.B) {
	srv, users := chatTrivialTarget(b, 1)
	chatRTTBaseline = driveChat(b, srv, users, jid.MustParse("echo@"+srv.ComponentDomain), 1)
}

// BenchmarkChatRoundTrip: one message outstanding through the gateway.
func BenchmarkChatRoundTrip(b *testing.B) {
	e, users := chatGateway(b, 1)
	rate := driveChat(b, e.Server, users, e.Endpoint("echo"), 1)
	if chatRTTBaseline > 0 {
		b.ReportMetric(100*rate/chatRTTBaseline, "%-of-baseline")
	}
}

// BenchmarkChatThroughputBaseline: chatConns people, chatInFlight
// messages outstanding each, a trivial component echoing.
func BenchmarkChatThroughputBaseline(b *testing.B) {
	srv, users := chatTrivialTarget(b, chatConns)
	chatRateBaseline = driveChat(b, srv, users, jid.MustParse("echo@"+srv.ComponentDomain), chatInFlight)
}

// BenchmarkChatThroughput: the same load through the gateway (messages/s
// sustained).
func BenchmarkChatThroughput(b *testing.B) {
	e, users := chatGateway(b, chatConns)
	rate := driveChat(b, e.Server, users, e.Endpoint("echo"), chatInFlight)
	if chatRateBaseline > 0 {
		b.ReportMetric(100*rate/chatRateBaseline, "%-of-baseline")
	}
}

// replyChat is the minimal conversing backend: it replies at once.
type replyChat struct {
	tasks.Backend
	chat atomic.Pointer[backendkit.Chat]
}

func (r *replyChat) CanConverse(string) bool      { return true }
func (r *replyChat) AttachChat(c backendkit.Chat) { r.chat.Store(&c) }
func (r *replyChat) Converse(ctx context.Context, t backendkit.Turn) error {
	return (*r.chat.Load()).Send(ctx, backendkit.Message{Endpoint: t.Endpoint, To: t.From, ReplyTo: t.ID, Body: "echo: " + t.Body})
}

type chatUser struct{ conn *xmppclient.Client }

func chatGateway(b *testing.B, n int) (*e2e.Env, []chatUser) {
	users := benchUserNames("chat", n)
	srv := xmppharness.StartProsody(b, xmppharness.ProsodyOptions{})
	ep := "echo@" + srv.ComponentDomain
	e := e2e.Start(b, e2e.Options{Server: srv, Agents: []e2e.Agent{{Localpart: "echo"}}, Users: users,
		Backends: map[string]tasks.Backend{ep: &replyChat{Backend: e2e.DefaultExecutor()}},
		Mutate: func(c *config.Config) {
			benchUnlimited(c)
			c.Messaging.PerConversationPerSecond, c.Messaging.PerConversationBurst = 1e4, 1e5
			c.Messaging.MaxQueued = 1 << 16
		}})
	return e, chatUsers(b, e, users)
}

// chatTrivialTarget starts Prosody and a component that answers every
// chat message to any endpoint with an XEP-0461 reply.
func chatTrivialTarget(b *testing.B, n int) (*xmppharness.Server, []chatUser) {
	srv := xmppharness.StartProsody(b, xmppharness.ProsodyOptions{})
	users := benchUserNames("chat", n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, u := range users {
		if err := srv.Register(ctx, u, e2e.Password+u); err != nil {
			b.Fatal(err)
		}
	}
	domain := jid.MustParse(srv.ComponentDomain)
	r := component.NewRouter(domain, allEndpoints{}, slog.New(slog.DiscardHandler))
	var comp atomic.Pointer[component.Component]
	r.HandleMessage(func(ctx context.Context, m component.Message) {
		body := m.Raw.Child("", "body")
		if m.Type != "chat" || body == nil {
			return
		}
		id := ids.New("m-")
		el := xmltree.New(component.NSComponent, "message", "type", "chat", "id", id, "from", m.To.Bare().String(), "to", m.From.String())
		el.Add(xmltree.New(component.NSComponent, "body").WithText("echo: "+body.Text),
			xmltree.New(ns.StanzaID, "origin-id", "id", id),
			xmltree.New(ns.Reply, "reply", "id", m.ID, "to", m.From.Bare().String()),
			xmltree.New(ns.ChatStates, "active"))
		comp.Load().Send(ctx, el)
	})
	comp.Store(componenttest.Start(b, component.Config{Domain: domain, Addr: srv.ComponentAddr, Secret: srv.ComponentSecret,
		Logger: slog.New(slog.DiscardHandler)}, r))
	e := &e2e.Env{T: b, Server: srv, Domain: srv.ComponentDomain}
	return srv, chatUsers(b, e, users)
}

func chatUsers(b *testing.B, e *e2e.Env, users []string) []chatUser {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []chatUser
	for _, u := range users {
		_, conn, err := e.TryDial(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, chatUser{conn})
	}
	return out
}

// driveChat sends chat messages from every user, inFlight outstanding
// each, for the benchmark's duration, waits for each reply (matched by its
// XEP-0461 reply id), and reports messages/s, p50-ms and p99-ms. It
// returns the rate.
func driveChat(b *testing.B, srv *xmppharness.Server, users []chatUser, ep jid.JID, inFlight int) float64 {
	var mu sync.Mutex
	waiting := map[string]chan struct{}{}
	for _, u := range users {
		u.conn.OnMessage(func(m *xmltree.Element) {
			r := m.Child(ns.Reply, "reply")
			if r == nil {
				return
			}
			mu.Lock()
			ch := waiting[r.AttrValue("id")]
			delete(waiting, r.AttrValue("id"))
			mu.Unlock()
			if ch != nil {
				close(ch)
			}
		})
	}
	roundTrip := func(u chatUser) (time.Duration, error) {
		id := ids.New("c-")
		ch := make(chan struct{})
		mu.Lock()
		waiting[id] = ch
		mu.Unlock()
		m := xmltree.New(ns.Client, "message", "type", "chat", "id", id, "to", ep.String())
		m.Add(xmltree.New(ns.Client, "body").WithText("hello"), xmltree.New(ns.ChatStates, "active"))
		t0 := time.Now()
		if err := u.conn.Send(context.Background(), m); err != nil {
			return 0, err
		}
		select {
		case <-ch:
			return time.Since(t0), nil
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("no reply to %s within 30 s", id)
		}
	}
	for _, u := range users { // warm up
		if _, err := roundTrip(u); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
	work := make(chan struct{})
	var (
		wg      sync.WaitGroup
		lat     []time.Duration
		failure error
	)
	for _, u := range users {
		for w := 0; w < inFlight; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for range work {
					d, err := roundTrip(u)
					if err != nil {
						mu.Lock()
						if failure == nil {
							failure = err
						}
						mu.Unlock()
						continue
					}
					mine = append(mine, d)
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
	}
	srvCPU0 := procCPU(srv.PID())
	start := time.Now()
	for b.Loop() {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	srvCPU := procCPU(srv.PID()) - srvCPU0
	if failure != nil {
		b.Fatal(failure)
	}
	if srvCPU >= 0 {
		b.ReportMetric(100*srvCPU/elapsed.Seconds(), "server-cpu-%")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	rate := float64(len(lat)) / elapsed.Seconds()
	b.ReportMetric(rate, "messages/s")
	b.ReportMetric(millis(latencyQuantile(lat, 0.50)), "p50-ms")
	b.ReportMetric(millis(latencyQuantile(lat, 0.99)), "p99-ms")
	return rate
}
