package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentgw/agentgw/cluster"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// ClusterConfig makes an engine one of several gateway instances sharing
// one task store (docs/cluster.md). Every non-terminal task is owned by the
// instance that admitted it; only the owner dispatches, executes and
// settles it. Another instance may commit the caller's cancel or
// provide-input and tells the owner over the Bus. An instance renews its
// lease every LeaseTTL/3; once a dead instance's lease has expired a
// survivor takes its tasks over in one guarded transaction and recovers
// them exactly as a restart does: accepted ones are dispatched, dispatched
// ones settle agentgw:interrupted (retryable).
type ClusterConfig struct {
	Instance string      // this instance's unique name
	Bus      cluster.Bus // carries cancel and input to a task's owner
	// LeaseTTL is the instance lease; default 10s. A dead instance's
	// tasks are taken over between LeaseTTL and LeaseTTL·4/3 after its
	// last renewal.
	LeaseTTL time.Duration
	// OnLeaseLost is called once when a renewal finds this instance's
	// lease expired (it was cut off from the database for longer than
	// LeaseTTL, and survivors may own its tasks now): the instance must
	// stop at once. The engine stops executing first. nil only logs.
	OnLeaseLost func()
	// OnTakeOver, when set, learns each takeover (metrics, tests).
	OnTakeOver func(dead string, tasks int)
	// OwnerOf, when set, names the instance that must execute tasks for
	// endpoint (the holder of a bridge's single connection), "" for this
	// one. An admitted task is owned by that instance from its first
	// commit, and the owner is told to dispatch it.
	OwnerOf func(endpoint string) string
}

// ClusterChannel is the Bus channel of the engine's cross-instance signals.
const ClusterChannel = "agentgw.tasks"

type clusterState struct {
	cfg   ClusterConfig
	db    taskdb.Cluster
	unsub func()
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	lost  atomic.Bool
	taken atomic.Int64 // tasks taken over from dead instances
}

func (e *Engine) clusterInit() error {
	c := *e.cfg.Cluster
	db, ok := e.db.(taskdb.Cluster)
	if !ok {
		return errors.New("tasks: cluster mode needs a task driver shared by instances (the postgres store)")
	}
	if c.Instance == "" || c.Bus == nil {
		return errors.New("tasks: cluster mode needs an instance name and a bus")
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	e.cl = &clusterState{cfg: c, db: db, stop: make(chan struct{})}
	return nil
}

// instance is the owner recorded on admitted tasks ("" single-instance).
func (e *Engine) instance() string {
	if e.cl == nil {
		return ""
	}
	return e.cl.cfg.Instance
}

// ownerFor is the owner an admission on endpoint records.
func (e *Engine) ownerFor(endpoint string) string {
	if e.cl == nil {
		return ""
	}
	if f := e.cl.cfg.OwnerOf; f != nil {
		if o := f(endpoint); o != "" {
			return o
		}
	}
	return e.cl.cfg.Instance
}

// owns reports whether this engine executes and settles t.
func (e *Engine) owns(t *taskdb.Task) bool {
	return e.cl == nil || t.Owner == e.cl.cfg.Instance
}

// Instance is this engine's cluster instance name, "" when single.
func (e *Engine) Instance() string { return e.instance() }

// TakenOver counts the tasks this engine took over from dead instances.
func (e *Engine) TakenOver() int64 {
	if e.cl == nil {
		return 0
	}
	return e.cl.taken.Load()
}

// clusterJoin takes the lease and returns the tasks this instance owns:
// those of its previous incarnation, recovered like after a restart.
func (e *Engine) clusterJoin(ctx context.Context) ([]taskdb.Task, error) {
	c := e.cl
	// Subscribe before anything can be forwarded to us.
	c.unsub = c.cfg.Bus.Subscribe(ClusterChannel, e.onSignal)
	if err := c.db.Join(ctx, c.cfg.Instance, c.cfg.LeaseTTL); err != nil {
		return nil, fmt.Errorf("tasks: join the cluster: %w", err)
	}
	return c.db.Owned(ctx, c.cfg.Instance)
}

func (e *Engine) clusterStart() {
	c := e.cl
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		e.leaseLoop()
	}()
}

// clusterStop ends the lease loop and the subscription (Close, abandon).
func (e *Engine) clusterStop() {
	c := e.cl
	c.once.Do(func() {
		close(c.stop)
		if c.unsub != nil {
			c.unsub()
		}
	})
	c.wg.Wait()
}

// clusterLeave expires the lease after a clean Close, so survivors take
// the still-accepted tasks over at once.
func (e *Engine) clusterLeave() error {
	if e.cl.lost.Load() || !e.started.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return e.cl.db.Leave(ctx, e.cl.cfg.Instance)
}

func (e *Engine) leaseLoop() {
	c := e.cl
	every := c.cfg.LeaseTTL / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		ok, err := c.db.Renew(ctx, c.cfg.Instance, c.cfg.LeaseTTL)
		cancel()
		if err != nil {
			// Without the database nobody can take our tasks over, and
			// nothing we do commits; the lease is judged when it returns.
			e.log.Warn("tasks: renewing the instance lease failed", "err", err)
			continue
		}
		if !ok {
			e.leaseLost()
			return
		}
		e.scanDead()
	}
}

