// Package accdb is the storage contract of the agent-control-center
// bridge: the enrolled connectors (who may dial in, bound to one client
// certificate) and the durable run ↔ task mapping that makes sure a task
// never creates two runs and that runs cut off by a gateway restart are
// cancelled when their connector returns. store/sqlite and store/pg
// implement it; store/storetest is the conformance suite every driver passes.
// No token, key or approval secret is stored: a connector is known by its
// certificate's SHA-256 fingerprint only.
package accdb

import (
	"context"
	"errors"
)

// Connector is one enrolled connector.
type Connector struct {
	Name       string // operator's name, unique
	ID         string // connector_id (a UUID), unique
	CertSHA256 string // hex SHA-256 of the client certificate's DER
	CreatedAt  string // RFC 3339
	RevokedAt  string // "" while enrolled
}

// Revoked reports whether the connector has been revoked.
func (c Connector) Revoked() bool { return c.RevokedAt != "" }

// RunState is a run's place in the mapping's own life (not the task's):
// created before create_run is sent, accepted after run_accepted (a state
// drivers keep; accbridge does not write it, to spare each run an fsync),
// done once the connector has nothing more to do for it, orphaned when the
// task settled while the connector could not be told (it is sent
// cancel_run on its return).
type RunState string

const (
	RunCreated  RunState = "created"
	RunAccepted RunState = "accepted"
	RunDone     RunState = "done"
	RunOrphaned RunState = "orphaned"
)

// Run maps one task to the one run created for it.
type Run struct {
	RunID       string
	TaskID      string
	ConnectorID string
	AgentID     string
	State       RunState
}

// ErrExists is returned by Enroll for a name or id already taken.
var ErrExists = errors.New("accdb: connector already enrolled")

// Driver is an ACC store.
type Driver interface {
	// Enroll records a new connector; a taken name or id is ErrExists.
	Enroll(ctx context.Context, c Connector) error
	// Connector reads a connector by name; ok false when there is none.
	Connector(ctx context.Context, name string) (c Connector, ok bool, err error)
	// ConnectorByID reads a connector by connector_id.
	ConnectorByID(ctx context.Context, id string) (c Connector, ok bool, err error)
	// Connectors lists every connector, by name.
	Connectors(ctx context.Context) ([]Connector, error)
	// Revoke marks a connector revoked at the given time; it reports
	// false when there is no such connector. Revoking again keeps the
	// first time.
	Revoke(ctx context.Context, name, at string) (bool, error)

	// CreateRun records the run for r.TaskID unless the task already has
	// one; it returns the task's run and whether this call created it.
	// A task therefore never has two runs, whoever asks.
	CreateRun(ctx context.Context, r Run) (Run, bool, error)
	// RunByTask reads the run of a task.
	RunByTask(ctx context.Context, taskID string) (Run, bool, error)
	// SetRunState moves a run to state. Done is terminal: a done run
	// stays done (the call succeeds and changes nothing).
	SetRunState(ctx context.Context, runID string, state RunState) error
	// OpenRuns lists a connector's runs that are not done.
	OpenRuns(ctx context.Context, connectorID string) ([]Run, error)
}
