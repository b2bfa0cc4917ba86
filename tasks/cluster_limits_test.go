package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit"
)

// gaugeBackend counts the backend calls in flight across every member of
// a test cluster and keeps the highest count seen.
type gaugeBackend struct {
	tasks.Backend
	now, peak *atomic.Int64
}

func (g gaugeBackend) Execute(ctx context.Context, call tasks.Call, run tasks.Run) {
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	defer g.now.Add(-1)
	g.Backend.Execute(ctx, call, run)
}

// storm admits n blocking tasks spread over the members, all at once, and
// returns the accepted task IDs and the refusals' count.
func storm(t *testing.T, c *testCluster, n int) (accepted []string, refused int) {
	t.Helper()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := range n {
		m := c.members[i%len(c.members)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			acc, err := m.eng.Admit(context.Background(), c.inv("forecast.get", fmt.Sprintf(`{"city":"c%d"}`, i)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted = append(accepted, acc.TaskID)
			case errors.Is(err, tasks.ErrResourceConstraint):
				refused++
			default:
				t.Errorf("admission %d on %s: %v", i, m.name, err)
			}
		}()
	}
	wg.Wait()
	return accepted, refused
}

// The admission limits hold for the cluster as a whole: a storm spread
// over three members is accepted up to the limit, not three times it.
func TestClusterLimitsAcrossMembers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int
		set   func(*tasks.Config, int)
	}{
		{"max_active", 5, func(c *tasks.Config, n int) { c.MaxActive = n }},
		{"per_principal", 6, func(c *tasks.Config, n int) { c.MaxActivePerPrincipal = n }},
		{"per_domain", 4, func(c *tasks.Config, n int) { c.MaxActivePerDomain = n }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newTestCluster(t)
			c.mutate = func(cfg *tasks.Config) { tc.set(cfg, tc.limit) }
			for i := range 3 {
				c.start(fmt.Sprintf("gw-%d", i), 0, false)
			}
			accepted, refused := storm(t, c, 3*tc.limit)
			t.Logf("%s limit %d, three members: %d of %d accepted", tc.name, tc.limit, len(accepted), 3*tc.limit)
			if len(accepted) != tc.limit || refused != 2*tc.limit {
				t.Fatalf("%s limit %d over three members: %d of %d accepted, %d refused", tc.name, tc.limit, len(accepted), 3*tc.limit, refused)
			}
			// Freed capacity is cluster-wide too: once every task settled,
			// a full limit's worth is admitted again.
			close(c.be.release)
			c.settled(c.members[0], accepted)
			for _, m := range c.members {
				tasks.HoldDispatch(m.eng, true) // the new tasks stay active
			}
			again, _ := storm(t, c, 3*tc.limit)
			if len(again) != tc.limit {
				t.Fatalf("after settling: %d accepted, want %d", len(again), tc.limit)
			}
		})
	}
}

// max_running_per_backend counts the calls in flight on every member: with
// a limit of 2 on each of three members, never more than 2 run at once,
// and every task still runs once slots free on any member.
func TestClusterBackendLimitAcrossMembers(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t)
	var now, peak atomic.Int64
	c.mutate = func(cfg *tasks.Config) {
		orig := cfg.Backends
		cfg.Backends = func(ep string) (tasks.Backend, bool) {
			be, ok := orig(ep)
			return gaugeBackend{be, &now, &peak}, ok
		}
	}
	for i := range 3 {
		c.start(fmt.Sprintf("gw-%d", i), 2, false)
	}
	accepted, refused := storm(t, c, 12)
	if refused != 0 || len(accepted) != 12 {
		t.Fatalf("%d accepted, %d refused", len(accepted), refused)
	}
	testkit.WaitFor(t, 30*time.Second, "two backend calls running", func() bool { return now.Load() >= 2 })
	// Release the calls one at a time: each freed slot, on whichever
	// member, lets exactly one waiting task start.
	for i := range 12 {
		select {
		case c.be.release <- struct{}{}:
		case <-time.After(30 * time.Second):
			t.Fatalf("after %d releases no call is running to take the next", i)
		}
	}
	final := c.settled(c.members[0], accepted)
	for id, s := range final {
		if s.State != agentproto.StateCompleted || c.be.executions(id) != 1 {
			t.Fatalf("task %s: %s, %d executions", id, s.State, c.be.executions(id))
		}
	}
	t.Logf("backend limit 2 on three members: at most %d calls at once", peak.Load())
	if p := peak.Load(); p != 2 {
		t.Fatalf("backend limit 2 on three members: %d calls ran at once", p)
	}
}
