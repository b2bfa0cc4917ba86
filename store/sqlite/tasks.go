// This file stores the task engine's rows in the gateway's SQLite
// database (migration 0002_tasks.sql): it implements taskdb.Driver over the
// store's single writer connection and its read-only pool.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// Tasks implements taskdb.Driver.
type Tasks struct {
	db *DB

	// Statements of the write path, prepared once on the single writer
	// connection: preparing the task statements (with their triggers) costs
	// more than running them.
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	pending map[string]bool
	reads   map[string]*sql.Stmt // on the read pool

	// The single instance's lease (cluster.go), under mu.
	instance        string
	joined, expires time.Time
}

// readRow runs a hot read-side query as a prepared statement on the read
// pool (database/sql prepares it again on each pooled connection).
func (d *Tasks) readRow(ctx context.Context, q string, args ...any) *sql.Row {
	d.mu.Lock()
	s, ok := d.reads[q]
	d.mu.Unlock()
	if !ok {
		var err error
		if s, err = d.db.Read.PrepareContext(ctx, q); err != nil {
			return d.db.Read.QueryRowContext(ctx, q, args...)
		}
		d.mu.Lock()
		if d.reads == nil {
			d.reads = map[string]*sql.Stmt{}
		}
		if prev, ok := d.reads[q]; ok {
			s.Close()
			s = prev
		} else {
			d.reads[q] = s
		}
		d.mu.Unlock()
	}
	return s.QueryRowContext(ctx, args...)
}

// stmt returns the cached statement for q. Inside a transaction the
// single writer connection is taken, so a statement seen for the first
// time there cannot be prepared on the pool (that would wait for the
// connection forever): it is prepared on the transaction instead, and
// queued to be prepared for the cache before the next transaction begins.
func (d *Tasks) stmt(ctx context.Context, q string) (*sql.Stmt, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.stmts[q]; ok {
		return s, true
	}
	if d.pending == nil {
		d.pending = map[string]bool{}
	}
	d.pending[q] = true
	return nil, false
}

// preparePending fills the cache with statements first seen inside a
// transaction. It runs before a transaction begins, when the writer
// connection is free.
func (d *Tasks) preparePending(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for q := range d.pending {
		s, err := d.db.Write.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		if d.stmts == nil {
			d.stmts = map[string]*sql.Stmt{}
		}
		d.stmts[q] = s
		delete(d.pending, q)
	}
}

var _ taskdb.Driver = (*Tasks)(nil)

// NewTasks wraps an open, migrated store.
func NewTasks(db *DB) *Tasks { return &Tasks{db: db} }

const taskColumns = `id, caller, route, endpoint, request_id, tool, api_version, manifest_hash,
	arguments, fingerprint, deadline, deadline_ns, state, revision, dispatched,
	created_ns, updated_ns, retain_until_ns, purge_after_ns, input_request_id,
	result, cancel_key, cancel_revision, delegation_depth`

func scanTask(s scanner) (*taskdb.Task, error) {
	var (
		t                                     taskdb.Task
		deadline, inputReq                    sql.NullString
		deadlineNS, cancelRev                 sql.NullInt64
		created, updated, retain, purge, disp int64
	)
	err := s.Scan(&t.ID, &t.Caller, &t.Route, &t.Endpoint, &t.RequestID, &t.Tool, &t.APIVersion,
		&t.ManifestHash, &t.Arguments, &t.Fingerprint, &deadline, &deadlineNS, &t.State,
		&t.Revision, &disp, &created, &updated, &retain, &purge, &inputReq, &t.Result,
		&t.CancelKey, &cancelRev, &t.DelegationDepth)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tasksqlite: read task: %w", err)
	}
	t.Deadline = deadline.String
	if deadlineNS.Valid {
		t.DeadlineAt = fromNS(deadlineNS.Int64)
	}
	t.Dispatched = disp != 0
	t.Created, t.Updated, t.RetainUntil, t.PurgeAfter = fromNS(created), fromNS(updated), fromNS(retain), fromNS(purge)
	t.InputRequest = inputReq.String
	t.CancelRev = cancelRev.Int64
	return &t, nil
}

func ns(t time.Time) int64 { return t.UnixNano() }

