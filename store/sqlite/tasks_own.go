package sqlite

import (
	"context"
	"fmt"

	"github.com/agentgw/agentgw/tasks/taskdb"
)

var _ taskdb.OwnLister = (*Tasks)(nil)

// OwnTasks lists one caller's tasks newest first (the task-list
// extension), from the index tasks_caller_created.
func (d *Tasks) OwnTasks(ctx context.Context, q taskdb.OwnQuery) ([]taskdb.Task, error) {
	if q.Caller == "" {
		return nil, nil
	}
	where, args := `caller = ?`, []any{q.Caller}
	if q.TaskID != "" {
		where += ` AND id = ?`
		args = append(args, q.TaskID)
	}
	if q.State != "" {
		where += ` AND state = ?`
		args = append(args, q.State)
	}
	if q.Before != nil {
		where += ` AND (created_ns < ? OR (created_ns = ? AND id < ?))`
		args = append(args, q.Before.CreatedNS, q.Before.CreatedNS, q.Before.ID)
	}
	if q.Limit <= 0 || q.Limit > taskdb.MaxOwnPage {
		q.Limit = taskdb.MaxOwnPage
	}
	args = append(args, q.Limit)
	rows, err := d.db.Read.QueryContext(ctx, `SELECT id, caller, endpoint, tool, api_version, state, revision,
		created_ns, updated_ns, retain_until_ns, cancel_revision, result IS NOT NULL
		FROM tasks WHERE `+where+` ORDER BY created_ns DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("tasksqlite: own tasks: %w", err)
	}
	return collect(rows, nil, func(s scanner) (taskdb.Task, error) {
		var (
			t                        taskdb.Task
			created, updated, retain int64
			cancelRev                *int64
			hasResult                bool
		)
		if err := s.Scan(&t.ID, &t.Caller, &t.Endpoint, &t.Tool, &t.APIVersion, &t.State, &t.Revision,
			&created, &updated, &retain, &cancelRev, &hasResult); err != nil {
			return t, fmt.Errorf("tasksqlite: own tasks: %w", err)
		}
		t.Created, t.Updated, t.RetainUntil = fromNS(created), fromNS(updated), fromNS(retain)
		if cancelRev != nil {
			t.CancelRev = *cancelRev
		}
		if hasResult {
			t.Result = []byte{}
		}
		return t, nil
	})
}
