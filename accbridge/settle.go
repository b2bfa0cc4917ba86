package accbridge

import (
	"sync"
	"time"
)

// releaseBound is how long a connector may take to release an agent after
// cancel_run: acc-notes (STATE_MACHINES.md) says a cancelled run releases
// its resources within 30 s (SHOULD).
const releaseBound = 30 * time.Second

// endedMax bounds the runs remembered after they ended.
const endedMax = 4096

// endedRun is a run the gateway has settled (completed, failed, cancelled,
// or cancelled on the connector's return after a restart). Frames for it
// that arrive late are not answered 4004 when they only confirm its end.
type endedRun struct {
	connectorID string
	agent       string // agentKey
}

// agentHold is an agent whose last run was cancelled without the
// connector's confirmation: it may still be busy with it.
type agentHold struct {
	runID    string
	since    time.Time
	released chan struct{}
}

// settled is the server's memory of ended runs and held agents.
type settled struct {
	mu    sync.Mutex
	ended map[string]endedRun
	order []string
	holds map[string]*agentHold
}

func (st *settled) init() {
	if st.ended == nil {
		st.ended = map[string]endedRun{}
		st.holds = map[string]*agentHold{}
	}
}

// noteEnded remembers a run that ended; unconfirmed marks a cancel_run the
// connector has not confirmed (the agent is held until it does, or until
// releaseBound passes).
// cancelledAt is when that cancel_run was sent (zero: now).
func (st *settled) noteEnded(runID, connectorID, agent string, unconfirmed bool, cancelledAt time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.init()
	if _, ok := st.ended[runID]; !ok {
		st.order = append(st.order, runID)
		if len(st.order) > endedMax {
			delete(st.ended, st.order[0])
			st.order = st.order[1:]
		}
	}
	st.ended[runID] = endedRun{connectorID: connectorID, agent: agent}
	if unconfirmed {
		if h := st.holds[agent]; h != nil {
			close(h.released)
		}
		if cancelledAt.IsZero() {
			cancelledAt = time.Now()
		}
		st.holds[agent] = &agentHold{runID: runID, since: cancelledAt, released: make(chan struct{})}
	}
}

// release ends the hold a run has on its agent (the connector confirmed
// the cancel, or reported the run's end).
func (st *settled) release(runID string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.init()
	e, ok := st.ended[runID]
	if !ok {
		return
	}
	if h := st.holds[e.agent]; h != nil && h.runID == runID {
		close(h.released)
		delete(st.holds, e.agent)
	}
}

// hold returns the agent's hold while it is younger than releaseBound.
func (st *settled) hold(agent string) *agentHold {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.init()
	h := st.holds[agent]
	if h == nil {
		return nil
	}
	if time.Since(h.since) >= releaseBound {
		close(h.released)
		delete(st.holds, agent)
		return nil
	}
	return h
}

// late handles a frame for a run that is not in flight. A run_cancelled,
// completion or error for a run this connector had and the gateway already
// settled releases the agent; it reports true for run_cancelled, which is
// then taken silently (the confirmation of a cancel_run the gateway sent,
// after a deadline, an expiry, a cancel it stopped waiting for, or its own
// restart). Anything else, or a run that is not this connector's, is false:
// the caller answers 4004, the same as for a run that never existed.
func (st *settled) late(connectorID string, f *frame) bool {
	st.mu.Lock()
	e, ok := st.ended[f.RunID]
	st.mu.Unlock()
	if !ok || e.connectorID != connectorID {
		return false
	}
	switch {
	case f.Type == TypeRunCancelled:
		st.release(f.RunID)
		return true
	case f.Type == TypeError, f.Type == TypeRunEvent && (f.Event == EventCompletion || f.Event == EventError):
		st.release(f.RunID)
	}
	return false
}
