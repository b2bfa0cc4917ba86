package tasks

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// ListQuery asks for a page of one caller's tasks (the task-list
// extension, docs/task-list.md), newest first.
type ListQuery struct {
	// After is the cursor of the last task of the previous page ("" for
	// the first page).
	After string
	// State, when set, keeps only tasks in that state.
	State agentproto.State
	// TaskID, when set, lists that task only (when it is the caller's).
	TaskID string
	// Max bounds the page (1..MaxListPage; 0 means MaxListPage).
	Max int
}

// MaxListPage is the largest page the task list serves.
const MaxListPage = 50

// Listed is one task of a list page.
type Listed struct {
	TaskID, Endpoint, Tool, APIVersion string
	State                              agentproto.State
	Revision                           int64
	Created, Updated, RetainUntil      time.Time
	ResultAvailable                    bool
	// CancelRevision is the revision at which a cancellation was
	// accepted, 0 when none was.
	CancelRevision int64
	// Cursor is this task's position: the After of the next page.
	Cursor string
}

// ListPage is one page; More says a further page may hold tasks.
type ListPage struct {
	Tasks []Listed
	More  bool
}

// List pages the caller's own tasks, newest first, from the store; the
// caller is the requester the wire resolved, exactly as for State and
// Cancel. A driver without the listing answers ErrServiceUnavailable.
func (e *Engine) List(ctx context.Context, caller string, q ListQuery) (*ListPage, error) {
	l, ok := e.db.(taskdb.OwnLister)
	if !ok {
		return nil, reject(ErrServiceUnavailable, "task list")
	}
	if caller == "" {
		return nil, reject(ErrNotFound, "task")
	}
	if q.Max < 0 || q.Max > MaxListPage {
		return nil, reject(ErrBadRequest, "max out of range")
	}
	if q.Max == 0 {
		q.Max = MaxListPage
	}
	if q.State != "" && !q.State.Known() {
		return nil, reject(ErrBadRequest, "unknown state")
	}
	if q.TaskID != "" && !ids.Valid(q.TaskID) {
		return nil, reject(ErrBadRequest, "invalid task-id")
	}
	dq := taskdb.OwnQuery{Caller: caller, TaskID: q.TaskID, State: string(q.State), Limit: q.Max + 1}
	if q.After != "" {
		pos, ok := decodeCursor(q.After)
		if !ok {
			return nil, reject(ErrBadRequest, "invalid cursor")
		}
		dq.Before = &pos
	}
	ts, err := l.OwnTasks(ctx, dq)
	if err != nil {
		return nil, err
	}
	page := &ListPage{Tasks: []Listed{}}
	if len(ts) > q.Max {
		ts, page.More = ts[:q.Max], true
	}
	for _, t := range ts {
		page.Tasks = append(page.Tasks, Listed{
			TaskID: t.ID, Endpoint: t.Endpoint, Tool: t.Tool, APIVersion: t.APIVersion, State: t.State,
			Revision: t.Revision, Created: t.Created, Updated: t.Updated, RetainUntil: t.RetainUntil,
			ResultAvailable: t.State.Terminal() && t.Result != nil, CancelRevision: t.CancelRev,
			Cursor: encodeCursor(taskdb.Position{CreatedNS: t.Created.UnixNano(), ID: t.ID}),
		})
	}
	return page, nil
}

var cursorEnc = base64.RawURLEncoding

// A cursor is base64url of "<created ns>.<task-id>": opaque to callers,
// validated here (bounded, the ID's alphabet), never reflected.
func encodeCursor(p taskdb.Position) string {
	return cursorEnc.EncodeToString([]byte(strconv.FormatInt(p.CreatedNS, 10) + "." + p.ID))
}

func decodeCursor(s string) (taskdb.Position, bool) {
	if len(s) > 256 {
		return taskdb.Position{}, false
	}
	b, err := cursorEnc.DecodeString(s)
	if err != nil {
		return taskdb.Position{}, false
	}
	n, id, ok := strings.Cut(string(b), ".")
	if !ok || !ids.Valid(id) {
		return taskdb.Position{}, false
	}
	c, err := strconv.ParseInt(n, 10, 64)
	if err != nil || c < 0 {
		return taskdb.Position{}, false
	}
	return taskdb.Position{CreatedNS: c, ID: id}, true
}
