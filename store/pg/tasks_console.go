package pg

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentgw/agentgw/tasks/taskdb"
)

var _ taskdb.Lister = (*Tasks)(nil)

// Recent lists tasks newest first for the operator console.
func (d *Tasks) Recent(ctx context.Context, q taskdb.RecentQuery) ([]taskdb.Task, error) {
	where := `strpos(lower(id || ' ' || endpoint || ' ' || tool || ' ' || caller), $1) > 0`
	switch {
	case q.Live && !q.Settled:
		where += ` AND result IS NULL`
	case q.Settled && !q.Live:
		where += ` AND result IS NOT NULL`
	}
	if q.Limit <= 0 || q.Limit > 1000 {
		q.Limit = 1000
	}
	rows, err := d.db.Pool.Query(ctx, `SELECT `+taskColumns+` FROM tasks WHERE `+where+`
		ORDER BY created_ns DESC, id DESC LIMIT $2 OFFSET $3`, strings.ToLower(q.Search), q.Limit, max(q.Offset, 0))
	if err != nil {
		return nil, fmt.Errorf("taskpg: recent: %w", err)
	}
	return collectTasks(rows)
}
