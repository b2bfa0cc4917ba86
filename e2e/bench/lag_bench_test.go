package bench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/component/componenttest"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskxmpp"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

// BenchmarkConcurrentTasks1000XMPPCeiling is BenchmarkConcurrentTasks1000's
// traffic with a trivial component in place of the gateway, on its own
// private Prosody: the same 4 connections admit 1,000 tasks (a canned
// <accepted/> and a status running event each); once all are admitted,
// every task sends five progress events 200 ms apart and a completed
// event, from one goroutine per task as the executors do. No validation,
// persistence or engine: the lag, from just before the component's Send to
// the caller's receipt, is what the XMPP path alone allows for the same
// waves of events on this machine (issue 23's < 50 ms p99 goal).
func BenchmarkConcurrentTasks1000XMPPCeiling(b *testing.B) {
	const (
		nTasks   = 1000
		nConns   = 4
		progress = 5
		interval = 200 * time.Millisecond
	)
	users := benchUserNames("lagc", nConns)
	srv := xmppharness.StartProsody(b, xmppharness.ProsodyOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, u := range users {
		if err := srv.Register(ctx, u, e2e.Password+u); err != nil {
			b.Fatal(err)
		}
	}
	type target struct {
		id       string
		from, to jid.JID
	}
	var (
		comp    atomic.Pointer[component.Component]
		tgMu    sync.Mutex
		targets []target
	)
	domain := jid.MustParse(srv.ComponentDomain)
	send := func(t target, rev int64, typ agentproto.EventType, payload string) error {
		id := ids.New("evt-")
		return comp.Load().Send(context.Background(), component.NewMessage(id, t.from, t.to, taskxmpp.EventElement(tasks.Event{
			TaskID: t.id, EventID: id, Revision: rev, Type: typ, Payload: []byte(payload)})))
	}
	r := component.NewRouter(domain, allEndpoints{}, slog.New(slog.DiscardHandler))
	r.HandleEndpointIQ(component.IQSet, ns.Task, "invoke", component.AccessExisting, component.IQHandlerFunc(
		func(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
			now := time.Now().UTC()
			acc := tasks.Accepted{TaskID: ids.New("task-"), RequestID: iq.Payload.AttrValue("request-id"),
				Created: now, RetainUntil: now.Add(24 * time.Hour)}
			t := target{acc.TaskID, iq.To.Bare(), iq.From}
			tgMu.Lock()
			targets = append(targets, t)
			tgMu.Unlock()
			// The gateway's dispatch sends status running after the answer.
			go send(t, 1, agentproto.EventStatus, `{"state":"running","updatedAt":"`+xmpptime.Format(now)+`"}`)
			return taskxmpp.AcceptedElement(acc), nil
		}))
	comp.Store(componenttest.Start(b, component.Config{Domain: domain, Addr: srv.ComponentAddr, Secret: srv.ComponentSecret,
		Logger: slog.New(slog.DiscardHandler)}, r))

	var (
		marksMu sync.Mutex
		marks   = map[revKey]time.Time{} // just before Send
		recvMu  sync.Mutex
		recv    = map[revKey]time.Time{}
		got     atomic.Int64 // distinct progress and completed events received
	)
	tap := func(el *xmltree.Element) {
		now := time.Now()
		ev := el.Child(ns.Task, "event")
		if ev == nil {
			return
		}
		rev, _ := strconv.ParseInt(ev.AttrValue("revision"), 10, 64)
		k := revKey{ev.AttrValue("task-id"), rev}
		recvMu.Lock()
		if _, dup := recv[k]; !dup {
			recv[k] = now
			if rev >= 2 {
				got.Add(1)
			}
		}
		recvMu.Unlock()
	}
	var clients []*agentclient.Client
	for _, u := range users {
		conn, err := xmppclient.Dial(ctx, xmppclient.Options{
			JID: u + "@" + srv.Domain, Password: e2e.Password + u, Server: srv.C2SAddr,
			TLS: &tls.Config{InsecureSkipVerify: true}, IQTimeout: 30 * time.Second, Presence: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		c := agentclient.New(eventTap{conn, tap}, slog.New(slog.DiscardHandler))
		c.IQTimeout, c.Retries = 30*time.Second, 0
		clients = append(clients, c)
	}
	ep := jid.MustParse("worker@" + srv.ComponentDomain)

	// Admit all tasks, 16 invokes in flight per connection.
	var (
		wg    sync.WaitGroup
		work  = make(chan int)
		fails atomic.Int64
	)
	for _, c := range clients {
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range work {
					req := trivialInvoke()
					req.Arguments = json.RawMessage(`{}`)
					if _, err := c.Invoke(ctx, ep, req); err != nil {
						fails.Add(1)
						b.Errorf("invoke: %v", err)
					}
				}
			}()
		}
	}
	for i := range nTasks {
		work <- i
	}
	close(work)
	wg.Wait()
	if fails.Load() > 0 {
		b.Fatalf("%d invokes failed", fails.Load())
	}
	tgMu.Lock()
	all := slices.Clone(targets)
	tgMu.Unlock()

	// The waves: one goroutine per task, as the executors run.
	b.ResetTimer()
	cpu := startCPU(srv.PID())
	var run sync.WaitGroup
	for _, t := range all {
		run.Add(1)
		go func() {
			defer run.Done()
			mark := func(rev int64) {
				marksMu.Lock()
				marks[revKey{t.id, rev}] = time.Now()
				marksMu.Unlock()
			}
			for k := 1; k <= progress; k++ {
				time.Sleep(interval) // the executor's own pace, not a synchronisation
				rev := int64(1 + k)
				mark(rev)
				payload := fmt.Sprintf(`{"message":"step %d","percent":%d}`, k, 100*k/(progress+1))
				if err := send(t, rev, agentproto.EventProgress, payload); err != nil {
					b.Errorf("send: %v", err)
					return
				}
			}
			mark(progress + 2)
			if err := send(t, progress+2, agentproto.EventCompleted, `{"result":{"content":[{"type":"text","text":"done"}],"isError":false}}`); err != nil {
				b.Errorf("send: %v", err)
			}
		}()
	}
	run.Wait()
	want := len(all) * (progress + 1)
	testkit.WaitFor(b, 2*time.Minute, "every event received", func() bool { return got.Load() >= int64(want) })
	cpu.report(b, want)
	b.StopTimer()
	var lags latSample
	marksMu.Lock()
	recvMu.Lock()
	for k, t := range marks {
		if r, ok := recv[k]; ok {
			lags = append(lags, r.Sub(t))
		}
	}
	recvMu.Unlock()
	marksMu.Unlock()
	slices.Sort(lags)
	b.ReportMetric(float64(len(all)), "tasks")
	b.ReportMetric(lags.q(0.50), "lag-p50-ms")
	b.ReportMetric(lags.q(0.99), "lag-p99-ms")
}

// cpuMark is the CPU time used so far by this process (the gateway or the
// trivial component, with the callers) and by the XMPP server.
type cpuMark struct {
	pid       int
	self, srv float64
}

func startCPU(serverPID int) cpuMark {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpuMark{pid: serverPID, self: rusageSeconds(ru), srv: procCPU(serverPID)}
}

// report gives the CPU time per event since the mark: CPU time, unlike a
// lag, hardly moves with the load of the machine.
func (m cpuMark) report(b *testing.B, events int) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(1e6*(rusageSeconds(ru)-m.self)/float64(events), "gotest-cpu-us/event")
	if srv := procCPU(m.pid); srv >= 0 && m.srv >= 0 {
		b.ReportMetric(1e6*(srv-m.srv)/float64(events), "server-cpu-us/event")
	}
}
