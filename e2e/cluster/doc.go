// Package cluster tests several agentgw serve instances on one PostgreSQL end to end.
package cluster
