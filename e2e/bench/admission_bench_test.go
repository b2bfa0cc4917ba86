package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/component/componenttest"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/tasks/taskxmpp"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

// Load shape of both admission benchmarks.
const (
	benchConns    = 4  // client connections, one user each
	benchInFlight = 16 // invokes outstanding per connection
)

// baselineRate is the last BenchmarkAdmissionBaseline result, for the
// ratio BenchmarkAdmission reports when both run.
var baselineRate float64

// BenchmarkAdmissionBaseline is the same invoke IQ round trip through
// Prosody, answered with a canned <accepted/> by a trivial component:
// no validation, no persistence. It runs first (source order).
func BenchmarkAdmissionBaseline(b *testing.B) {
	e, clients, ep := startTrivialTarget(b, benchUserNames("bench", benchConns), false)
	baselineRate = driveInvokes(b, e.Server, clients, ep, trivialInvoke)
}

// BenchmarkAdmissionBaselineEvents is BenchmarkAdmissionBaseline with the
// trivial component also sending the two lifecycle messages the gateway
// sends for each echo task (status running, completed): the same stanzas
// through the same Prosody, with no validation, persistence or backend.
// It is the XMPP path's own limit for the traffic BenchmarkAdmission
// makes.
func BenchmarkAdmissionBaselineEvents(b *testing.B) {
	e, clients, ep := startTrivialTarget(b, benchUserNames("bench", benchConns), true)
	baselineEventsRate = driveInvokes(b, e.Server, clients, ep, trivialInvoke)
	if baselineRate > 0 {
		b.ReportMetric(100*baselineEventsRate/baselineRate, "%-of-baseline")
	}
}

// baselineEventsRate is the last BenchmarkAdmissionBaselineEvents result.
var baselineEventsRate float64

