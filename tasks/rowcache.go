package tasks

import "github.com/agentgw/agentgw/tasks/taskdb"

// The committer's row cache (issue 34). Every change of a task row goes
// through batch.commit (a compare-and-set on id, revision and source
// state); the committer is the single writer of a single instance, so the
// row that commit wrote is the row in the store until the next commit
// writes it again. The executor's mutations (progress, input requests,
// above all the settlement) start from that row instead of reading it
// back: the SELECT of the whole row was ~5 % of the gateway's CPU per echo
// call. The compare-and-set still guards every write, so a stale row can
// only make a transition fail (errGuard), never overwrite anything; any
// failed op or commit empties the cache, and the retry reads the store.
//
// In cluster mode other instances write rows too (claims, takeovers,
// cancellations routed by signal), so the cache is off there.

// rowCache reports whether the cache is in use.
func (e *Engine) rowCache() bool { return e.cl == nil }

// cachedOrLoad returns a private copy of the task's row: as this batch or
// the last committed batch wrote it, else read in the transaction.
func (b *batch) cachedOrLoad(id string) (*taskdb.Task, error) {
	if b.e.rowCache() && !b.dirty {
		if t, ok := b.written[id]; ok {
			return &t, nil
		}
		if t, ok := b.e.rows[id]; ok {
			return &t, nil
		}
	}
	return b.load(id)
}

// wrote records t as committed by this batch's transition.
func (b *batch) wrote(t *taskdb.Task) {
	if !b.e.rowCache() {
		return
	}
	if b.written == nil {
		b.written = map[string]taskdb.Task{}
	}
	b.written[t.ID] = *t
}

// applyRows moves the rows a committed batch wrote into the cache; a
// terminal row leaves it (nothing mutates a settled task). A batch with a
// failed op empties it instead.
func (b *batch) applyRows() {
	e := b.e
	if b.dirty {
		e.dropRows()
		return
	}
	if len(b.written) == 0 {
		return
	}
	if e.rows == nil {
		e.rows = map[string]taskdb.Task{}
	}
	for id, t := range b.written {
		if t.State.Terminal() {
			delete(e.rows, id)
		} else {
			e.rows[id] = t
		}
	}
}

// dropRows empties the cache: after a failure the store is the truth.
func (e *Engine) dropRows() { e.rows = nil }
