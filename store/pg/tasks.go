// This file stores the task engine's rows in PostgreSQL (migration
// migrations/0002_tasks.sql): it implements taskdb.Driver over a pgx pool,
// checked by store/storetest like store/sqlite.
//
// Group commit is the engine's, as with SQLite: one Begin per batch, one
// savepoint per operation, one COMMIT (one WAL flush) for the batch.
// Several instances may write at once: a replay is decided by the unique
// (caller, endpoint, request_id) key — a concurrent insert of the same key
// waits for the first transaction and then inserts nothing — and every
// update is a compare-and-set on (id, revision, state) that PostgreSQL
// re-checks on the latest row version after waiting for its lock.

package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// Tasks implements taskdb.Driver.
type Tasks struct{ db *DB }

var _ taskdb.Driver = (*Tasks)(nil)

// NewTasks wraps an open, migrated store.
func NewTasks(db *DB) *Tasks { return &Tasks{db: db} }

const taskColumns = `id, caller, route, endpoint, request_id, tool, api_version, manifest_hash,
	arguments, fingerprint, deadline, deadline_ns, state, revision, dispatched,
	created_ns, updated_ns, retain_until_ns, purge_after_ns, input_request_id,
	result, cancel_key, cancel_revision, delegation_depth, owner`

func scanTask(s pgx.Row) (*taskdb.Task, error) {
	var (
		t                               taskdb.Task
		state                           string
		deadline, inputReq              *string
		deadlineNS, cancelRev           *int64
		created, updated, retain, purge int64
	)
	err := s.Scan(&t.ID, &t.Caller, &t.Route, &t.Endpoint, &t.RequestID, &t.Tool, &t.APIVersion,
		&t.ManifestHash, &t.Arguments, &t.Fingerprint, &deadline, &deadlineNS, &state,
		&t.Revision, &t.Dispatched, &created, &updated, &retain, &purge, &inputReq, &t.Result,
		&t.CancelKey, &cancelRev, &t.DelegationDepth, &t.Owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("taskpg: read task: %w", err)
	}
	t.State = agentproto.State(state)
	if deadline != nil {
		t.Deadline = *deadline
	}
	if deadlineNS != nil {
		t.DeadlineAt = fromNS(*deadlineNS)
	}
	t.Created, t.Updated, t.RetainUntil, t.PurgeAfter = fromNS(created), fromNS(updated), fromNS(retain), fromNS(purge)
	if inputReq != nil {
		t.InputRequest = *inputReq
	}
	if cancelRev != nil {
		t.CancelRev = *cancelRev
	}
	return &t, nil
}

func ns(t time.Time) int64 { return t.UnixNano() }

func fromNS(n int64) time.Time { return time.Unix(0, n).UTC() }

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deadlineArgs(t *taskdb.Task) (*string, *int64) {
	if t.Deadline == "" {
		return nil, nil
	}
	n := ns(t.DeadlineAt)
	return &t.Deadline, &n
}

func cancelRev(t *taskdb.Task) *int64 {
	if t.CancelKey == nil {
		return nil
	}
	return &t.CancelRev
}

// Task reads one task from committed state.
func (d *Tasks) Task(ctx context.Context, id string) (*taskdb.Task, error) {
	return scanTask(d.db.Pool.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id))
}

// TaskByRequest reads the replay record of a request from committed state.
func (d *Tasks) TaskByRequest(ctx context.Context, caller, endpoint, requestID string) (*taskdb.Task, error) {
	return scanTask(d.db.Pool.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE caller = $1 AND endpoint = $2 AND request_id = $3`, caller, endpoint, requestID))
}

const inputColumns = `task_id, request_id, status, request, expires_at, created_revision, accept_key, accept_revision`

func scanInput(s pgx.Row) (*taskdb.Input, error) {
	var (
		in        taskdb.Input
		expires   *string
		acceptRev *int64
	)
	err := s.Scan(&in.TaskID, &in.RequestID, &in.Status, &in.Request, &expires, &in.CreatedRev, &in.AcceptKey, &acceptRev)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("taskpg: read input: %w", err)
	}
	if expires != nil {
		in.ExpiresAt = *expires
	}
	if acceptRev != nil {
		in.AcceptRev = *acceptRev
	}
	return &in, nil
}

// TaskState reads a task and its pending input from one snapshot (a
// repeatable-read transaction), so the two agree.
func (d *Tasks) TaskState(ctx context.Context, id string) (*taskdb.Task, *taskdb.Input, error) {
	tx, err := d.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, fmt.Errorf("taskpg: task state: %w", err)
	}
	defer tx.Rollback(ctx)
	t, err := scanTask(tx.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id))
	if err != nil || t == nil || t.InputRequest == "" {
		return t, nil, err
	}
	in, err := scanInput(tx.QueryRow(ctx, `SELECT `+inputColumns+` FROM task_inputs
		WHERE task_id = $1 AND request_id = $2`, id, t.InputRequest))
	return t, in, err
}

// Events lists a task's committed events in revision order.
func (d *Tasks) Events(ctx context.Context, taskID string) ([]taskdb.Event, error) {
	rows, err := d.db.Pool.Query(ctx, `SELECT task_id, revision, event_id, type, payload, created_ns
		FROM task_events WHERE task_id = $1 ORDER BY revision`, taskID)
	out, err := collect(rows, err, func(row pgx.Row) (taskdb.Event, error) {
		var e taskdb.Event
		var typ string
		var created int64
		if err := row.Scan(&e.TaskID, &e.Revision, &e.EventID, &typ, &e.Payload, &created); err != nil {
			return e, err
		}
		e.Type, e.Created = agentproto.EventType(typ), fromNS(created)
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("taskpg: events: %w", err)
	}
	return out, nil
}

// Unsettled lists every non-terminal task.
func (d *Tasks) Unsettled(ctx context.Context) ([]taskdb.Task, error) {
	rows, err := d.db.Pool.Query(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE result IS NULL ORDER BY created_ns, id`)
	if err != nil {
		return nil, fmt.Errorf("taskpg: unsettled: %w", err)
	}
	return collectTasks(rows)
}