// leaseLost fences this instance: survivors may own its tasks now, so it
// stops executing at once and tells the gateway to stop.
func (e *Engine) leaseLost() {
	c := e.cl
	if !c.lost.CompareAndSwap(false, true) {
		return
	}
	e.log.Error("tasks: the instance lease expired; survivors may have taken this instance's tasks over; stopping",
		"instance", c.cfg.Instance)
	e.closing.Store(true)
	e.execCancel()
	if c.cfg.OnLeaseLost != nil {
		go c.cfg.OnLeaseLost()
	}
}

// scanDead takes over the tasks of every instance whose lease expired.
func (e *Engine) scanDead() {
	c := e.cl
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.LeaseTTL)
	defer cancel()
	insts, err := c.db.Instances(ctx)
	if err != nil {
		e.log.Warn("tasks: listing instances failed", "err", err)
		return
	}
	for _, in := range insts {
		if in.Live || in.Name == c.cfg.Instance || in.Unsettled == 0 {
			continue
		}
		moved, err := c.db.TakeOver(ctx, in.Name, c.cfg.Instance)
		if err != nil {
			e.log.Warn("tasks: takeover failed", "dead", in.Name, "err", err)
			continue
		}
		if len(moved) == 0 {
			continue
		}
		e.log.Warn("tasks: took over the tasks of an expired instance", "dead", in.Name, "tasks", len(moved))
		c.taken.Add(int64(len(moved)))
		if c.cfg.OnTakeOver != nil {
			c.cfg.OnTakeOver(in.Name, len(moved))
		}
		// Recovered beside the lease loop: recovering many tasks must not
		// delay this instance's own renewal past its lease.
		go e.adopt(moved)
	}
}

// adopt counts taken-over tasks (in the committer) and recovers them.
func (e *Engine) adopt(moved []taskdb.Task) {
	done := make(chan struct{})
	e.submit(func(b *batch) error {
		b.onCommit(func() {
			e.active += len(moved)
			for i := range moved {
				e.countTask(&moved[i])
			}
			close(done)
		})
		return nil
	})
	select {
	case <-done:
	case <-e.cl.stop:
		return
	}
	for _, err := range e.waitAll(e.recoverTasks(moved)) {
		if !errors.Is(err, ErrClosed) {
			e.log.Warn("tasks: recovering a taken-over task failed", "err", err)
		}
	}
}

type sigKind string

const (
	sigCancel sigKind = "cancel"
	sigInput  sigKind = "input"
	// sigDispatch hands a task admitted elsewhere to its owner.
	sigDispatch sigKind = "dispatch"
)

// signal is one cross-instance notice to a task's owner. It follows a
// commit, so the owner acts on committed state.
type signal struct {
	Kind       sigKind         `json:"k"`
	Task       string          `json:"t"`
	Owner      string          `json:"o"`
	Input      string          `json:"r,omitempty"` // input request: answered, or superseded by the cancel
	Answer     json.RawMessage `json:"a,omitempty"`
	Dispatched bool            `json:"d,omitempty"`
}

func (e *Engine) signal(s signal) {
	b, err := json.Marshal(s)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cl.cfg.Bus.Publish(ctx, ClusterChannel, b); err != nil {
		// The owner still finds the committed state: its backend call
		// sees the cancellation or the answer no sooner than its deadline.
		e.log.Warn("tasks: signalling the task's owner failed", "task", s.Task, "owner", s.Owner, "err", err)
	}
}

// onSignal acts on a notice for a task this instance owns, as the local
// path does after its own commit.
func (e *Engine) onSignal(p []byte) {
	var s signal
	if err := json.Unmarshal(p, &s); err != nil || s.Owner != e.cl.cfg.Instance || e.closing.Load() {
		return
	}
	switch s.Kind {
	case sigCancel:
		e.requestCancel(s.Task)
		if s.Input != "" {
			e.deliverInput(s.Task, s.Input, nil, ErrInputSuperseded)
		}
		if !s.Dispatched {
			id := s.Task
			e.submitDurable(func(b *batch) error { return b.dispatch(id) })
		}
	case sigInput:
		e.deliverInput(s.Task, s.Input, append([]byte(nil), s.Answer...), nil)
	case sigDispatch:
		go e.adoptAdmitted(s.Task)
	}
}

// adoptAdmitted takes up a task another instance admitted for this one:
// counted, its deadline armed, dispatched. Should this notice be lost, the
// task waits accepted until this instance restarts or dies (then the
// takeover dispatches it).
func (e *Engine) adoptAdmitted(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t, err := e.db.Task(ctx, id)
	if err != nil || t == nil || t.State.Terminal() || !e.owns(t) {
		if err != nil {
			e.log.Warn("tasks: reading a task routed here failed", "task", id, "err", err)
		}
		return
	}
	e.adopt([]taskdb.Task{*t})
}

// doRetry is do for caller-driven transitions that another instance may
// race (its own commit on the same row): a failed guard reruns fn.
func (e *Engine) doRetry(fn func(b *batch) error) error {
	var err error
	for range 3 {
		if err = e.do(fn); !errors.Is(err, errGuard) {
			return err
		}
	}
	return err
}
