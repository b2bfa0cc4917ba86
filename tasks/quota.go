package tasks

import (
	"strings"

	"github.com/agentgw/agentgw/tasks/taskdb"
)

// Quotas: non-terminal tasks per caller and per remote domain, stored bytes
// of a caller's terminal tasks, and dispatched tasks per backend. The
// counters are owned by the committer; an op changes them only through
// batch adjustments, applied when its batch commits.

type counter int

const (
	cActiveCaller counter = iota // non-terminal tasks by caller bare JID
	cActiveDomain                // non-terminal tasks by remote domain
	cRunning                     // dispatched unsettled tasks by endpoint
	cRetained                    // arguments+result bytes of terminal tasks by caller
	numCounters
)

type adjust struct {
	c   counter
	key string
	d   int64
}

type counterKey struct {
	c   counter
	key string
}

// add records an adjustment: in the journal (b.adj, truncated and undone
// when the op rolls back) and in the batch's running sums.
func (b *batch) add(c counter, key string, d int64) {
	if key == "" || d == 0 {
		return
	}
	b.adj = append(b.adj, adjust{c, key, d})
	if b.sums == nil {
		b.sums = map[counterKey]int64{}
	}
	b.sums[counterKey{c, key}] += d
}

// undoAdjust reverts the adjustments recorded after the first n.
func (b *batch) undoAdjust(n int) {
	for _, a := range b.adj[n:] {
		b.sums[counterKey{a.c, a.key}] -= a.d
	}
	b.adj = b.adj[:n]
}

// count is the committed value of a counter plus this batch's adjustments.
func (b *batch) count(c counter, key string) int64 {
	return b.e.counts[c][key] + b.sums[counterKey{c, key}]
}

func (e *Engine) applyAdjust(sums map[counterKey]int64) {
	for k, d := range sums {
		m := e.counts[k.c]
		if n := m[k.key] + d; n > 0 {
			m[k.key] = n
		} else {
			delete(m, k.key)
		}
	}
}

// remoteDomain is the domain whose quota a caller's tasks count against,
// "" for a local caller.
func (e *Engine) remoteDomain(caller string) string {
	if e.cfg.IsLocal != nil && e.cfg.IsLocal(caller) {
		return ""
	}
	d := caller
	if i := strings.LastIndexByte(caller, '@'); i >= 0 {
		d = caller[i+1:]
	}
	return strings.ToLower(d)
}

// countTask counts an unsettled task found at Start.
func (e *Engine) countTask(t *taskdb.Task) {
	e.counts[cActiveCaller][t.Caller]++
	if d := e.remoteDomain(t.Caller); d != "" {
		e.counts[cActiveDomain][d]++
	}
	if t.Dispatched {
		e.counts[cRunning][t.Endpoint]++
	}
}

// quotaRefusal is the reason a caller may not be admitted another task, ""
// when it may.
func (b *batch) quotaRefusal(caller string) string {
	cfg := &b.e.cfg
	if cfg.MaxActivePerPrincipal > 0 && b.count(cActiveCaller, caller) >= int64(cfg.MaxActivePerPrincipal) {
		return "the caller's active task quota is exhausted"
	}
	if d := b.e.remoteDomain(caller); d != "" && cfg.MaxActivePerDomain > 0 && b.count(cActiveDomain, d) >= int64(cfg.MaxActivePerDomain) {
		return "the remote domain's active task quota is exhausted"
	}
	if cfg.MaxRetainedBytes > 0 && b.count(cRetained, caller) >= cfg.MaxRetainedBytes {
		return "the caller's retained result budget is exhausted"
	}
	return ""
}

// admitted counts a newly admitted task.
func (b *batch) admitted(t *taskdb.Task) {
	b.add(cActiveCaller, t.Caller, 1)
	b.add(cActiveDomain, b.e.remoteDomain(t.Caller), 1)
}

// settled uncounts a task settling with payload and frees its backend slot.
func (b *batch) settled(t *taskdb.Task, payload []byte) {
	b.add(cActiveCaller, t.Caller, -1)
	b.add(cActiveDomain, b.e.remoteDomain(t.Caller), -1)
	b.add(cRetained, t.Caller, int64(len(t.Arguments)+len(payload)))
	if t.Dispatched {
		b.add(cRunning, t.Endpoint, -1)
		ep := t.Endpoint
		b.onCommit(func() { b.e.pump(ep) })
	}
}

// purge deletes expired terminal tasks and releases their retained bytes.
func (b *batch) purge() (int64, error) {
	now := b.now()
	freed, err := b.tx.PurgeableBytes(now)
	if err != nil {
		return 0, err
	}
	n, err := b.tx.Purge(now)
	if err != nil {
		return 0, err
	}
	for caller, bytes := range freed {
		b.add(cRetained, caller, -bytes)
	}
	return n, nil
}

// runningLimit is the concurrency limit of an endpoint's backend, 0 for
// none.
func (e *Engine) runningLimit(endpoint string) int {
	if e.cfg.RunningLimit != nil {
		if n := e.cfg.RunningLimit(endpoint); n > 0 {
			return n
		}
	}
	return max(e.cfg.MaxRunningPerBackend, 0)
}

// mayDispatch reports whether an accepted task may take a backend slot
// now. A task released by pump owns a reserved slot; any other one waits
// behind those already waiting, so slots go out in admission order.
func (b *batch) mayDispatch(id, endpoint string) bool {
	limit := b.e.runningLimit(endpoint)
	if limit == 0 {
		return true
	}
	_, rel := b.e.released[id]
	reserved := b.e.releasedN[endpoint]
	if rel {
		reserved--
	} else if len(b.e.waiting[endpoint]) > 0 {
		return false
	}
	return b.count(cRunning, endpoint)+int64(reserved) < int64(limit)
}

// hold keeps an accepted task waiting for a slot (after commit): a released
// task goes back to the front, a new one to the back.
func (e *Engine) hold(id, endpoint string) {
	if _, rel := e.released[id]; rel {
		e.unrelease(id)
		e.waiting[endpoint] = append([]string{id}, e.waiting[endpoint]...)
	} else {
		e.waiting[endpoint] = append(e.waiting[endpoint], id)
	}
	e.pump(endpoint)
}

// unrelease drops a task's reserved slot (it dispatched, or no longer
// needs one).
func (e *Engine) unrelease(id string) {
	ep, ok := e.released[id]
	if !ok {
		return
	}
	delete(e.released, id)
	if e.releasedN[ep]--; e.releasedN[ep] <= 0 {
		delete(e.releasedN, ep)
	}
}

// pump releases waiting tasks of an endpoint into free slots, each with a
// reserved slot and a durable dispatch. It runs after commits, in the
// committer.
func (e *Engine) pump(endpoint string) {
	limit := e.runningLimit(endpoint)
	for len(e.waiting[endpoint]) > 0 && (limit == 0 || e.counts[cRunning][endpoint]+int64(e.releasedN[endpoint]) < int64(limit)) {
		q := e.waiting[endpoint]
		id := q[0]
		if len(q) == 1 {
			delete(e.waiting, endpoint)
		} else {
			e.waiting[endpoint] = q[1:]
		}
		e.released[id] = endpoint
		e.releasedN[endpoint]++
		e.submitDurable(func(b *batch) error { return b.dispatch(id) })
	}
}
