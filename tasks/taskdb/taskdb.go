// Package taskdb defines the storage contract of the task engine: the rows it
// keeps and the narrow driver interface, one method per query, that
// store/sqlite implements and that a PostgreSQL driver could implement for
// several gateway instances later.
//
// The engine owns every decision; a driver only stores. Writes happen inside
// one Tx per group commit, each operation guarded by a savepoint, and every
// task update is a compare-and-set on (id, revision, state).
package taskdb

import (
	"context"
	"github.com/agentgw/agentgw/agentproto"
	"time"
)

// Input request dispositions.
const (
	InputPending    = "pending"
	InputAnswered   = "answered"
	InputExpired    = "expired"
	InputSuperseded = "superseded"
)

// Task is one task row. It doubles as the admission replay record: the
// (Caller, Endpoint, RequestID) key is unique and Fingerprint is kept with it
// until PurgeAfter.
type Task struct {
	ID           string
	Caller       string // bare JID, the authorization principal
	Route        string // full JID that invoked; best-effort notification route
	Endpoint     string // bare JID of the target endpoint
	RequestID    string
	Tool         string
	APIVersion   string
	ManifestHash string
	Arguments    []byte // RFC 8785 canonical
	Fingerprint  []byte // SHA-256 of the replay fingerprint
	Deadline     string // canonical XEP-0082 instant, exact digits; "" for none
	DeadlineAt   time.Time
	State        agentproto.State // stored by its protocol name
	Revision     int64
	Dispatched   bool // the backend has been (or is about to be) called
	Created      time.Time
	Updated      time.Time
	RetainUntil  time.Time
	PurgeAfter   time.Time // earliest physical deletion, once terminal
	InputRequest string    // pending input request ID, "" for none
	Result       []byte    // terminal event payload; nil while non-terminal
	CancelKey    []byte    // SHA-256 of the accepted cancellation tuple
	CancelRev    int64     // revision of the cancellation acceptance
	// DelegationDepth is the invocation's depth below a direct call; set at
	// admission, never changed.
	DelegationDepth int
	// Owner is the gateway instance that executes the task, set at
	// admission and moved only by Cluster.TakeOver. A single-instance
	// driver (store/sqlite) does not store it and reads it back as "".
	Owner string
}

// Event is one committed lifecycle event.
type Event struct {
	TaskID   string
	Revision int64
	EventID  string
	Type     agentproto.EventType
	Payload  []byte // canonical JSON
	Created  time.Time
}

// Input is one input request of a task and its disposition.
type Input struct {
	TaskID     string
	RequestID  string
	Status     string
	Request    []byte // the complete input_required object, canonical JSON
	ExpiresAt  string // canonical XEP-0082 instant; "" for none
	CreatedRev int64
	AcceptKey  []byte // SHA-256 of the accepted input tuple
	AcceptRev  int64
}

// Driver is a task store.
type Driver interface {
	// Begin starts the write transaction of one group commit.
	Begin(ctx context.Context) (Tx, error)

	// The read side answers from committed state only.
	Task(ctx context.Context, id string) (*Task, error) // nil, nil when absent
	TaskByRequest(ctx context.Context, caller, endpoint, requestID string) (*Task, error)
	// TaskState reads a task and its pending input request (nil when
	// none) from one consistent snapshot.
	TaskState(ctx context.Context, id string) (*Task, *Input, error)
	Events(ctx context.Context, taskID string) ([]Event, error)
	Unsettled(ctx context.Context) ([]Task, error)
	// RetainedBytes sums, per caller, the stored bytes (arguments and
	// result) of terminal tasks not yet purged.
	RetainedBytes(ctx context.Context) (map[string]int64, error)
	VersionReferenced(ctx context.Context, endpoint, version string) (bool, error)
	// HasTask reports whether caller has any stored task at endpoint.
	HasTask(ctx context.Context, caller, endpoint string) (bool, error)
	// BackendState reads the state a backend committed with a task
	// (SetBackendState), nil when none.
	BackendState(ctx context.Context, taskID string) ([]byte, error)
}

// Tx is the write transaction of one group commit. It is used by one
// goroutine.
type Tx interface {
	// Savepoint, Release and RollbackTo bracket one operation, so that a
	// storage failure undoes that operation alone.
	Savepoint() error
	Release() error
	RollbackTo() error
	Commit() error
	Rollback() error

	// InsertTask inserts t unless its (caller, endpoint, request) key
	// exists; inserted is false then.
	InsertTask(t *Task) (inserted bool, err error)
	Task(id string) (*Task, error)
	TaskByRequest(caller, endpoint, requestID string) (*Task, error)
	// UpdateTask writes t if the stored row still has revision prevRev and
	// one of the states in from; ok is false when the guard failed.
	UpdateTask(t *Task, prevRev int64, from ...agentproto.State) (ok bool, err error)
	AppendEvent(e *Event) error
	InsertInput(in *Input) error
	Input(taskID, requestID string) (*Input, error)
	// SetInputStatus moves a pending input request to status; for
	// answered it records the acceptance key and revision.
	SetInputStatus(taskID, requestID, status string, acceptKey []byte, acceptRev int64) (ok bool, err error)
	// Purge deletes terminal tasks whose PurgeAfter is at or before now,
	// with their events and input records.
	Purge(now time.Time) (int64, error)
	// SetBackendState stores (replaces) the backend's state of a task,
	// or deletes it when data is nil; it goes with the task when the task
	// is purged. It changes neither the task's revision nor its events.
	SetBackendState(taskID string, data []byte) error
	// PurgeableBytes is RetainedBytes restricted to the tasks Purge(now)
	// would delete, read in the same transaction before it.
	PurgeableBytes(now time.Time) (map[string]int64, error)
}
