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

// capacityRefusal is the reason a caller may not be admitted another task
// (MaxActive, then the quotas), "" when it may. In cluster mode the active
// counts are the whole cluster's, read in this transaction under the
// cluster commit lock (see serialize); the retained-bytes budget stays
// this instance's.
func (b *batch) capacityRefusal(caller string) (string, error) {
	cfg := &b.e.cfg
	ctx, ok := b.clusterTx()
	if !ok {
		if b.e.active+b.delta >= cfg.MaxActive {
			return "task capacity exhausted", nil
		}
		return b.quotaRefusal(caller), nil
	}
	domain := b.e.remoteDomain(caller)
	all, byCaller, byDomain, err := ctx.CountActive(caller, domain)
	if err != nil {
		return "", err
	}
	switch {
	case all >= int64(cfg.MaxActive):
		return "task capacity exhausted", nil
	case cfg.MaxActivePerPrincipal > 0 && byCaller >= int64(cfg.MaxActivePerPrincipal):
		return "the caller's active task quota is exhausted", nil
	case domain != "" && cfg.MaxActivePerDomain > 0 && byDomain >= int64(cfg.MaxActivePerDomain):
		return "the remote domain's active task quota is exhausted", nil
	case cfg.MaxRetainedBytes > 0 && b.count(cRetained, caller) >= cfg.MaxRetainedBytes:
		return "the caller's retained result budget is exhausted", nil
	}
	return "", nil
}

// clusterTx is the batch's transaction as a cluster one, in cluster mode.
func (b *batch) clusterTx() (taskdb.ClusterTx, bool) {
	if b.e.cl == nil {
		return nil, false
	}
	ctx, ok := b.tx.(taskdb.ClusterTx)
	return ctx, ok
}

// serialize takes the cluster commit lock for this batch in cluster mode:
// every member's group commit holds it, so the admission and dispatch
// counts are exact for the cluster. It is taken first, before any row
// lock, so two members' batches cannot deadlock on it.
func (b *batch) serialize() error {
	if ctx, ok := b.clusterTx(); ok {
		return ctx.Serialize()
	}
	return nil
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
		b.onCommit(func() {
			if b.e.cl != nil {
				b.e.unmarkFull(ep) // a slot freed here
			}
			b.e.pump(ep)
		})
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

// localRunning is the running count pump releases against: this
// instance's own (in cluster mode a lower bound, checked at dispatch).
func (e *Engine) localRunning(endpoint string) int64 {
	return e.counts[cRunning][endpoint]
}

// mayDispatch reports whether an accepted task may take a backend slot
// now. A task released by pump owns a reserved slot; any other one waits
// behind those already waiting, so slots go out in admission order.
//
// In cluster mode the running count is the cluster's, read under the
// cluster commit lock; a task held by it waits until the sweep's re-pump
// (repumpEvery) or a local settlement finds a slot.
func (b *batch) mayDispatch(id, endpoint string) (bool, error) {
	limit := b.e.runningLimit(endpoint)
	if limit == 0 {
		return true, nil
	}
	_, rel := b.e.released[id]
	reserved := b.e.releasedN[endpoint]
	if rel {
		reserved--
	} else if len(b.e.waiting[endpoint]) > 0 {
		return false, nil
	}
	running := b.count(cRunning, endpoint)
	if ctx, ok := b.clusterTx(); ok {
		n, err := ctx.CountRunning(endpoint)
		if err != nil {
			return false, err
		}
		running = n
		if running+int64(reserved) >= int64(limit) {
			b.onCommit(func() { b.e.markFull(endpoint) })
		}
	}
	return running+int64(reserved) < int64(limit), nil
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
//
// In cluster mode an endpoint marked full (its last dispatch found the
// cluster's slots taken) is left to the sweep's re-pump, and released
// tasks are bounded by the limit alone: their dispatch counts the
// cluster's running tasks.
func (e *Engine) pump(endpoint string) {
	limit := e.runningLimit(endpoint)
	if e.cl != nil && e.cl.full[endpoint] {
		return
	}
	for len(e.waiting[endpoint]) > 0 && (limit == 0 || e.localRunning(endpoint)+int64(e.releasedN[endpoint]) < int64(limit)) {
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
