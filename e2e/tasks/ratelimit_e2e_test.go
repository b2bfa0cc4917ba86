package tasks

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// countingConn counts IQ attempts and the resource-constraint refusals
// among them.
type countingConn struct {
	*xmppclient.Client
	sent, refused atomic.Int64
}

func (c *countingConn) SendIQ(ctx context.Context, iq *xmltree.Element) (*xmltree.Element, error) {
	c.sent.Add(1)
	reply, err := c.Client.SendIQ(ctx, iq)
	if xmppclient.StanzaErrorCondition(reply) == "resource-constraint" {
		c.refused.Add(1)
	}
	return reply, err
}

// TestLocalServiceAccountIsNotThrottled: with the default limits, one local
// JID invokes 300 tasks and, after a gateway restart, recovers each with a
// task-state and a task-result (600 requests), with client retries off.
// The old defaults (burst 200 for everyone) refused it.
func TestLocalServiceAccountIsNotThrottled(t *testing.T) {
	t.Parallel()
	const n = 300
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"svc"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ep := e.Endpoint("weather")
	m, _ := e.Gateway.Registry.Active(ep.String())
	svc, raw := e.DialConn("svc")
	conn := &countingConn{Client: raw}
	svc = agentclient.New(conn, nil)
	svc.ConstraintRetries = 0
	taskIDs := make([]string, 0, n)
	for i := 0; i < n; i++ {
		acc, err := svc.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: "echo", Version: m.Version, ManifestHash: m.Hash, Arguments: json.RawMessage(`{"message":"hi"}`)})
		if err != nil {
			t.Fatalf("invoke %d: %v", i, err)
		}
		taskIDs = append(taskIDs, acc.TaskID)
	}
	// Wait on the engine itself, so the wait spends no request budget.
	testkit.WaitFor(t, time.Minute, "all echo tasks to complete", func() bool {
		for _, id := range taskIDs {
			s, err := e.Gateway.Engine.State(ctx, e.JID("svc"), ep.String(), id)
			if err != nil || s.State != agentproto.StateCompleted {
				return false
			}
		}
		return true
	})
	e.StopGateway()
	e.StartGateway()
	for i, id := range taskIDs {
		var err error
		// The component reconnects after the restart; wait for the first
		// answer rather than racing it.
		if i == 0 {
			testkit.WaitFor(t, 30*time.Second, "the restarted gateway to answer", func() bool {
				_, err = svc.State(ctx, ep, id)
				return agentclient.Condition(err) != "service-unavailable" && agentclient.Condition(err) != "remote-server-not-found"
			})
		} else {
			_, err = svc.State(ctx, ep, id)
		}
		if err != nil {
			t.Fatalf("task-state %d of %d after the restart: %v", i+1, n, err)
		}
		if _, err := svc.Result(ctx, ep, id); err != nil {
			t.Fatalf("task-result %d of %d after the restart: %v", i+1, n, err)
		}
	}
	if r := conn.refused.Load(); r != 0 {
		t.Fatalf("%d of %d requests refused with resource-constraint", r, conn.sent.Load())
	}
	t.Logf("%d invokes and %d recovery requests from one local JID, none refused", n, 2*n)
}

// TestClientRetriesResourceConstraint: with tiny local limits, the client
// backs off and retries refused requests until they pass, and gives up
// after its bound when the budget does not come back in time.
func TestClientRetriesResourceConstraint(t *testing.T) {
	t.Parallel()
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"svc"}, TOML: `
[federation.local]
input_per_second = 20
input_burst = 2
invoke_per_second = 0.001
invoke_burst = 1
`})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep := e.Endpoint("weather")
	m, _ := e.Gateway.Registry.Active(ep.String())
	_, raw := e.DialConn("svc")
	conn := &countingConn{Client: raw}
	svc := agentclient.New(conn, nil)
	svc.ConstraintBackoff, svc.ConstraintBackoffMax = 20*time.Millisecond, 200*time.Millisecond
	invoke := func() (*agentclient.Accepted, error) {
		return svc.Invoke(ctx, ep, &agentclient.InvokeRequest{Tool: "echo", Version: m.Version, ManifestHash: m.Hash, Arguments: json.RawMessage(`{"message":"hi"}`)})
	}
	acc, err := invoke()
	if err != nil {
		t.Fatal(err)
	}

	// Twelve task-states against a burst of 2 refilling at 20/s: every one
	// succeeds, some only after retries.
	for i := 0; i < 12; i++ {
		if _, err := svc.State(ctx, ep, acc.TaskID); err != nil {
			t.Fatalf("task-state %d: %v", i, err)
		}
	}
	if conn.refused.Load() == 0 {
		t.Fatal("no request was refused: the limit did not bite, so retries were not exercised")
	}
	t.Logf("12 task-states took %d attempts (%d refused, then retried)", conn.sent.Load()-1, conn.refused.Load())

	// The invoke budget (1, refilling once in 1000 s) is spent: the client
	// tries 1 + ConstraintRetries times and then reports the refusal.
	svc.ConstraintRetries = 2
	sent := conn.sent.Load()
	_, err = invoke()
	if agentclient.Condition(err) != "resource-constraint" {
		t.Fatalf("second invoke: %v, want resource-constraint after the retries", err)
	}
	if got := conn.sent.Load() - sent; got != 3 {
		t.Fatalf("the refused invoke was sent %d times, want 1 + 2 retries", got)
	}
	t.Logf("gave up: %v", err)
}
