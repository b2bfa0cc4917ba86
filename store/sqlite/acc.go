// This file keeps the agent-control-center state in the gateway's
// SQLite store (migrations/0017_acc.sql): it implements accdb.Driver,
// checked by store/storetest.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/agentgw/agentgw/accbridge/accdb"
)

// ACC implements accdb.Driver.
type ACC struct{ db *DB }

var _ accdb.Driver = (*ACC)(nil)

// NewACC wraps a store opened with Migrations.
func NewACC(db *DB) *ACC { return &ACC{db: db} }

func wrapACC(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("accsqlite: %w", err)
}

func (s *ACC) Enroll(ctx context.Context, c accdb.Connector) error {
	_, err := s.db.Write.ExecContext(ctx, `INSERT INTO acc_connectors (name, id, cert_sha256, created_at, revoked_at)
		VALUES (?, ?, ?, ?, ?)`, c.Name, c.ID, c.CertSHA256, c.CreatedAt, c.RevokedAt)
	if err != nil && strings.Contains(err.Error(), "UNIQUE") {
		return accdb.ErrExists
	}
	return wrapACC(err)
}

const connCols = `name, id, cert_sha256, created_at, revoked_at`

func scanConn(row interface{ Scan(...any) error }) (accdb.Connector, error) {
	var c accdb.Connector
	err := row.Scan(&c.Name, &c.ID, &c.CertSHA256, &c.CreatedAt, &c.RevokedAt)
	return c, err
}

func (s *ACC) one(ctx context.Context, where string, arg string) (accdb.Connector, bool, error) {
	c, err := scanConn(s.db.Read.QueryRowContext(ctx, `SELECT `+connCols+` FROM acc_connectors WHERE `+where+` = ?`, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return accdb.Connector{}, false, nil
	}
	if err != nil {
		return accdb.Connector{}, false, wrapACC(err)
	}
	return c, true, nil
}

func (s *ACC) Connector(ctx context.Context, name string) (accdb.Connector, bool, error) {
	return s.one(ctx, "name", name)
}

func (s *ACC) ConnectorByID(ctx context.Context, id string) (accdb.Connector, bool, error) {
	return s.one(ctx, "id", id)
}

func (s *ACC) Connectors(ctx context.Context) ([]accdb.Connector, error) {
	rows, err := s.db.Read.QueryContext(ctx, `SELECT `+connCols+` FROM acc_connectors ORDER BY name`)
	out, err := collect(rows, err, scanConn)
	return out, wrapACC(err)
}

func (s *ACC) Revoke(ctx context.Context, name, at string) (bool, error) {
	res, err := s.db.Write.ExecContext(ctx, `UPDATE acc_connectors SET revoked_at = CASE WHEN revoked_at = '' THEN ? ELSE revoked_at END
		WHERE name = ?`, at, name)
	if err != nil {
		return false, wrapACC(err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (s *ACC) CreateRun(ctx context.Context, r accdb.Run) (accdb.Run, bool, error) {
	if r.State == "" {
		r.State = accdb.RunCreated
	}
	res, err := s.db.Write.ExecContext(ctx, `INSERT INTO acc_runs (task_id, run_id, connector_id, agent_id, state)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING`, r.TaskID, r.RunID, r.ConnectorID, r.AgentID, string(r.State))
	if err != nil {
		return accdb.Run{}, false, wrapACC(err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return r, true, nil
	}
	got, ok, err := s.RunByTask(ctx, r.TaskID)
	if err != nil {
		return accdb.Run{}, false, err
	}
	if !ok {
		return accdb.Run{}, false, errors.New("accsqlite: run vanished")
	}
	return got, false, nil
}

const runCols = `run_id, task_id, connector_id, agent_id, state`

func scanRun(row interface{ Scan(...any) error }) (accdb.Run, error) {
	var r accdb.Run
	var st string
	err := row.Scan(&r.RunID, &r.TaskID, &r.ConnectorID, &r.AgentID, &st)
	r.State = accdb.RunState(st)
	return r, err
}

func (s *ACC) RunByTask(ctx context.Context, taskID string) (accdb.Run, bool, error) {
	r, err := scanRun(s.db.Read.QueryRowContext(ctx, `SELECT `+runCols+` FROM acc_runs WHERE task_id = ?`, taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return accdb.Run{}, false, nil
	}
	if err != nil {
		return accdb.Run{}, false, wrapACC(err)
	}
	return r, true, nil
}

func (s *ACC) SetRunState(ctx context.Context, runID string, state accdb.RunState) error {
	switch state {
	case accdb.RunCreated, accdb.RunAccepted, accdb.RunDone, accdb.RunOrphaned:
	default:
		return fmt.Errorf("accsqlite: unknown run state %q", state)
	}
	_, err := s.db.Write.ExecContext(ctx, `UPDATE acc_runs SET state = ? WHERE run_id = ? AND state <> 'done'`, string(state), runID)
	return wrapACC(err)
}

func (s *ACC) OpenRuns(ctx context.Context, connectorID string) ([]accdb.Run, error) {
	rows, err := s.db.Read.QueryContext(ctx, `SELECT `+runCols+` FROM acc_runs WHERE connector_id = ? AND state <> 'done' ORDER BY run_id`, connectorID)
	out, err := collect(rows, err, scanRun)
	return out, wrapACC(err)
}
