package a2afront

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"sort"
	"sync"
	"time"
)

// taskIndex remembers the tasks this front started, per agent, for A2A
// 1.0 ListTasks and for the context id a client chose. It lives in memory:
// the XMPP task-state stays the truth for each task (GetTask reads it), but
// a restarted front lists only the tasks started since (docs/a2a.md).
type taskIndex struct {
	mu    sync.Mutex
	seq   uint64
	tasks map[string]*indexed // task id → entry
	max   int
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
	return &taskIndex{tasks: map[string]*indexed{}, max: max}
}

// add records a task the front started (idempotent: a retried message is
// the same task). The context id is the client's when it sent one.
func (x *taskIndex) add(agent, id, contextID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.tasks[id]; ok {
		if e.contextID == "" {
			e.contextID = contextID
		}
		return
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
	x.tasks[id] = &indexed{agent: agent, id: id, contextID: contextID, seq: x.seq, updated: time.Now()}
}

// touch notes a status change of a known task.
func (x *taskIndex) touch(id string, at time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.tasks[id]; ok && at.After(e.updated) {
		e.updated = at
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
