package main

import (
	"context"

	"github.com/agentgw/agentgw/cluster"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/ids"
)

// clusterSession makes doctor's component session a guest of a running
// cluster (docs/cluster.md, "IQ routing in a cluster"): the server hands
// the answer to doctor's ping to any session of the domain, so doctor tags
// its IQs with an instance name of its own and listens on the bus, where
// the members forward that answer. It also sends allowMultiple as the
// members do, so Openfire lets doctor in beside them. Without the database
// the session stays plain; the store checks report why. The returned
// function releases the bus.
func (d *doctor) clusterSession(ctx context.Context, cfg *config.Config, cc *component.Config) func() {
	if cfg.Store.Driver != config.DriverPostgres {
		return func() {}
	}
	cc.AllowMultiple = cfg.ClusterAllowMultiple()
	octx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	st, err := gateway.OpenStores(octx, cfg)
	if err != nil {
		return func() {}
	}
	bus, err := st.OpenCluster(octx, d.log)
	if err != nil {
		st.Close()
		return func() {}
	}
	cc.Instance, cc.Relay, cc.RelayMaxBytes = ids.New("doctor."), bus, cluster.MaxPayload
	return func() { bus.Close(); st.Close() }
}
