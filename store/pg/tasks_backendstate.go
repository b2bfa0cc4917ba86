// This file keeps the state a backend commits with a running task
// (migrations/0230_task_backend_state.sql): the MCP bridge's remote task
// handle, read again when the task is recovered after a restart or taken
// over by another member.

package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

func (d *Tasks) BackendState(ctx context.Context, taskID string) ([]byte, error) {
	var data []byte
	err := d.db.Pool.QueryRow(ctx, `SELECT data FROM task_backend_state WHERE task_id = $1`, taskID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("taskpg: backend state: %w", err)
	}
	return data, nil
}

func (t *TaskTx) SetBackendState(taskID string, data []byte) error {
	var err error
	if data == nil {
		_, err = t.exec(`DELETE FROM task_backend_state WHERE task_id = $1`, taskID)
	} else {
		_, err = t.exec(`INSERT INTO task_backend_state (task_id, data) VALUES ($1, $2)
			ON CONFLICT (task_id) DO UPDATE SET data = excluded.data`, taskID, data)
	}
	if err != nil {
		return fmt.Errorf("taskpg: set backend state: %w", err)
	}
	return nil
}
