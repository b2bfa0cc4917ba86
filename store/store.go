// Package store names the set of feature drivers one database serves:
// store/sqlite and store/pg each return a Drivers for their database, and
// gateway.OpenStores (the one entry point of serve, host, doctor and the
// operator commands) opens the one [store] selects. The interfaces stay
// beside their features (tasks/taskdb, directory/dirdb, ...); the SQL lives
// only in the two drivers.
package store

import (
	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/console/sessiondb"
	"github.com/agentgw/agentgw/directory/dirdb"
	"github.com/agentgw/agentgw/directory/presencedb"
	"github.com/agentgw/agentgw/directory/selfregdb"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// Drivers is one driver for each store interface, all on one database.
type Drivers struct {
	Tasks     taskdb.Driver
	Directory dirdb.Driver
	Grants    federation.GrantStore
	// Bindings is the one connector binding driver of the store: share it
	// between the connector agents so that its card claims cover them all.
	Bindings bindingdb.Driver

	Chats   chatdb.Driver    // the connector bridge's IM v2 queues
	ACC     accdb.Driver     // agent-control-center connectors and runs
	OAN     oandb.Driver     // the OpenAgentNetwork cursor and effects
	SelfReg selfregdb.Driver // Self Registration records and bans

	Presence presencedb.Driver // endpoints' presence subscribers

	ConsoleSessions sessiondb.Driver // the operator console's logins
}
