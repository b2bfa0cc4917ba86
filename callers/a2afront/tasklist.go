package a2afront

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/agentgw/agentgw/callers/a2afront/frontdb"
)

// taskIndex remembers the tasks this front started, per agent, for A2A
// 1.0 ListTasks and for the context id a client chose. It is queried in
// memory; with the front's store (--push-outbox) it is also kept there —
// a new task written at once, later updates flushed every second — and
// loaded at start, so a restarted front lists the tasks started before
// (docs/a2a.md). The XMPP task-state stays the truth for each task.
type taskIndex struct {
	mu    sync.Mutex
	seq   uint64
	tasks map[string]*indexed // task id → entry
	max   int
	db    frontdb.Store   // nil: memory only
	dirty map[string]bool // entries updated since the last flush
	log   *slog.Logger
}

type indexed struct {
	agent     string
	id        string
	contextID string
	seq       uint64    // creation order, the cursor's tie-breaker
	updated   time.Time // last status change the front saw
}

func newTaskIndex(max int) *taskIndex {
	if max <= 0 {
		max = 10000
	}
	return &taskIndex{tasks: map[string]*indexed{}, max: max, dirty: map[string]bool{}, log: slog.Default()}
}

// add records a task the front started (idempotent: a retried message is
// the same task). The context id is the client's when it sent one.
func (x *taskIndex) add(agent, id, contextID string) {
	x.mu.Lock()
	e, fresh := x.addLocked(agent, id, contextID)
	x.mu.Unlock()
	if fresh && x.db != nil {
		// Written before the client hears of the task: a crash right
		// after cannot drop it from ListTasks.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := x.db.PutTasks(ctx, []frontdb.Task{e.entry()}, x.max); err != nil {
			x.log.Warn("writing the task index failed; a restart may not list the task", "task", id, "error", err.Error())
		}
	}
}

func (e indexed) entry() frontdb.Task {
	return frontdb.Task{Agent: e.agent, ID: e.id, ContextID: e.contextID, Seq: e.seq, Updated: e.updated}
}

// addLocked records the task; fresh when it is new or gained its context.
func (x *taskIndex) addLocked(agent, id, contextID string) (indexed, bool) {
	if e, ok := x.tasks[id]; ok {
		if e.contextID == "" && contextID != "" {
			e.contextID = contextID
			return *e, true
		}
		return *e, false
	}
	if len(x.tasks) >= x.max {
		// Forget the least recently updated task: bounded memory.
		var old *indexed
		for _, e := range x.tasks {
			if old == nil || e.updated.Before(old.updated) {
				old = e
			}
		}
		delete(x.tasks, old.id)
	}
	x.seq++
	e := &indexed{agent: agent, id: id, contextID: contextID, seq: x.seq, updated: time.Now()}
	x.tasks[id] = e
	return *e, true
}

// load fills the index from the store (at start).
func (x *taskIndex) load(ctx context.Context) error {
	ts, err := x.db.Tasks(ctx, x.max)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, t := range ts {
		if _, ok := x.tasks[t.ID]; ok {
			continue
		}
		x.tasks[t.ID] = &indexed{agent: t.Agent, id: t.ID, contextID: t.ContextID, seq: t.Seq, updated: t.Updated}
		x.seq = max(x.seq, t.Seq)
	}
	return nil
}

// flushLoop writes updated entries to the store every second until ctx
// ends (then once more).
func (x *taskIndex) flushLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			x.flush(fctx)
			cancel()
			return
		case <-t.C:
			x.flush(ctx)
		}
	}
}

func (x *taskIndex) flush(ctx context.Context) {
	x.mu.Lock()
	var batch []frontdb.Task
	for id := range x.dirty {
		if e, ok := x.tasks[id]; ok {
			batch = append(batch, e.entry())
		}
	}
	clear(x.dirty)
	x.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if err := x.db.PutTasks(ctx, batch, x.max); err != nil && ctx.Err() == nil {
		x.log.Warn("writing the task index failed", "tasks", len(batch), "error", err.Error())
	}
}

// touch notes a status change of a known task.
func (x *taskIndex) touch(id string, at time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.tasks[id]; ok && at.After(e.updated) {
		e.updated = at
		if x.db != nil {
			x.dirty[id] = true
		}
	}
}

// contextOf is the task's A2A context: the client's, else one per task.
func (x *taskIndex) contextOf(id string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.tasks[id]; ok && e.contextID != "" {
		return e.contextID
	}
	return "ctx-" + id
}

// cursor is the position after an entry in (updated desc, seq desc) order.
type cursor struct {
	updated int64
	seq     uint64
}

func (c cursor) token() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(c.updated))
	binary.BigEndian.PutUint64(b[8:], c.seq)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

var errBadToken = errors.New("pageToken is not one this server issued")

func parseToken(s string) (*cursor, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return nil, errBadToken
	}
	return &cursor{updated: int64(binary.BigEndian.Uint64(b[:8])), seq: binary.BigEndian.Uint64(b[8:])}, nil
}

// after lists an agent's tasks (optionally of one context) most recently
// updated first, starting after c.
func (x *taskIndex) after(agent, contextID string, c *cursor) []indexed {
	x.mu.Lock()
	var out []indexed
	for _, e := range x.tasks {
		if e.agent == agent && (contextID == "" || x.ctxLocked(e) == contextID) {
			out = append(out, *e)
		}
	}
	x.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	if c == nil {
		return out
	}
	i := sort.Search(len(out), func(i int) bool {
		u := out[i].updated.UnixNano()
		return u < c.updated || (u == c.updated && out[i].seq < c.seq)
	})
	return out[i:]
}

func (x *taskIndex) ctxLocked(e *indexed) string {
	if e.contextID != "" {
		return e.contextID
	}
	return "ctx-" + e.id
}

// less orders by last update, newest first, then by creation, newest first.
func less(a, b indexed) bool {
	if !a.updated.Equal(b.updated) {
		return a.updated.After(b.updated)
	}
	return a.seq > b.seq
}
