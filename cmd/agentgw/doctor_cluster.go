package main

import (
	"context"
	"time"

	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// checkCluster reports, for driver postgres, the instances sharing the
// database (their leases and unsettled tasks), the connection leases, and
// whether notifications between instances work (LISTEN on a dedicated
// connection).
func (d *doctor) checkCluster(ctx context.Context, cfg *config.Config, st *gateway.Store) {
	octx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	cl, ok := st.Tasks.(taskdb.Cluster)
	if !ok {
		d.fail("cluster", "the task driver has no instance leases")
		return
	}
	insts, err := cl.Instances(octx)
	if err != nil {
		d.fail("cluster", "%s", d.red.Scrub(err.Error()))
		return
	}
	live, stranded := 0, 0
	for _, in := range insts {
		if in.Live {
			live++
		} else {
			stranded += in.Unsettled
		}
	}
	self := cfg.Cluster.Instance
	d.ok("cluster", "%d instances known, %d live; this config is instance %s", len(insts), live, self)
	for _, in := range insts {
		what := "instance " + in.Name
		if in.Name == self {
			what += " (this config)"
		}
		switch {
		case in.Live:
			d.ok(what, "live, lease until %s, %d unsettled tasks", in.Expires.Format(time.RFC3339), in.Unsettled)
		case in.Unsettled > 0 && live == 0:
			d.fail(what, "lease expired %s ago with %d unsettled tasks and no live instance to take them over — start an instance", time.Since(in.Expires).Round(time.Second), in.Unsettled)
		case in.Unsettled > 0:
			d.ok(what, "lease expired %s ago; a live instance takes its %d unsettled tasks over within one lease", time.Since(in.Expires).Round(time.Second), in.Unsettled)
		default:
			d.ok(what, "not running (lease expired %s ago), nothing unsettled", time.Since(in.Expires).Round(time.Second))
		}
	}
	bus, err := st.OpenCluster(octx, d.log)
	if err != nil {
		d.fail("cluster notifications", "%s — instances could not tell each other about cancels and input", d.red.Scrub(err.Error()))
		return
	}
	defer bus.Close()
	got := make(chan struct{}, 1)
	stop := bus.Subscribe("agentgw.doctor", func([]byte) {
		select {
		case got <- struct{}{}:
		default:
		}
	})
	defer stop()
	if err := bus.Publish(octx, "agentgw.doctor", []byte("ping")); err != nil {
		d.fail("cluster notifications", "%s", d.red.Scrub(err.Error()))
	} else {
		select {
		case <-got:
			d.ok("cluster notifications", "LISTEN/NOTIFY round trip works")
		case <-octx.Done():
			d.fail("cluster notifications", "a NOTIFY did not come back within %s — is a connection pooler in transaction mode in between? LISTEN needs a session", d.timeout)
		}
	}
	leases, err := bus.List(octx)
	if err != nil {
		d.fail("cluster leases", "%s", d.red.Scrub(err.Error()))
		return
	}
	for _, l := range leases {
		state := "expired"
		if l.Live {
			state = "live"
		}
		d.ok("lease "+l.Name, "held by %s (%s, until %s)", l.Holder, state, l.Expires.Format(time.RFC3339))
	}
}
