// Package lease tests the connection-holding bridges (xAgent connector
// chat, agent-control-center, OpenAgentNetwork) in cluster mode: several
// agentgw serve members on one PostgreSQL behind ejabberd, each bridge's
// one connection held under a lease on one member.
package lease
