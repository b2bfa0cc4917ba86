package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/internal/metrics"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskxmpp"
)

// observedEngine reports admissions to the metrics and remembers when each
// task was admitted, so its duration can be observed when it settles.
type observedEngine struct {
	taskxmpp.Engine
	m      *metrics.Metrics
	starts *startTimes
}

func (o observedEngine) Admit(ctx context.Context, inv tasks.Invocation) (tasks.Accepted, error) {
	t0 := time.Now()
	acc, err := o.Engine.Admit(ctx, inv)
	d := time.Since(t0)
	switch {
	case err == nil && acc.Replay:
		o.m.AdmissionObserved(d, metrics.OutcomeReplay)
	case err == nil:
		o.m.AdmissionObserved(d, metrics.OutcomeAccepted)
		o.starts.put(acc.TaskID, acc.Created)
	case errors.Is(err, tasks.ErrConflict):
		o.m.AdmissionObserved(d, metrics.OutcomeConflict)
	default:
		o.m.AdmissionObserved(d, metrics.OutcomeRejected)
	}
	return acc, err
}

// observedNotifier reports settlements and failed sends.
type observedNotifier struct {
	next   *taskxmpp.Notifier
	m      *metrics.Metrics
	starts *startTimes
}

func (o observedNotifier) Notify(ev tasks.Event) {
	if ev.Type.Terminal() {
		var d time.Duration
		if created, ok := o.starts.take(ev.TaskID); ok {
			d = time.Since(created)
		}
		o.m.TaskSettled(string(ev.Type), d)
	}
	if consoleRoute(ev.Route) {
		return // the console polls the store for its own tasks
	}
	o.next.Notify(ev)
}

// startTimes is a bounded map of admission times.
type startTimes struct {
	mu    sync.Mutex
	at    map[string]time.Time
	order []string
}

const maxStartTimes = 100000

func (s *startTimes) put(id string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[string]time.Time{}
	}
	if _, ok := s.at[id]; !ok {
		s.order = append(s.order, id)
	}
	s.at[id] = t
	for len(s.order) > maxStartTimes {
		delete(s.at, s.order[0])
		s.order = s.order[1:]
	}
}

func (s *startTimes) take(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[id]
	delete(s.at, id)
	// Settled ids stay in order until it is compacted, so compact it once
	// it is mostly stale.
	if len(s.order) > 1024 && len(s.order) > 4*len(s.at) {
		live := s.order[:0]
		for _, k := range s.order {
			if _, ok := s.at[k]; ok {
				live = append(live, k)
			}
		}
		clear(s.order[len(live):])
		s.order = live
	}
	return t, ok
}

// taskCounts reads the number of tasks in each state for the metrics.
func (g *Gateway) taskCounts(ctx context.Context) (map[string]int, error) {
	return g.Store.TaskCounts(ctx)
}

// watchComponent mirrors the component's connection state into the
// metrics once a second.
func (g *Gateway) watchComponent(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var reconnects uint64
	var last component.Stats
	for {
		g.Metrics.SetConnected(g.Component.Connected())
		st := g.Component.Stats()
		if r := st.Reconnects; r > reconnects {
			for ; reconnects < r; reconnects++ {
				g.Metrics.Reconnected()
			}
		}
		g.Metrics.AddIQAnswers(st.ForwardedAnswers-last.ForwardedAnswers,
			st.RelayedAnswers-last.RelayedAnswers, st.DroppedAnswers-last.DroppedAnswers)
		last = st
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
