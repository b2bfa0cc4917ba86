package tasks

import (
	"bytes"
	"math"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// Progress coalescing (spec, Security Considerations: gateways MUST
// rate-limit progress events). Each task has a budget of ProgressPerSecond
// progress revisions in any one-second window. Updates are merged into one
// pending value; a regular commit takes a slot only while fewer than
// budget-1 progress revisions were committed in the trailing second, so
// the last slot stays free for the forced flush of the pending value right
// before input_required or the terminal event. A value equal to the last
// committed one commits nothing. All decisions use the engine's clock.

// progressWindow is the span the budget applies to.
const progressWindow = time.Second

// regularSlots is how many rate-limited progress commits a window holds, 0
// for no limit.
func (e *Engine) regularSlots() int {
	n := e.cfg.ProgressPerSecond
	switch {
	case n < 0:
		return 0
	case n == 1:
		return 1 // no slot to keep: the final flush may make it two
	}
	return n - 1
}

// mergeProgress folds p into the pending update: fields p sets replace the
// pending ones, and the percent never goes down (the committed value is
// clamped the same way).
func mergeProgress(pending *Progress, p Progress) *Progress {
	m := Progress{}
	if pending != nil {
		m = *pending
	}
	if pct := p.Percent; pct != nil && !math.IsNaN(*pct) && !math.IsInf(*pct, 0) {
		if m.Percent == nil || *pct > *m.Percent {
			v := *pct
			m.Percent = &v
		}
	}
	if p.Stage != "" {
		m.Stage = p.Stage
	}
	if p.Message != "" {
		m.Message = p.Message
	}
	return &m
}

// slotFree reports whether a rate-limited commit may happen at now, and
// when not, when the next slot frees. Callers hold r.pmu.
func (r *run) slotFree(now time.Time) (bool, time.Time) {
	limit := r.e.regularSlots()
	if limit == 0 {
		return true, time.Time{}
	}
	cut := now.Add(-progressWindow)
	i := 0
	for i < len(r.progTimes) && !r.progTimes[i].After(cut) {
		i++
	}
	r.progTimes = r.progTimes[i:]
	if len(r.progTimes) < limit {
		return true, time.Time{}
	}
	return false, r.progTimes[len(r.progTimes)-limit].Add(progressWindow)
}

// offer merges p into the pending update and reports whether the caller
// should commit it now. Otherwise a flush is scheduled for the next free
// slot (unless one already is).
func (r *run) offer(p Progress) bool {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	r.pending = mergeProgress(r.pending, p)
	free, next := r.slotFree(r.e.clock.Now())
	if free {
		return true
	}
	r.armFlush(next)
	return false
}

// armFlush schedules the commit of the pending update at next. Callers hold
// r.pmu; the timer only queues an op, so a fake clock firing it at once
// does not re-enter r.pmu.
func (r *run) armFlush(next time.Time) {
	if r.flushTimer != nil || r.settled() {
		return
	}
	d := max(next.Sub(r.e.clock.Now()), 0)
	r.flushTimer = r.e.clock.AfterFunc(d, func() {
		r.e.submit(func(b *batch) error {
			r.pmu.Lock()
			r.flushTimer = nil
			r.pmu.Unlock()
			t, err := b.load(r.id)
			if err != nil || t == nil || t.State.Terminal() {
				return err
			}
			if done, err := b.expireIfDue(t); done || err != nil {
				return err
			}
			return r.flushProgress(b, t, false)
		})
	})
}

func (r *run) stopFlush() {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if r.flushTimer != nil {
		r.flushTimer.Stop()
		r.flushTimer = nil
	}
	r.pending = nil
}

// flushProgress commits the pending update, in the committer. Unless
// forced it waits (re-arming the flush) while the window is full; forced is
// the flush before input_required or the settlement, which uses the kept
// slot.
func (r *run) flushProgress(b *batch, t *taskdb.Task, force bool) error {
	r.pmu.Lock()
	p := r.pending
	if p == nil || t.State == agentproto.StateAccepted {
		r.pmu.Unlock()
		return nil
	}
	now := b.now()
	if !force {
		if free, next := r.slotFree(now); !free {
			r.armFlush(next)
			r.pmu.Unlock()
			return nil
		}
	}
	r.pending = nil
	r.pmu.Unlock()

	v, pct, has := progressValue(*p, r.lastPct, r.hasPct)
	if v == nil {
		return nil // nothing to report: no revision
	}
	payload, err := r.e.lifecycle.build(agentproto.EventProgress, v)
	if err != nil {
		return err
	}
	if bytes.Equal(payload, r.lastProgress) {
		return nil // unchanged: no revision
	}
	if err := b.commit(t, []agentproto.State{t.State}, agentproto.EventProgress, payload, func(*taskdb.Task) {}); err != nil {
		// Rolled back: keep the value (under anything newer) for the
		// next flush, so a storage failure does not lose the latest.
		r.pmu.Lock()
		if r.pending != nil {
			p = mergeProgress(p, *r.pending)
		}
		r.pending = p
		r.pmu.Unlock()
		return err
	}
	r.lastPct, r.hasPct, r.lastProgress = pct, has, payload
	r.pmu.Lock()
	r.progTimes = append(r.progTimes, now)
	r.pmu.Unlock()
	return nil
}
