package crash

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// TestRestartXMPPServerWhileRunning kills Prosody under a running gateway
// and starts it again: the gateway must serve again by itself, an IQ it
// had sent must fail at once instead of hanging, and a caller that logs in
// again recovers the complete state of a task that settled during the
// outage (its events went nowhere) through task-state.
func TestRestartXMPPServerWhileRunning(t *testing.T) {
	t.Parallel()
	// The component's reconnect backoff grows while the server is down, so
	// a longer outage is measured too.
	outages := []time.Duration{0, 5 * time.Second}
	if testing.Short() {
		outages = outages[:1]
	}
	for _, d := range outages {
		t.Run("outage-"+d.String(), func(t *testing.T) { restartRun(t, d) })
	}
}

func restartRun(t *testing.T, outage time.Duration) {
	gate := make(chan struct{})
	x := taskstest.New(tasks.Features{Progress: true, Cancel: true, Input: true})
	x.Script("slow",
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(25), Stage: "before", Message: "before the outage"}},
		taskstest.Step{Gate: gate},
		taskstest.Step{Progress: &tasks.Progress{Percent: taskstest.Percent(75), Stage: "during", Message: "during the outage"}},
		taskstest.Step{Complete: taskstest.Text("slow done during the outage")},
	)
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "worker", Executor: x}}, Users: []string{"alice", "mute"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep := e.Endpoint("worker")

	// A task mid-run: running, one progress event, blocked on the gate.
	c, conn := e.DialConn("alice")
	p, err := c.Pin(ctx, ep, "slow")
	if err != nil {
		t.Fatal(err)
	}
	acc, err := c.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: "slow", Version: p.Manifest.Version, ManifestHash: p.Manifest.Hash, Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the task to report its first progress", func() bool {
		evs, _ := e.Gateway.Engine.Events(ctx, acc.TaskID)
		return len(evs) >= 2
	})

	// An IQ the gateway has sent and that will never be answered.
	mute := muteSession(t, e.Server, "mute")
	comp := e.Gateway.Component
	before := comp.Stats()
	iqDone := make(chan error, 1)
	go func() {
		iq := xmltree.New(component.NSComponent, "iq", "type", "get", "to", mute.String()).Add(xmltree.New(ns.Ping, "ping"))
		_, err := comp.SendIQ(context.Background(), iq)
		iqDone <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "the IQ to be written to the server", func() bool {
		s := comp.Stats()
		return s.Sent > before.Sent && s.PendingIQs > 0
	})
	select {
	case err := <-iqDone:
		t.Fatalf("an IQ to a client that never reads was answered: %v", err)
	default:
	}

	killAt := time.Now()
	if err := e.Server.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-iqDone:
		// The configured IQ timeout is 10 s; ErrStreamLost (not
		// ErrIQTimeout) shows the loss itself failed the IQ.
		if !errors.Is(err, component.ErrStreamLost) {
			t.Fatalf("pending IQ failed with %v, want component.ErrStreamLost", err)
		}
		t.Logf("the pending IQ failed %v after the kill: %v", time.Since(killAt).Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("the pending IQ still hangs 30 s after the server died")
	}
	// While the server is down nothing waits for an answer that cannot come.
	testkit.WaitFor(t, 10*time.Second, "the gateway to notice the stream is gone", func() bool { return !comp.Connected() })
	if _, err := comp.SendIQ(ctx, xmltree.New(component.NSComponent, "iq", "type", "get", "to", e.Server.Domain).Add(xmltree.New(ns.Ping, "ping"))); !errors.Is(err, component.ErrNotConnected) {
		t.Fatalf("SendIQ during the outage: %v, want component.ErrNotConnected", err)
	}
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the caller's connection survived the server's death")
	}

	// The task settles during the outage: its events have no route.
	close(gate)
	testkit.WaitFor(t, 10*time.Second, "the task to complete during the outage", func() bool {
		evs, _ := e.Gateway.Engine.Events(ctx, acc.TaskID)
		return len(evs) > 0 && evs[len(evs)-1].Type == "completed"
	})
	time.Sleep(time.Until(killAt.Add(outage)))

	if err := e.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	c2 := waitServing(t, ctx, e, "alice", 60*time.Second)
	servingAt := time.Now()
	t.Logf("the server was down %v; the gateway served again (fresh login + disco#info) %v after the server was back, %v after the kill, without a gateway restart",
		upAt.Sub(killAt).Round(time.Millisecond), servingAt.Sub(upAt).Round(time.Millisecond), servingAt.Sub(killAt).Round(time.Millisecond))
	select {
	case err := <-e.Done:
		e.Done <- err
		t.Fatalf("the gateway stopped: %v", err)
	default:
	}
	if s := comp.Stats(); s.Connects < 2 {
		t.Fatalf("component stats after the restart: %+v", s)
	}
	if reply, err := comp.SendIQ(ctx, xmltree.New(component.NSComponent, "iq", "type", "get", "to", e.Server.Domain).Add(xmltree.New(ns.Ping, "ping"))); err != nil || reply.AttrValue("type") != "result" {
		t.Fatalf("gateway ping to the server after the restart: %v", err)
	}

	// The caller recovers the complete state through task-state.
	st, err := c2.State(ctx, ep, acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := e.Gateway.Engine.Events(ctx, acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for i, ev := range evs {
		if ev.Revision != int64(i+1) {
			t.Fatalf("stored event %d has revision %d", i, ev.Revision)
		}
		types = append(types, string(ev.Type))
	}
	if got := strings.Join(types, ","); got != "status,progress,progress,completed" {
		t.Fatalf("stored events = %s", got)
	}
	if st.State != "completed" || st.Revision != int64(len(evs)) || !st.ResultAvailable || st.TaskID != acc.TaskID {
		t.Fatalf("task-state after the outage = %+v", *st)
	}
	out, err := c2.Follow(ctx, ep, acc, agentclient.CallOptions{RecoverAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if out.State != "completed" || out.Revision != st.Revision || !strings.Contains(string(out.Payload), "slow done during the outage") {
		t.Fatalf("recovered outcome = %s rev %d %s", out.State, out.Revision, out.Payload)
	}
	res, err := c2.Result(ctx, ep, acc.TaskID)
	if err != nil || res.State != "completed" || string(res.Payload) != string(evs[len(evs)-1].Payload) {
		t.Fatalf("task-result = %+v, %v", res, err)
	}

	// New work flows after the restart.
	out, err = c2.Call(ctx, ep, "echo", json.RawMessage(`{"message":"after the restart"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" || !strings.Contains(string(out.Payload), "after the restart") {
		t.Fatalf("echo after the restart: %v %+v", err, out)
	}
}

// waitServing polls until user can log in and the gateway answers
// disco#info, and returns that client.
func waitServing(t *testing.T, ctx context.Context, e *e2e.Env, user string, timeout time.Duration) *agentclient.Client {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, conn, err := e.TryDial(actx, user)
		if err == nil {
			c.IQTimeout = 5 * time.Second
			var info *agentclient.DiscoInfo
			if info, err = c.Info(actx, e.GatewayJID(), ""); err == nil && info.HasIdentity(ns.CategoryAutomation, ns.TypeGateway) {
				cancel()
				c.IQTimeout = 10 * time.Second
				return c
			}
			conn.Close()
		}
		cancel()
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the gateway did not serve again within %v: %v", timeout, last)
	return nil
}

// muteSession logs user in with plain mellium and never reads the stream,
// so IQs sent to it are never answered. It returns the full JID.
func muteSession(t *testing.T, srv *xmppharness.Server, user string) jid.JID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := net.Dial("tcp", srv.C2SAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	addr := jid.MustParse(user + "@" + srv.Domain + "/mute")
	s, err := xmpp.NewClientSession(ctx, addr, conn,
		xmpp.StartTLS(&tls.Config{ServerName: srv.Domain, InsecureSkipVerify: true}),
		xmpp.SASL("", e2e.Password+user, sasl.ScramSha1, sasl.Plain), xmpp.BindResource())
	if err != nil {
		t.Fatal(err)
	}
	return s.LocalAddr()
}