// RetainedBytes sums arguments and result of every terminal task per caller.
func (d *Tasks) RetainedBytes(ctx context.Context) (map[string]int64, error) {
	rows, err := d.db.Pool.Query(ctx, `SELECT caller, SUM(length(arguments) + length(result))::bigint
		FROM tasks WHERE result IS NOT NULL GROUP BY caller`)
	if err != nil {
		return nil, fmt.Errorf("taskpg: retained bytes: %w", err)
	}
	return scanBytes(rows)
}

func scanBytes(rows pgx.Rows) (map[string]int64, error) {
	out := map[string]int64{}
	err := each(rows, nil, func(row pgx.Row) error {
		var caller string
		var n int64
		if err := row.Scan(&caller, &n); err != nil {
			return err
		}
		out[caller] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("taskpg: retained bytes: %w", err)
	}
	return out, nil
}

// VersionReferenced reports whether any stored task pins endpoint@version.
func (d *Tasks) VersionReferenced(ctx context.Context, endpoint, version string) (bool, error) {
	var ok bool
	err := d.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE endpoint = $1 AND api_version = $2)`,
		endpoint, version).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("taskpg: version referenced: %w", err)
	}
	return ok, nil
}

// HasTask reports whether caller has any stored task at endpoint.
func (d *Tasks) HasTask(ctx context.Context, caller, endpoint string) (bool, error) {
	var ok bool
	err := d.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE caller = $1 AND endpoint = $2)`,
		caller, endpoint).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("taskpg: has task: %w", err)
	}
	return ok, nil
}

// Begin starts the read-committed write transaction of one group commit.
// Nothing is sent yet: BEGIN travels with the first statement.
func (d *Tasks) Begin(ctx context.Context) (taskdb.Tx, error) {
	conn, err := d.db.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("taskpg: begin: %w", err)
	}
	return &TaskTx{conn: conn, ctx: ctx, pending: []string{"BEGIN"}}, nil
}

// TaskTx implements taskdb.Tx on one pooled connection. The control
// statements of a group commit (BEGIN, SAVEPOINT, RELEASE, ROLLBACK TO)
// are queued and sent in one pipelined batch with the next data statement
// or the COMMIT, so an admission costs one round trip in the batch instead
// of three: on a network the round trips, not the work, bound the
// committer.
type TaskTx struct {
	conn    *pgxpool.Conn
	ctx     context.Context
	pending []string
	begun   bool // BEGIN has been sent
}

