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
	// SweepInterval is how often this instance takes the notices queued
	// for it (cancel, input answer, "dispatch this") without waiting for
	// their bus hint, and retries dispatches that another member's
	// running tasks held back; default DefaultSweepInterval. A notice
	// whose hint is lost is acted on within SweepInterval plus one query.
	SweepInterval time.Duration
	// OwnerOf, when set, names the instance that must execute tasks for
	// endpoint (the holder of a bridge's single connection), "" for this
	// one. An admitted task is owned by that instance from its first
	// commit, and the owner is told to dispatch it.
	OwnerOf func(endpoint string) string
}

// ClusterChannel is the Bus channel of the engine's cross-instance signals.
const ClusterChannel = "agentgw.tasks"

// DefaultSweepInterval is ClusterConfig.SweepInterval's default: the bound
// on acting upon a notice whose bus hint was lost is this plus one query.
const DefaultSweepInterval = 500 * time.Millisecond

// repumpEvery is how often a member retries the dispatches that the
// cluster-wide backend limit held back (slots freed on other members).
const repumpEvery = 100 * time.Millisecond

type clusterState struct {
	cfg  ClusterConfig
	db   taskdb.Cluster
	sigs taskdb.Signals
	kick chan struct{} // a hint: notices are queued for this instance
	// held counts endpoints whose waiting tasks the cluster-wide running
	// count held back (committer-written), so the sweep re-pumps them.
	held atomic.Int64
	// full marks those endpoints (committer-owned).
	full map[string]bool
	// earlyCancel holds cancels taken from the queue before the task's
	// executor was launched (under Engine.mu).
	earlyCancel map[string]bool
	unsub       func()
	stop        chan struct{}
	once        sync.Once
	wg          sync.WaitGroup
	lost        atomic.Bool
	taken       atomic.Int64 // tasks taken over from dead instances
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
	sigs, ok := e.db.(taskdb.Signals)
	if !ok {
		return errors.New("tasks: cluster mode needs a task driver with a signal queue (the postgres store)")
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	e.cl = &clusterState{cfg: c, db: db, sigs: sigs, stop: make(chan struct{}), kick: make(chan struct{}, 1),
		full: map[string]bool{}, earlyCancel: map[string]bool{}}
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
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		e.leaseLoop()
	}()
	go func() {
		defer c.wg.Done()
		e.sweepLoop()
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
	// sigWake is the bus hint that notices are queued for Owner.
	sigWake sigKind = "wake"
)

// signal is one cross-instance notice to a task's owner. It is queued in
// the transaction of the commit it announces, so the owner acts on
// committed state, and only a commit that happened is announced.
type signal struct {
	Kind       sigKind         `json:"k"`
	Task       string          `json:"t,omitempty"`
	Owner      string          `json:"o"`
	Input      string          `json:"r,omitempty"` // input request: answered, or superseded by the cancel
	Answer     json.RawMessage `json:"a,omitempty"`
	Dispatched bool            `json:"d,omitempty"`
}

// queueSignal writes s to the owner's durable queue in this batch and,
// once the batch commits, hints the owner over the bus to take it now.
// Should the hint be lost, the owner's sweep takes it within
// SweepInterval.
func (b *batch) queueSignal(s signal) error {
	ctx, ok := b.tx.(taskdb.ClusterTx)
	if !ok {
		return errors.New("tasks: cluster mode needs a cluster transaction")
	}
	p, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := ctx.EnqueueSignal(s.Owner, p); err != nil {
		return err
	}
	e, owner := b.e, s.Owner
	b.onCommit(func() { go e.hint(owner) })
	return nil
}

// hint tells owner that notices wait in its queue.
func (e *Engine) hint(owner string) {
	b, _ := json.Marshal(signal{Kind: sigWake, Owner: owner})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cl.cfg.Bus.Publish(ctx, ClusterChannel, b); err != nil {
		// The owner's sweep takes the queued notice all the same.
		e.log.Warn("tasks: hinting the task's owner failed; its sweep will find the notice", "owner", owner, "err", err)
	}
}

// onSignal wakes the drain for a hint addressed to this instance.
func (e *Engine) onSignal(p []byte) {
	var s signal
	if err := json.Unmarshal(p, &s); err != nil || s.Owner != e.cl.cfg.Instance {
		return
	}
	select {
	case e.cl.kick <- struct{}{}:
	default:
	}
}

// sweepLoop takes this instance's queued notices on every hint and every
// SweepInterval, and retries held dispatches every repumpEvery.
func (e *Engine) sweepLoop() {
	c := e.cl
	sweep := time.NewTicker(c.cfg.SweepInterval)
	defer sweep.Stop()
	repump := time.NewTicker(repumpEvery)
	defer repump.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
			e.drainSignals()
		case <-sweep.C:
			e.drainSignals()
		case <-repump.C:
			if c.held.Load() > 0 && !e.closing.Load() {
				e.submit(func(b *batch) error {
					b.onCommit(e.repumpHeld)
					return nil
				})
			}
		}
	}
}

// drainSignals takes and acts on every notice queued for this instance.
func (e *Engine) drainSignals() {
	c := e.cl
	for !e.closing.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ps, err := c.sigs.TakeSignals(ctx, c.cfg.Instance, 256)
		cancel()
		if err != nil {
			e.log.Warn("tasks: taking queued notices failed; retrying at the next sweep", "err", err)
			return
		}
		for _, p := range ps {
			var s signal
			if err := json.Unmarshal(p, &s); err != nil {
				e.log.Warn("tasks: unreadable queued notice dropped", "err", err)
				continue
			}
			e.actOn(s)
		}
		if len(ps) < 256 {
			return
		}
	}
}

// actOn acts on a notice for a task this instance owns, as the local path
// does after its own commit.
func (e *Engine) actOn(s signal) {
	switch s.Kind {
	case sigCancel:
		if s.Dispatched {
			e.requestCancelQueued(s.Task)
		}
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

// requestCancelQueued is requestCancel for a queued cancel, which may be
// taken between the commit of the task's dispatch and the launch of its
// executor: then launch applies it.
func (e *Engine) requestCancelQueued(id string) {
	e.mu.Lock()
	r := e.runs[id]
	if r == nil {
		e.cl.earlyCancel[id] = true
	}
	e.mu.Unlock()
	if r != nil {
		r.cancelOnce.Do(func() { close(r.cancelReq) })
	}
}

// repumpHeld retries the endpoints whose dispatches the cluster-wide
// running count held back (in the committer).
func (e *Engine) repumpHeld() {
	for ep := range e.cl.full {
		e.unmarkFull(ep)
		e.pump(ep)
	}
}

// markFull notes that ep's waiting tasks wait for slots on other members
// (committer).
func (e *Engine) markFull(ep string) {
	if !e.cl.full[ep] {
		e.cl.full[ep] = true
		e.cl.held.Add(1)
	}
}

func (e *Engine) unmarkFull(ep string) {
	if e.cl.full[ep] {
		delete(e.cl.full, ep)
		e.cl.held.Add(-1)
	}
}

// adoptAdmitted takes up a task another instance admitted for this one:
// counted, its deadline armed, dispatched. The notice is durable (queued
// with the admission), so it is taken once even if its bus hint is lost.
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