func trivialInvoke() *agentclient.InvokeRequest {
	return &agentclient.InvokeRequest{Tool: "echo", Version: "1.0.0",
		ManifestHash: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", Arguments: json.RawMessage(`{"message":"hi"}`)}
}

// startTrivialTarget starts a private Prosody and a trivial component that
// answers every invoke to any JID of its domain with a canned <accepted/>;
// withEvents also sends, after the answer, a status running event and a
// completed event carrying a fixed echo result, as the gateway does for an
// echo task. It returns the environment, one logged-in client per user and
// the endpoint to call.
func startTrivialTarget(b *testing.B, users []string, withEvents bool) (*e2e.Env, []*agentclient.Client, jid.JID) {
	srv := xmppharness.StartProsody(b, xmppharness.ProsodyOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, u := range users {
		if err := srv.Register(ctx, u, e2e.Password+u); err != nil {
			b.Fatal(err)
		}
	}
	startTrivialComponent(b, srv.ComponentDomain, srv.ComponentAddr, srv.ComponentSecret, withEvents)
	e := &e2e.Env{T: b, Server: srv, Domain: srv.ComponentDomain}
	return e, benchClients(b, e, users), jid.MustParse("echo@" + srv.ComponentDomain)
}

// startTrivialComponent connects the trivial component (see
// startTrivialTarget) to the server at addr for domain, until tb ends.
func startTrivialComponent(tb testing.TB, domainStr, addr, secret string, withEvents bool) {
	domain := jid.MustParse(domainStr)
	r := component.NewRouter(domain, allEndpoints{}, slog.New(slog.DiscardHandler))
	var comp atomic.Pointer[component.Component]
	r.HandleEndpointIQ(component.IQSet, ns.Task, "invoke", component.AccessExisting, component.IQHandlerFunc(
		func(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
			now := time.Now().UTC()
			acc := tasks.Accepted{
				TaskID: ids.New("task-"), RequestID: iq.Payload.AttrValue("request-id"),
				Created: now, RetainUntil: now.Add(24 * time.Hour),
			}
			if withEvents {
				go sendCannedEvents(comp.Load(), iq.To.Bare(), iq.From, acc.TaskID, now)
			}
			return taskxmpp.AcceptedElement(acc), nil
		}))
	comp.Store(componenttest.Start(tb, component.Config{Domain: domain, Addr: addr, Secret: secret,
		Logger: slog.New(slog.DiscardHandler)}, r))
}

// cannedEchoResult is the completed payload of server-everything's echo as
// the gateway relays it.
const cannedEchoResult = `{"result":{"content":[{"text":"Echo: hello","type":"text"}],"isError":false}}`

func sendCannedEvents(c *component.Component, from, to jid.JID, taskID string, now time.Time) {
	for i, ev := range []struct{ typ, payload string }{
		{"status", `{"state":"running","updatedAt":"` + xmpptime.Format(now) + `"}`},
		{"completed", cannedEchoResult},
	} {
		id := ids.New("evt-")
		msg := component.NewMessage(id, from, to, taskxmpp.EventElement(tasks.Event{
			TaskID: taskID, EventID: id, Revision: int64(i + 1), Type: agentproto.EventType(ev.typ), Payload: []byte(ev.payload)}))
		if err := c.Send(context.Background(), msg); err != nil {
			return
		}
	}
}

// BenchmarkAdmission measures durable admissions through Prosody: invokes
// from benchConns connections with benchInFlight outstanding each, against
// the in-process gateway's scripted echo agent. Every <accepted/> is sent
// after the task row and its replay record are committed
// (synchronous=FULL); the tasks then run and complete, sending their
// events, as in production.
func BenchmarkAdmission(b *testing.B) {
	rate := benchGatewayAdmission(b, nil)
	if baselineRate > 0 {
		b.ReportMetric(100*rate/baselineRate, "%-of-baseline")
	}
	if baselineEventsRate > 0 {
		b.ReportMetric(100*rate/baselineEventsRate, "%-of-baseline-events")
	}
}

// BenchmarkAdmissionLongRunning is BenchmarkAdmission with a tool that
// keeps running past the measurement (released when the benchmark ends):
// each invoke costs the admission commit, the dispatch commit and one
// status event, and no completion, as a long-running tool's would while
// it runs.
func BenchmarkAdmissionLongRunning(b *testing.B) {
	gate := make(chan struct{})
	x := e2e.DefaultExecutor()
	x.Script("echo", taskstest.Step{Gate: gate}, taskstest.Step{Echo: true})
	rate := benchGatewayAdmission(b, x)
	close(gate)
	if baselineRate > 0 {
		b.ReportMetric(100*rate/baselineRate, "%-of-baseline")
	}
}

// benchGatewayAdmission drives invokes of the echo tool at the in-process
// gateway (executor x, or DefaultExecutor when nil) with the rate limits
// and the active-task cap lifted, and returns the admission rate.
func benchGatewayAdmission(b *testing.B, x *taskstest.Executor) float64 {
	users := benchUserNames("bench", benchConns)
	e := e2e.Start(b, e2e.Options{Agents: []e2e.Agent{{Localpart: "echo", Executor: x}}, Users: users, Mutate: benchUnlimited})
	clients := benchClients(b, e, users)
	ep := e.Endpoint("echo")
	m, ok := e.Gateway.Registry.Active(ep.String())
	if !ok {
		b.Fatal("echo has no active manifest")
	}
	req := func() *agentclient.InvokeRequest {
		return &agentclient.InvokeRequest{Tool: "echo", Version: m.Version, ManifestHash: m.Hash,
			Arguments: json.RawMessage(`{"message":"hi"}`)}
	}
	return driveInvokes(b, e.Server, clients, ep, req)
}

func benchClients(b *testing.B, e *e2e.Env, users []string) []*agentclient.Client {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*agentclient.Client
	for _, u := range users {
		c, _, err := e.TryDial(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		c.Retries = 0
		out = append(out, c)
	}
	return out
}

// allEndpoints makes every JID below the domain an existing, visible
// endpoint.
type allEndpoints struct{}

func (allEndpoints) Resolve(_, _ jid.JID) (bool, bool) { return true, true }

// driveInvokes sends invokes from every client, benchInFlight at a time
// each, for the benchmark's duration, and reports admissions/s, p50-ms and
// p99-ms, plus the CPU the XMPP server and this process (clients, and the
// gateway when in-process) used per second of wall time. It returns the
// rate.
func driveInvokes(b *testing.B, srv *xmppharness.Server, clients []*agentclient.Client, ep jid.JID, req func() *agentclient.InvokeRequest) float64 {
	ctx := context.Background()
	// Warm up: one invoke per connection (statement caches, TLS, routes).
	for _, c := range clients {
		if _, err := c.Invoke(ctx, ep, req()); err != nil {
			b.Fatalf("warm-up invoke: %v", err)
		}
	}
	work := make(chan struct{})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lat     []time.Duration
		failure error
	)
	for _, c := range clients {
		for w := 0; w < benchInFlight; w++ {
			wg.Add(1)
			go func(c *agentclient.Client) {
				defer wg.Done()
				var mine []time.Duration
				for range work {
					r := req()
					t0 := time.Now()
					acc, err := c.Invoke(ctx, ep, r)
					d := time.Since(t0)
					if err == nil && (acc.RequestID != r.RequestID || acc.Revision != 0 || acc.TaskID == "") {
						err = fmt.Errorf("bad acceptance %+v", *acc)
					}
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
			}(c)
		}
	}
	srvCPU0 := procCPU(srv.PID())
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	for b.Loop() {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	srvCPU := procCPU(srv.PID()) - srvCPU0
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	selfCPU := rusageSeconds(ru1) - rusageSeconds(ru0)
	if failure != nil {
		b.Fatalf("invoke: %v", failure)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	rate := float64(len(lat)) / elapsed.Seconds()
	b.ReportMetric(rate, "admissions/s")
	b.ReportMetric(millis(latencyQuantile(lat, 0.50)), "p50-ms")
	b.ReportMetric(millis(latencyQuantile(lat, 0.99)), "p99-ms")
	if srvCPU >= 0 {
		b.ReportMetric(100*srvCPU/elapsed.Seconds(), "server-cpu-%")
	}
	b.ReportMetric(100*selfCPU/elapsed.Seconds(), "gotest-cpu-%")
	return rate
}

func latencyQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// procCPU is the user+system CPU seconds pid has used, or -1.
func procCPU(pid int) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	// After the name: state(0) ... utime(11) stime(12), in clock ticks.
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ is 100 on Linux
}

func rusageSeconds(r syscall.Rusage) float64 {
	return float64(r.Utime.Sec+r.Stime.Sec) + float64(r.Utime.Usec+r.Stime.Usec)/1e6
}