// send runs the queued control statements and q in one batch and returns
// the first error. result, if set, reads q's result from the batch.
func (t *TaskTx) send(q string, args []any, result func(br pgx.BatchResults) error) error {
	if t.conn == nil {
		return errors.New("taskpg: transaction is closed")
	}
	if slices.Contains(t.pending, rollbackTo) {
		// The transaction may be aborted until ROLLBACK TO has run, and
		// the batch below would first prepare q: run the queue on its
		// own (the simple protocol prepares nothing). Only a failed
		// operation takes this extra round trip.
		if len(t.pending) > 0 && t.pending[0] == "BEGIN" {
			t.begun = true
		}
		_, err := t.conn.Exec(t.ctx, strings.Join(t.pending, "; "), pgx.QueryExecModeSimpleProtocol)
		t.pending = t.pending[:0]
		if err != nil {
			return err
		}
	}
	b := &pgx.Batch{}
	for _, p := range t.pending {
		b.Queue(p)
	}
	b.Queue(q, args...)
	if len(t.pending) > 0 && t.pending[0] == "BEGIN" {
		t.begun = true
	}
	n := len(t.pending)
	t.pending = t.pending[:0]
	br := t.conn.SendBatch(t.ctx, b)
	var first error
	for range n {
		if _, err := br.Exec(); err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = result(br)
	} else {
		_, _ = br.Exec()
	}
	if err := br.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

func (t *TaskTx) exec(q string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := t.send(q, args, func(br pgx.BatchResults) error {
		var err error
		tag, err = br.Exec()
		return err
	})
	return tag, err
}

// queryRow runs a one-row query; the returned row holds its outcome.
func (t *TaskTx) queryRow(q string, args ...any) pgx.Row {
	return &deferredRow{t: t, q: q, args: args}
}

type deferredRow struct {
	t    *TaskTx
	q    string
	args []any
}

func (r *deferredRow) Scan(dest ...any) error {
	return r.t.send(r.q, r.args, func(br pgx.BatchResults) error { return br.QueryRow().Scan(dest...) })
}

// query runs a many-row query after flushing the queue in its own round
// trip (only the periodic purge reads rows in a transaction).
func (t *TaskTx) query(q string, args ...any) (pgx.Rows, error) {
	if len(t.pending) > 0 {
		if _, err := t.exec(`SELECT 1`); err != nil {
			return nil, err
		}
	}
	return t.conn.Query(t.ctx, q, args...)
}

func (t *TaskTx) Savepoint() error {
	t.pending = append(t.pending, `SAVEPOINT op`)
	return nil
}

func (t *TaskTx) Release() error {
	t.pending = append(t.pending, `RELEASE SAVEPOINT op`)
	return nil
}

// RollbackTo undoes the operation; it also clears PostgreSQL's aborted
// state after a failed statement, so the batch goes on.
func (t *TaskTx) RollbackTo() error {
	t.pending = append(t.pending, rollbackTo, `RELEASE SAVEPOINT op`)
	return nil
}

const rollbackTo = `ROLLBACK TO SAVEPOINT op`

// Commit sends the queue and COMMIT together. PostgreSQL answers COMMIT
// of a transaction that an unrecovered error aborted with ROLLBACK, not
// an error: that is reported as a failed commit.
func (t *TaskTx) Commit() error {
	var tag pgconn.CommandTag
	err := t.send(`COMMIT`, nil, func(br pgx.BatchResults) error {
		var err error
		tag, err = br.Exec()
		return err
	})
	if err == nil && tag.String() != "COMMIT" {
		err = fmt.Errorf("the transaction was rolled back (%s)", tag.String())
	}
	if err != nil {
		t.Rollback()
		return fmt.Errorf("taskpg: commit: %w", err)
	}
	t.conn.Release()
	t.conn = nil
	return nil
}

// Rollback ends the transaction; it is a no-op once it has ended.
func (t *TaskTx) Rollback() error {
	if t.conn == nil {
		return nil
	}
	var err error
	if t.begun {
		_, err = t.conn.Exec(t.ctx, `ROLLBACK`)
	}
	// The pool discards a connection that is still in a transaction.
	t.conn.Release()
	t.conn = nil
	return err
}

func (t *TaskTx) InsertTask(task *taskdb.Task) (bool, error) {
	dl, dlns := deadlineArgs(task)
	tag, err := t.exec(`INSERT INTO tasks (`+taskColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25)
		ON CONFLICT (caller, endpoint, request_id) DO NOTHING`,
		task.ID, task.Caller, task.Route, task.Endpoint, task.RequestID, task.Tool, task.APIVersion,
		task.ManifestHash, task.Arguments, task.Fingerprint, dl, dlns, string(task.State), task.Revision,
		task.Dispatched, ns(task.Created), ns(task.Updated), ns(task.RetainUntil),
		ns(task.PurgeAfter), nullString(task.InputRequest), task.Result,
		task.CancelKey, cancelRev(task), task.DelegationDepth, task.Owner)
	if err != nil {
		return false, fmt.Errorf("taskpg: insert task: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

func (t *TaskTx) Task(id string) (*taskdb.Task, error) {
	return scanTask(t.queryRow(`SELECT `+taskColumns+` FROM tasks WHERE id = $1`, id))
}

func (t *TaskTx) TaskByRequest(caller, endpoint, requestID string) (*taskdb.Task, error) {
	return scanTask(t.queryRow(`SELECT `+taskColumns+` FROM tasks
		WHERE caller = $1 AND endpoint = $2 AND request_id = $3`, caller, endpoint, requestID))
}

// UpdateTask is the compare-and-set of every transition.
func (t *TaskTx) UpdateTask(task *taskdb.Task, prevRev int64, from ...agentproto.State) (bool, error) {
	if len(from) == 0 || len(from) > 7 {
		return false, errors.New("taskpg: update needs 1 to 7 source states")
	}
	states := make([]string, len(from))
	for i, s := range from {
		states[i] = string(s)
	}
	var (
		tag pgconn.CommandTag
		err error
	)
	// Only a settlement writes result and purge_after_ns, as in store/sqlite.
	if task.Result == nil {
		tag, err = t.exec(`UPDATE tasks SET state = $1, revision = $2, dispatched = $3, updated_ns = $4,
			input_request_id = $5, cancel_key = $6, cancel_revision = $7
			WHERE id = $8 AND revision = $9 AND state = ANY($10::text[])`,
			string(task.State), task.Revision, task.Dispatched, ns(task.Updated),
			nullString(task.InputRequest), task.CancelKey, cancelRev(task),
			task.ID, prevRev, states)
	} else {
		tag, err = t.exec(`UPDATE tasks SET state = $1, revision = $2, updated_ns = $3, purge_after_ns = $4,
			input_request_id = $5, result = $6
			WHERE id = $7 AND revision = $8 AND state = ANY($9::text[])`,
			string(task.State), task.Revision, ns(task.Updated), ns(task.PurgeAfter),
			nullString(task.InputRequest), task.Result,
			task.ID, prevRev, states)
	}
	if err != nil {
		return false, fmt.Errorf("taskpg: update task: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

func (t *TaskTx) AppendEvent(e *taskdb.Event) error {
	_, err := t.exec(`INSERT INTO task_events (task_id, revision, event_id, type, payload, created_ns)
		VALUES ($1, $2, $3, $4, $5, $6)`, e.TaskID, e.Revision, e.EventID, string(e.Type), e.Payload, ns(e.Created))
	if err != nil {
		return fmt.Errorf("taskpg: append event: %w", err)
	}
	return nil
}

func (t *TaskTx) InsertInput(in *taskdb.Input) error {
	var acceptRev *int64
	if in.AcceptKey != nil {
		acceptRev = &in.AcceptRev
	}
	_, err := t.exec(`INSERT INTO task_inputs (`+inputColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		in.TaskID, in.RequestID, in.Status, in.Request, nullString(in.ExpiresAt), in.CreatedRev,
		in.AcceptKey, acceptRev)
	if err != nil {
		return fmt.Errorf("taskpg: insert input: %w", err)
	}
	return nil
}

func (t *TaskTx) Input(taskID, requestID string) (*taskdb.Input, error) {
	return scanInput(t.queryRow(`SELECT `+inputColumns+` FROM task_inputs
		WHERE task_id = $1 AND request_id = $2`, taskID, requestID))
}

func (t *TaskTx) SetInputStatus(taskID, requestID, status string, acceptKey []byte, acceptRev int64) (bool, error) {
	var rev *int64
	if acceptKey != nil {
		rev = &acceptRev
	}
	tag, err := t.exec(`UPDATE task_inputs SET status = $1, accept_key = $2, accept_revision = $3
		WHERE task_id = $4 AND request_id = $5 AND status = 'pending'`,
		status, acceptKey, rev, taskID, requestID)
	if err != nil {
		return false, fmt.Errorf("taskpg: input status: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

func (t *TaskTx) Purge(now time.Time) (int64, error) {
	tag, err := t.exec(`DELETE FROM tasks WHERE result IS NOT NULL AND purge_after_ns <= $1`, ns(now))
	if err != nil {
		return 0, fmt.Errorf("taskpg: purge: %w", err)
	}
	return tag.RowsAffected(), nil
}

func (t *TaskTx) PurgeableBytes(now time.Time) (map[string]int64, error) {
	rows, err := t.query(`SELECT caller, SUM(length(arguments) + length(result))::bigint
		FROM tasks WHERE result IS NOT NULL AND purge_after_ns <= $1 GROUP BY caller`, ns(now))
	if err != nil {
		return nil, fmt.Errorf("taskpg: purgeable bytes: %w", err)
	}
	return scanBytes(rows)
}

// TaskCounts reads the number of tasks in each state (the metrics).
func (db *DB) TaskCounts(ctx context.Context) (map[string]int, error) {
	rows, err := db.Pool.Query(ctx, `SELECT state, count(*) FROM tasks GROUP BY state`)
	counts, err := collect(rows, err, func(r pgx.Row) (stateCount, error) {
		var c stateCount
		return c, r.Scan(&c.state, &c.n)
	})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, c := range counts {
		out[c.state] = c.n
	}
	return out, nil
}

type stateCount struct {
	state string
	n     int
}
