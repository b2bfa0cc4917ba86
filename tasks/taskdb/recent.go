package taskdb

import "context"

// RecentQuery selects tasks for an operator's list (the web console),
// newest first, whoever invoked them.
type RecentQuery struct {
	// Search is a case-insensitive substring of the task ID, endpoint,
	// tool or caller; "" matches every task.
	Search string
	// Live keeps only unsettled tasks; Settled only terminal ones.
	Live, Settled bool
	Offset, Limit int
}

// Lister is implemented by the drivers (store/sqlite, store/pg) for the
// console's task list; it is not part of Driver, which the engine needs.
type Lister interface {
	Recent(ctx context.Context, q RecentQuery) ([]Task, error)
}