func fromNS(n int64) time.Time { return time.Unix(0, n).UTC() }

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func deadlineArgs(t *taskdb.Task) (any, any) {
	if t.Deadline == "" {
		return nil, nil
	}
	return t.Deadline, ns(t.DeadlineAt)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Task reads one task from committed state.
func (d *Tasks) Task(ctx context.Context, id string) (*taskdb.Task, error) {
	return scanTask(d.readRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id))
}

// TaskByRequest reads the replay record of a request from committed state.
func (d *Tasks) TaskByRequest(ctx context.Context, caller, endpoint, requestID string) (*taskdb.Task, error) {
	return scanTask(d.readRow(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE caller = ? AND endpoint = ? AND request_id = ?`, caller, endpoint, requestID))
}

const inputColumns = `task_id, request_id, status, request, expires_at, created_revision, accept_key, accept_revision`

func scanInput(s scanner) (*taskdb.Input, error) {
	var (
		in        taskdb.Input
		expires   sql.NullString
		acceptRev sql.NullInt64
	)
	err := s.Scan(&in.TaskID, &in.RequestID, &in.Status, &in.Request, &expires, &in.CreatedRev, &in.AcceptKey, &acceptRev)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tasksqlite: read input: %w", err)
	}
	in.ExpiresAt = expires.String
	in.AcceptRev = acceptRev.Int64
	return &in, nil
}

// TaskState reads a task and its pending input in one read transaction, so
// the two agree.
func (d *Tasks) TaskState(ctx context.Context, id string) (*taskdb.Task, *taskdb.Input, error) {
	tx, err := d.db.Read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("tasksqlite: task state: %w", err)
	}
	defer tx.Rollback()
	t, err := scanTask(tx.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id))
	if err != nil || t == nil || t.InputRequest == "" {
		return t, nil, err
	}
	in, err := scanInput(tx.QueryRowContext(ctx, `SELECT `+inputColumns+` FROM task_inputs
		WHERE task_id = ? AND request_id = ?`, id, t.InputRequest))
	return t, in, err
}

// Events lists a task's committed events in revision order.
func (d *Tasks) Events(ctx context.Context, taskID string) ([]taskdb.Event, error) {
	rows, err := d.db.Read.QueryContext(ctx, `SELECT task_id, revision, event_id, type, payload, created_ns
		FROM task_events WHERE task_id = ? ORDER BY revision`, taskID)
	out, err := collect(rows, err, func(row scanner) (taskdb.Event, error) {
		var e taskdb.Event
		var created int64
		if err := row.Scan(&e.TaskID, &e.Revision, &e.EventID, &e.Type, &e.Payload, &created); err != nil {
			return e, err
		}
		e.Created = fromNS(created)
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("tasksqlite: events: %w", err)
	}
	return out, nil
}

// Unsettled lists every non-terminal task.
func (d *Tasks) Unsettled(ctx context.Context) ([]taskdb.Task, error) {
	rows, err := d.db.Read.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE result IS NULL ORDER BY created_ns, id`)
	if err != nil {
		return nil, fmt.Errorf("tasksqlite: unsettled: %w", err)
	}
	return collect(rows, nil, scanTaskValue)
}

// RetainedBytes sums arguments and result of every terminal task per caller.
func (d *Tasks) RetainedBytes(ctx context.Context) (map[string]int64, error) {
	rows, err := d.db.Read.QueryContext(ctx, `SELECT caller, SUM(length(arguments) + length(result))
		FROM tasks WHERE result IS NOT NULL GROUP BY caller`)
	if err != nil {
		return nil, fmt.Errorf("tasksqlite: retained bytes: %w", err)
	}
	return scanBytes(rows)
}

func scanBytes(rows *sql.Rows) (map[string]int64, error) {
	out := map[string]int64{}
	err := each(rows, nil, func(row scanner) error {
		var caller string
		var n int64
		if err := row.Scan(&caller, &n); err != nil {
			return fmt.Errorf("tasksqlite: retained bytes: %w", err)
		}
		out[caller] = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanTaskValue is scanTask for a list.
func scanTaskValue(s scanner) (taskdb.Task, error) {
	t, err := scanTask(s)
	if err != nil {
		return taskdb.Task{}, err
	}
	return *t, nil
}

// VersionReferenced reports whether any stored task pins endpoint@version.
func (d *Tasks) VersionReferenced(ctx context.Context, endpoint, version string) (bool, error) {
	var n int
	err := d.db.Read.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE endpoint = ? AND api_version = ?)`,
		endpoint, version).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("tasksqlite: version referenced: %w", err)
	}
	return n != 0, nil
}

// HasTask reports whether caller has any stored task at endpoint. The
// (caller, endpoint, request_id) key's index answers it, whether or not the
// endpoint exists.
func (d *Tasks) HasTask(ctx context.Context, caller, endpoint string) (bool, error) {
	var n int
	err := d.readRow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE caller = ? AND endpoint = ?)`, caller, endpoint).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("tasksqlite: has task: %w", err)
	}
	return n != 0, nil
}

// Begin starts an immediate write transaction on the single writer.
func (d *Tasks) Begin(ctx context.Context) (taskdb.Tx, error) {
	d.preparePending(ctx)
	tx, err := d.db.Write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("tasksqlite: begin: %w", err)
	}
	return &TaskTx{d: d, tx: tx, ctx: ctx}, nil
}

