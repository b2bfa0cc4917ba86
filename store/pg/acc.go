// This file keeps the agent-control-center state in PostgreSQL
// (migrations/0017_acc.sql): it implements accdb.Driver, checked by
// store/storetest like store/sqlite.

package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentgw/agentgw/accbridge/accdb"
)

// ACC implements accdb.Driver.
type ACC struct{ db *DB }

var _ accdb.Driver = (*ACC)(nil)

// NewACC wraps a store opened with Open.
func NewACC(db *DB) *ACC { return &ACC{db: db} }

func wrapACC(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("accpg: %w", err)
}

// uniqueViolation is SQLSTATE 23505.
func uniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

func (s *ACC) Enroll(ctx context.Context, c accdb.Connector) error {
	_, err := s.db.Pool.Exec(ctx, `INSERT INTO acc_connectors (name, id, cert_sha256, created_at, revoked_at)
		VALUES ($1, $2, $3, $4, $5)`, c.Name, c.ID, c.CertSHA256, c.CreatedAt, c.RevokedAt)
	if uniqueViolation(err) {
		return accdb.ErrExists
	}
	return wrapACC(err)
}

const connCols = `name, id, cert_sha256, created_at, revoked_at`

func scanConn(row pgx.Row) (accdb.Connector, error) {
	var c accdb.Connector
	err := row.Scan(&c.Name, &c.ID, &c.CertSHA256, &c.CreatedAt, &c.RevokedAt)
	return c, err
}

func (s *ACC) one(ctx context.Context, where string, arg string) (accdb.Connector, bool, error) {
	c, err := scanConn(s.db.Pool.QueryRow(ctx, `SELECT `+connCols+` FROM acc_connectors WHERE `+where+` = $1`, arg))
	if errors.Is(err, pgx.ErrNoRows) {
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
	rows, err := s.db.Pool.Query(ctx, `SELECT `+connCols+` FROM acc_connectors ORDER BY name`)
	out, err := collect(rows, err, scanConn)
	return out, wrapACC(err)
}

func (s *ACC) Revoke(ctx context.Context, name, at string) (bool, error) {
	tag, err := s.db.Pool.Exec(ctx, `UPDATE acc_connectors SET revoked_at = CASE WHEN revoked_at = '' THEN $1 ELSE revoked_at END
		WHERE name = $2`, at, name)
	if err != nil {
		return false, wrapACC(err)
	}
	return tag.RowsAffected() > 0, nil
}

func (s *ACC) CreateRun(ctx context.Context, r accdb.Run) (accdb.Run, bool, error) {
	if r.State == "" {
		r.State = accdb.RunCreated
	}
	// A concurrent insert for the same task, from this process or another
	// instance, waits for the first and then inserts nothing; the read
	// below then sees the committed run.
	tag, err := s.db.Pool.Exec(ctx, `INSERT INTO acc_runs (task_id, run_id, connector_id, agent_id, state)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (task_id) DO NOTHING`, r.TaskID, r.RunID, r.ConnectorID, r.AgentID, string(r.State))
	if err != nil {
		return accdb.Run{}, false, wrapACC(err)
	}
	if tag.RowsAffected() == 1 {
		return r, true, nil
	}
	got, ok, err := s.RunByTask(ctx, r.TaskID)
	if err != nil {
		return accdb.Run{}, false, err
	}
	if !ok {
		return accdb.Run{}, false, errors.New("accpg: run vanished")
	}
	return got, false, nil
}

const runCols = `run_id, task_id, connector_id, agent_id, state`

func scanRun(row pgx.Row) (accdb.Run, error) {
	var r accdb.Run
	var st string
	err := row.Scan(&r.RunID, &r.TaskID, &r.ConnectorID, &r.AgentID, &st)
	r.State = accdb.RunState(st)
	return r, err
}

func (s *ACC) RunByTask(ctx context.Context, taskID string) (accdb.Run, bool, error) {
	r, err := scanRun(s.db.Pool.QueryRow(ctx, `SELECT `+runCols+` FROM acc_runs WHERE task_id = $1`, taskID))
	if errors.Is(err, pgx.ErrNoRows) {
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
		return fmt.Errorf("accpg: unknown run state %q", state)
	}
	_, err := s.db.Pool.Exec(ctx, `UPDATE acc_runs SET state = $1 WHERE run_id = $2 AND state <> 'done'`, string(state), runID)
	return wrapACC(err)
}

func (s *ACC) OpenRuns(ctx context.Context, connectorID string) ([]accdb.Run, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT `+runCols+` FROM acc_runs WHERE connector_id = $1 AND state <> 'done' ORDER BY run_id`, connectorID)
	out, err := collect(rows, err, scanRun)
	return out, wrapACC(err)
}
