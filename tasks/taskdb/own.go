package taskdb

import "context"

// OwnQuery selects one caller's tasks for the task-list extension
// (urn:agentgw:task-list:0, docs/task-list.md), newest first: by created
// time, then by task ID, both descending, so a page boundary is a
// position that later admissions do not move.
type OwnQuery struct {
	// Caller is the bare JID whose tasks are listed; required.
	Caller string
	// TaskID, when set, selects that one task (of Caller) only.
	TaskID string
	// State, when set, keeps only tasks in that state.
	State string
	// Before, when set, starts the page after this position (exclusive).
	Before *Position
	// Limit bounds the page; the drivers cap it at MaxOwnPage.
	Limit int
}

// Position is a task's place in the newest-first order.
type Position struct {
	CreatedNS int64
	ID        string
}

// MaxOwnPage is the most tasks one OwnTasks call returns.
const MaxOwnPage = 100

// OwnLister is implemented by the drivers (store/sqlite, store/pg). The
// tasks it returns carry the listing's columns only: ID, Caller,
// Endpoint, Tool, APIVersion, State, Revision, Created, Updated,
// RetainUntil, CancelRev and whether a result is retained (Result is a
// non-nil empty slice then, never the payload).
type OwnLister interface {
	OwnTasks(ctx context.Context, q OwnQuery) ([]Task, error)
}