// TaskTx implements taskdb.Tx.
type TaskTx struct {
	d   *Tasks
	tx  *sql.Tx
	ctx context.Context
}

func (t *TaskTx) exec(q string, args ...any) (sql.Result, error) {
	s, ok := t.d.stmt(t.ctx, q)
	if !ok {
		return t.tx.ExecContext(t.ctx, q, args...)
	}
	return t.tx.StmtContext(t.ctx, s).ExecContext(t.ctx, args...)
}

func (t *TaskTx) queryRow(q string, args ...any) *sql.Row {
	s, ok := t.d.stmt(t.ctx, q)
	if !ok {
		return t.tx.QueryRowContext(t.ctx, q, args...)
	}
	return t.tx.StmtContext(t.ctx, s).QueryRowContext(t.ctx, args...)
}

func (t *TaskTx) Savepoint() error {
	_, err := t.exec(`SAVEPOINT op`)
	return err
}

func (t *TaskTx) Release() error {
	_, err := t.exec(`RELEASE op`)
	return err
}

func (t *TaskTx) RollbackTo() error {
	// ROLLBACK TO keeps the savepoint open; release it as well.
	if _, err := t.exec(`ROLLBACK TO op`); err != nil {
		return err
	}
	_, err := t.exec(`RELEASE op`)
	return err
}

func (t *TaskTx) Commit() error {
	if err := t.tx.Commit(); err != nil {
		return fmt.Errorf("tasksqlite: commit: %w", err)
	}
	return nil
}

func (t *TaskTx) Rollback() error { return t.tx.Rollback() }

func (t *TaskTx) InsertTask(task *taskdb.Task) (bool, error) {
	dl, dlns := deadlineArgs(task)
	res, err := t.exec(`INSERT INTO tasks (`+taskColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (caller, endpoint, request_id) DO NOTHING`,
		task.ID, task.Caller, task.Route, task.Endpoint, task.RequestID, task.Tool, task.APIVersion,
		task.ManifestHash, task.Arguments, task.Fingerprint, dl, dlns, task.State, task.Revision,
		boolInt(task.Dispatched), ns(task.Created), ns(task.Updated), ns(task.RetainUntil),
		ns(task.PurgeAfter), nullString(task.InputRequest), nullBytes(task.Result),
		nullBytes(task.CancelKey), cancelRev(task), task.DelegationDepth)
	if err != nil {
		return false, fmt.Errorf("tasksqlite: insert task: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func cancelRev(t *taskdb.Task) any {
	if t.CancelKey == nil {
		return nil
	}
	return t.CancelRev
}

func (t *TaskTx) Task(id string) (*taskdb.Task, error) {
	return scanTask(t.queryRow(`SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id))
}

func (t *TaskTx) TaskByRequest(caller, endpoint, requestID string) (*taskdb.Task, error) {
	return scanTask(t.queryRow(`SELECT `+taskColumns+` FROM tasks
		WHERE caller = ? AND endpoint = ? AND request_id = ?`, caller, endpoint, requestID))
}

