package pg

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

var _ taskdb.OwnLister = (*Tasks)(nil)

// OwnTasks lists one caller's tasks newest first (the task-list
// extension), from the index tasks_caller_created.
func (d *Tasks) OwnTasks(ctx context.Context, q taskdb.OwnQuery) ([]taskdb.Task, error) {
	if q.Caller == "" {
		return nil, nil
	}
	args := []any{q.Caller}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where := `caller = $1`
	if q.TaskID != "" {
		where += ` AND id = ` + arg(q.TaskID)
	}
	if q.State != "" {
		where += ` AND state = ` + arg(q.State)
	}
	if q.Before != nil {
		c, id := arg(q.Before.CreatedNS), arg(q.Before.ID)
		where += ` AND (created_ns < ` + c + ` OR (created_ns = ` + c + ` AND id < ` + id + `))`
	}
	if q.Limit <= 0 || q.Limit > taskdb.MaxOwnPage {
		q.Limit = taskdb.MaxOwnPage
	}
	rows, err := d.db.Pool.Query(ctx, `SELECT id, caller, endpoint, tool, api_version, state, revision,
		created_ns, updated_ns, retain_until_ns, cancel_revision, result IS NOT NULL
		FROM tasks WHERE `+where+` ORDER BY created_ns DESC, id DESC LIMIT `+arg(q.Limit), args...)
	if err != nil {
		return nil, fmt.Errorf("taskpg: own tasks: %w", err)
	}
	return collect(rows, nil, func(row pgx.Row) (taskdb.Task, error) {
		var (
			t                        taskdb.Task
			state                    string
			created, updated, retain int64
			cancelRev                *int64
			hasResult                bool
		)
		if err := row.Scan(&t.ID, &t.Caller, &t.Endpoint, &t.Tool, &t.APIVersion, &state, &t.Revision,
			&created, &updated, &retain, &cancelRev, &hasResult); err != nil {
			return t, fmt.Errorf("taskpg: own tasks: %w", err)
		}
		t.State = agentproto.State(state)
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
