// This file keeps the state a backend commits with a running task
// (migrations/0230_task_backend_state.sql): the MCP bridge's remote task
// handle, read again when the task is recovered after a restart.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

func (d *Tasks) BackendState(ctx context.Context, taskID string) ([]byte, error) {
	var data []byte
	err := d.db.Read.QueryRowContext(ctx, `SELECT data FROM task_backend_state WHERE task_id = ?`, taskID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tasksqlite: backend state: %w", err)
	}
	return data, nil
}

func (t *TaskTx) SetBackendState(taskID string, data []byte) error {
	var err error
	if data == nil {
		_, err = t.exec(`DELETE FROM task_backend_state WHERE task_id = ?`, taskID)
	} else {
		_, err = t.exec(`INSERT INTO task_backend_state (task_id, data) VALUES (?, ?)
			ON CONFLICT (task_id) DO UPDATE SET data = excluded.data`, taskID, data)
	}
	if err != nil {
		return fmt.Errorf("tasksqlite: set backend state: %w", err)
	}
	return nil
}