// UpdateTask is the compare-and-set of every transition. The from list is
// padded to a fixed arity so one statement text serves every call.
func (t *TaskTx) UpdateTask(task *taskdb.Task, prevRev int64, from ...agentproto.State) (bool, error) {
	if len(from) == 0 || len(from) > 7 {
		return false, errors.New("tasksqlite: update needs 1 to 7 source states")
	}
	var st [7]any
	for i := range st {
		st[i] = string(from[min(i, len(from)-1)])
	}
	// Two statements: only a settlement writes result and purge_after_ns,
	// so only it touches the partial indexes keyed on them. Identity and
	// deadline columns never change.
	var (
		res sql.Result
		err error
	)
	if task.Result == nil {
		res, err = t.exec(`UPDATE tasks SET state = ?, revision = ?, dispatched = ?, updated_ns = ?,
			input_request_id = ?, cancel_key = ?, cancel_revision = ?
			WHERE id = ? AND revision = ? AND state IN (?, ?, ?, ?, ?, ?, ?)`,
			task.State, task.Revision, boolInt(task.Dispatched), ns(task.Updated),
			nullString(task.InputRequest), nullBytes(task.CancelKey), cancelRev(task),
			task.ID, prevRev, st[0], st[1], st[2], st[3], st[4], st[5], st[6])
	} else {
		res, err = t.exec(`UPDATE tasks SET state = ?, revision = ?, updated_ns = ?, purge_after_ns = ?,
			input_request_id = ?, result = ?
			WHERE id = ? AND revision = ? AND state IN (?, ?, ?, ?, ?, ?, ?)`,
			task.State, task.Revision, ns(task.Updated), ns(task.PurgeAfter),
			nullString(task.InputRequest), task.Result,
			task.ID, prevRev, st[0], st[1], st[2], st[3], st[4], st[5], st[6])
	}
	if err != nil {
		return false, fmt.Errorf("tasksqlite: update task: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t *TaskTx) AppendEvent(e *taskdb.Event) error {
	_, err := t.exec(`INSERT INTO task_events (task_id, revision, event_id, type, payload, created_ns)
		VALUES (?, ?, ?, ?, ?, ?)`, e.TaskID, e.Revision, e.EventID, e.Type, e.Payload, ns(e.Created))
	if err != nil {
		return fmt.Errorf("tasksqlite: append event: %w", err)
	}
	return nil
}

func (t *TaskTx) InsertInput(in *taskdb.Input) error {
	var acceptRev any
	if in.AcceptKey != nil {
		acceptRev = in.AcceptRev
	}
	_, err := t.exec(`INSERT INTO task_inputs (`+inputColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		in.TaskID, in.RequestID, in.Status, in.Request, nullString(in.ExpiresAt), in.CreatedRev,
		nullBytes(in.AcceptKey), acceptRev)
	if err != nil {
		return fmt.Errorf("tasksqlite: insert input: %w", err)
	}
	return nil
}

func (t *TaskTx) Input(taskID, requestID string) (*taskdb.Input, error) {
	return scanInput(t.queryRow(`SELECT `+inputColumns+` FROM task_inputs
		WHERE task_id = ? AND request_id = ?`, taskID, requestID))
}

func (t *TaskTx) SetInputStatus(taskID, requestID, status string, acceptKey []byte, acceptRev int64) (bool, error) {
	var rev any
	if acceptKey != nil {
		rev = acceptRev
	}
	res, err := t.exec(`UPDATE task_inputs SET status = ?, accept_key = ?, accept_revision = ?
		WHERE task_id = ? AND request_id = ? AND status = 'pending'`,
		status, nullBytes(acceptKey), rev, taskID, requestID)
	if err != nil {
		return false, fmt.Errorf("tasksqlite: input status: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (t *TaskTx) Purge(now time.Time) (int64, error) {
	res, err := t.exec(`DELETE FROM tasks WHERE result IS NOT NULL AND purge_after_ns <= ?`, ns(now))
	if err != nil {
		return 0, fmt.Errorf("tasksqlite: purge: %w", err)
	}
	return res.RowsAffected()
}

func (t *TaskTx) PurgeableBytes(now time.Time) (map[string]int64, error) {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT caller, SUM(length(arguments) + length(result))
		FROM tasks WHERE result IS NOT NULL AND purge_after_ns <= ? GROUP BY caller`, ns(now))
	if err != nil {
		return nil, fmt.Errorf("tasksqlite: purgeable bytes: %w", err)
	}
	return scanBytes(rows)
}

// TaskCounts reads the number of tasks in each state (the metrics).
func (db *DB) TaskCounts(ctx context.Context) (map[string]int, error) {
	rows, err := db.Read.QueryContext(ctx, `SELECT state, count(*) FROM tasks GROUP BY state`)
	counts, err := collect(rows, err, scanStateCount)
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

func scanStateCount(r scanner) (stateCount, error) {
	var c stateCount
	return c, r.Scan(&c.state, &c.n)
}
