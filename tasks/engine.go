package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
	"github.com/agentgw/agentgw/internal/telemetry"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

// Authorizer decides invocation permission (federation.Policy implements
// it).
type Authorizer interface {
	CanInvoke(principal, endpoint string) bool
}

// ApprovalPolicy is trusted local policy for tools that declare
// approvalRequired or requiredPermissions. Without one such tools fail
// closed.
type ApprovalPolicy interface {
	Approved(principal, endpoint, tool string) bool
	HasPermission(principal, perm string) bool
}

// Notifier receives each committed event after its commit, in revision order
// per task. It must not block for long: the XMPP layer queues the send.
type Notifier interface {
	Notify(ev Event)
}

// Event is one committed lifecycle event, addressed for sending.
type Event struct {
	TaskID   string
	EventID  string
	Endpoint string // bare JID of the target endpoint (the sender)
	Caller   string // bare JID of the caller
	Route    string // full JID that issued the invoke
	Revision int64
	Type     agentproto.EventType
	Payload  []byte // canonical JSON, valid against the lifecycle schema
}

// Config configures an Engine. Zero durations and limits take the defaults
// documented on each field.
type Config struct {
	// Driver stores the tasks (store/sqlite over a migrated store);
	// the composition root chooses it.
	Driver    taskdb.Driver
	Directory directory.Reader
	Policy    Authorizer
	Backends  func(endpoint string) (Backend, bool)
	Notifier  Notifier // optional
	Clock     clock.Clock
	Log       *slog.Logger
	Approvals ApprovalPolicy // optional; nil fails approval/permission tools closed

	ReplayWindow   time.Duration // admission replay window; default 24h
	Retention      time.Duration // retain-until = created + Retention; default 24h
	DefaultTimeout time.Duration // deadline when neither invoke nor tool set one; default 1h
	InputTimeout   time.Duration // expiry of input requests that carry none; default 1h
	MaxActive      int           // non-terminal tasks at once; default 1000
	// MaxDelegationDepth bounds Invocation.DelegationDepth (Business Rules:
	// a gateway MUST bound delegation depth); default DefaultMaxDelegationDepth.
	MaxDelegationDepth int

	MaxArgumentBytes int           // invoke arguments and input values; default 1 MiB
	MaxResultBytes   int           // canonical completed payload; default 1 MiB
	PurgeInterval    time.Duration // retention purge period; default 1m
	ShutdownGrace    time.Duration // how long Close waits for executors; default 5s
	MaxBatch         int           // operations per group commit; default 512

	// ProgressPerSecond bounds the progress revisions of one task: no
	// one-second window holds more than this many (the last slot is kept
	// for the final value, flushed before input_required or the terminal
	// event). Updates in between are coalesced into the latest value, and
	// an update equal to the last committed one is dropped. Default 10;
	// negative disables the rate limit (unchanged values are still
	// dropped).
	ProgressPerSecond int

	// Per-principal quotas (ErrResourceConstraint at admission, after
	// authorization and replay recognition). Zero takes the default,
	// negative disables the quota.
	MaxActivePerPrincipal int   // non-terminal tasks per caller bare JID; default 1000
	MaxActivePerDomain    int   // non-terminal tasks per remote domain; default 2000
	MaxRetainedBytes      int64 // stored arguments+results of a caller's terminal tasks; default 256 MiB
	// IsLocal tells local principals, whose domain has no domain quota
	// (MaxActive bounds it). nil treats every domain as remote.
	IsLocal func(principal string) bool

	// MaxRunningPerBackend bounds the dispatched, unsettled tasks of one
	// endpoint's backend; excess tasks stay accepted, in admission order,
	// until a slot frees. Default 64, negative for no limit.
	// RunningLimit, when set, overrides it per endpoint (0 keeps it).
	MaxRunningPerBackend int
	RunningLimit         func(endpoint string) int

	// Cluster makes this engine one of several instances sharing the
	// driver, which must implement taskdb.Cluster (see cluster.go); nil is
	// the single-instance engine, unchanged.
	Cluster *ClusterConfig
}

// DefaultMaxDelegationDepth is the default bound on an invocation's
// delegation depth: a direct call is 0, a call a tool makes back through a
// gateway while serving it is 1, and so on.
const DefaultMaxDelegationDepth = 8

func (c *Config) defaults() {
	if c.ReplayWindow <= 0 {
		c.ReplayWindow = 24 * time.Hour
	}
	if c.Retention <= 0 {
		c.Retention = 24 * time.Hour
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = time.Hour
	}
	if c.InputTimeout <= 0 {
		c.InputTimeout = time.Hour
	}
	if c.MaxActive <= 0 {
		c.MaxActive = 1000
	}
	if c.MaxDelegationDepth <= 0 {
		c.MaxDelegationDepth = DefaultMaxDelegationDepth
	}
	if c.MaxArgumentBytes <= 0 {
		c.MaxArgumentBytes = 1 << 20
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = 1 << 20
	}
	if c.PurgeInterval <= 0 {
		c.PurgeInterval = time.Minute
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 512
	}
	if c.ProgressPerSecond == 0 {
		c.ProgressPerSecond = 10
	}
	if c.MaxActivePerPrincipal == 0 {
		c.MaxActivePerPrincipal = 1000
	}
	if c.MaxActivePerDomain == 0 {
		c.MaxActivePerDomain = 2000
	}
	if c.MaxRetainedBytes == 0 {
		c.MaxRetainedBytes = 256 << 20
	}
	if c.MaxRunningPerBackend == 0 {
		c.MaxRunningPerBackend = 64
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// Engine is the durable task state machine. All its methods are safe for
// concurrent use.
type Engine struct {
	cfg       Config
	db        taskdb.Driver
	clock     clock.Clock
	log       *slog.Logger
	schemas   *schema.Cache
	lifecycle *Lifecycle
	argLimits ijson.Limits

	started atomic.Bool
	closing atomic.Bool

	// The committer owns every write: ops queue here and run in group
	// commits, one transaction per batch.
	qmu      sync.Mutex
	queue    []*op
	qsig     chan struct{}
	qclosed  bool
	commitWG sync.WaitGroup
	active   int // non-terminal tasks; committer-owned
	// rows holds, per non-terminal task, the row as this engine's last
	// committed transition wrote it, so that an executor's mutation (the
	// settlement above all) need not read it back (issue 34).
	// Committer-owned; single instance only (see rowCache).
	rows map[string]taskdb.Task
	// Committer-owned counters behind the quotas (see quota.go), changed
	// through batch adjustments so a rolled-back op leaves them alone.
	counts [numCounters]map[string]int64
	// Tasks held accepted by the backend concurrency limit, per endpoint
	// in admission order, and those released to dispatch (committer-owned).
	waiting   map[string][]string
	released  map[string]string // task ID -> endpoint
	releasedN map[string]int
	commits   atomic.Int64
	ops       atomic.Int64

	// Committed events wait here for the notifier, in commit order.
	nmu     sync.Mutex
	nqueue  []Event
	nsig    chan struct{}
	nclosed bool
	notifWG sync.WaitGroup
	// gated holds the events of tasks started in their admission commit
	// until Admit releases them (see ungate), in commit order per task.
	gated map[string][]Event

	mu         sync.Mutex
	runs       map[string]*run
	deadlines  map[string]clock.Timer
	purgeTimer clock.Timer

	execCtx    context.Context
	execCancel context.CancelFunc
	execWG     sync.WaitGroup

	// Test hooks: noPersist short-circuits admission before the commit
	// (the no-persistence baseline benchmark); holdDispatch leaves admitted
	// tasks accepted until dispatched explicitly.
	noPersist    bool
	holdDispatch atomic.Bool

	// Cluster mode (nil otherwise); see cluster.go.
	cl *clusterState
}

// New builds an engine. Nothing runs until Start.
func New(cfg Config) (*Engine, error) {
	cfg.defaults()
	if cfg.Driver == nil {
		return nil, errors.New("tasks: config needs a Driver")
	}
	if cfg.Directory == nil || cfg.Backends == nil {
		return nil, errors.New("tasks: config needs Directory and Backends")
	}
	lc, err := NewLifecycle()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:       cfg,
		db:        cfg.Driver,
		clock:     cfg.Clock,
		log:       cfg.Log,
		schemas:   schema.NewCache(4096),
		lifecycle: lc,
		argLimits: ijson.Limits{MaxBytes: cfg.MaxArgumentBytes},
		qsig:      make(chan struct{}, 1),
		nsig:      make(chan struct{}, 1),
		runs:      map[string]*run{},
		deadlines: map[string]clock.Timer{},
		waiting:   map[string][]string{},
		released:  map[string]string{},
		releasedN: map[string]int{},
	}
	for i := range e.counts {
		e.counts[i] = map[string]int64{}
	}
	e.execCtx, e.execCancel = context.WithCancel(context.Background())
	if cfg.Cluster != nil {
		if err := e.clusterInit(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Start recovers after a restart and starts the engine: tasks still
// accepted are dispatched (the backend was never called); tasks whose
// backend call cannot be resumed (running, input_required, cancelling after
// dispatch) are settled failed with agentgw:interrupted, retryable, each as
// one committed revision with its event; a cancelling task that was never
// dispatched is settled cancelled. Deadline timers are armed and the
// retention purge loop starts. Start returns once recovery has committed.
func (e *Engine) Start(ctx context.Context) error {
	if e.closing.Load() {
		return ErrClosed
	}
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("tasks: engine already started")
	}
	var (
		unsettled []taskdb.Task
		err       error
	)
	if e.cl != nil {
		unsettled, err = e.clusterJoin(ctx)
	} else {
		unsettled, err = e.db.Unsettled(ctx)
	}
	if err != nil {
		return err
	}
	retained, err := e.db.RetainedBytes(ctx)
	if err != nil {
		return err
	}
	e.active = len(unsettled)
	for i := range unsettled {
		e.countTask(&unsettled[i])
	}
	for caller, n := range retained {
		e.counts[cRetained][caller] = n
	}
	e.commitWG.Add(1)
	go e.commitLoop()
	e.notifWG.Add(1)
	go e.notifyLoop()

	errs := e.waitAll(e.recoverTasks(unsettled))
	if len(unsettled) > 0 {
		e.log.Info("tasks: recovered unsettled tasks", "count", len(unsettled))
	}
	e.purgeNow()
	if e.cl != nil {
		e.clusterStart()
	}
	return errors.Join(errs...)
}

// recoverTasks queues the restart recovery of unsettled tasks this engine
// has just come to own (at Start, or by a cluster takeover): accepted ones
// are dispatched, dispatched ones settle interrupted.
func (e *Engine) recoverTasks(unsettled []taskdb.Task) []*op {
	var waits []*op
	for i := range unsettled {
		t := &unsettled[i]
		if t.Deadline != "" {
			e.armDeadline(t.ID, t.Deadline, t.DeadlineAt)
		}
		id := t.ID
		switch {
		case t.State == agentproto.StateAccepted || (t.State == agentproto.StateCancelling && !t.Dispatched):
			waits = append(waits, e.submit(func(b *batch) error { return b.dispatch(id) }))
		default:
			if rs, state := e.resumeTarget(t); rs != nil {
				waits = append(waits, e.submit(func(b *batch) error { return b.resume(id, rs, state) }))
				continue
			}
			waits = append(waits, e.submit(func(b *batch) error {
				return b.interrupt(id)
			}))
		}
	}
	return waits
}

func (e *Engine) waitAll(waits []*op) []error {
	var errs []error
	for _, o := range waits {
		if err := <-o.done; err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Close stops the engine: no new work is admitted, executors' contexts end,
// and after ShutdownGrace every dispatched task still unsettled is settled
// failed agentgw:interrupted. Accepted tasks stay accepted for the next
// Start. The store is not closed.
func (e *Engine) Close() error {
	e.mu.Lock() // orders the flag with launch's registration
	first := e.closing.CompareAndSwap(false, true)
	e.mu.Unlock()
	if !first {
		return nil
	}
	e.stopTimers()
	if e.cl != nil {
		e.clusterStop()
	}
	e.execCancel()
	done := make(chan struct{})
	go func() { e.execWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(e.cfg.ShutdownGrace):
		e.log.Warn("tasks: executors still running at shutdown")
	}
	if !e.started.Load() {
		return nil
	}
	e.mu.Lock()
	var live []string
	for id, r := range e.runs {
		if r.resumable.Load() {
			continue // left running for the backend to resume (resume.go)
		}
		live = append(live, id)
	}
	e.mu.Unlock()
	var waits []*op
	for _, id := range live {
		id := id
		waits = append(waits, e.submit(func(b *batch) error { return b.interrupt(id) }))
	}
	var errs []error
	for _, o := range waits {
		if err := <-o.done; err != nil {
			errs = append(errs, err)
		}
	}
	e.stopCommitter(false)
	e.stopNotifier()
	if e.cl != nil {
		errs = append(errs, e.clusterLeave())
	}
	return errors.Join(errs...)
}

// abandon stops the engine as a crash would: nothing is settled, queued
// operations are dropped, executors are cut off. For crash tests.
func (e *Engine) abandon() {
	e.closing.Store(true)
	e.stopTimers()
	if e.cl != nil {
		e.clusterStop()
	}
	e.execCancel()
	e.stopCommitter(true)
	e.stopNotifier()
}

func (e *Engine) stopTimers() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, t := range e.deadlines {
		t.Stop()
		delete(e.deadlines, id)
	}
	for _, r := range e.runs {
		r.stopInputTimer()
	}
	if e.purgeTimer != nil {
		e.purgeTimer.Stop()
	}
}

// op is one unit of work inside a group commit. fn returns an error only
// for storage failures, which roll back that op alone; domain outcomes are
// captured by fn's closure.
type op struct {
	fn   func(b *batch) error
	done chan error
	// durable ops are work the engine owes after an earlier commit (the
	// dispatch of an accepted task, a settlement, a deadline): a storage
	// failure (a full or read-only disk) retries them with backoff until
	// they commit or the engine closes, instead of leaving the task
	// accepted or running until a restart.
	durable bool
	attempt int
}

// Backoff of durable ops after a storage failure.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
)

func (e *Engine) submit(fn func(b *batch) error) *op { return e.push(fn, false) }

// submitDurable queues fn as a durable op (see op.durable).
func (e *Engine) submitDurable(fn func(b *batch) error) *op { return e.push(fn, true) }

func (e *Engine) push(fn func(b *batch) error, durable bool) *op {
	o := &op{fn: fn, done: make(chan error, 1), durable: durable}
	e.enqueue(o)
	return o
}

func (e *Engine) enqueue(o *op) {
	e.qmu.Lock()
	if e.qclosed {
		e.qmu.Unlock()
		o.done <- ErrClosed
		return
	}
	e.queue = append(e.queue, o)
	e.qmu.Unlock()
	select {
	case e.qsig <- struct{}{}:
	default:
	}
}

// finish reports an op's outcome, or queues a durable op again later when
// its commit failed.
func (e *Engine) finish(o *op, err error) {
	if err == nil || !o.durable || errors.Is(err, ErrClosed) || e.closing.Load() {
		o.done <- err
		return
	}
	o.attempt++
	delay := min(retryFirst<<min(o.attempt-1, 6), retryMax)
	e.log.Warn("tasks: commit failed; retrying", "attempt", o.attempt, "in", delay, "err", err)
	e.clock.AfterFunc(delay, func() { e.enqueue(o) })
}

// do runs fn in the next group commit and waits for that commit. It does
// not give up on ctx: the outcome must be known once the op is queued.
func (e *Engine) do(fn func(b *batch) error) error {
	return <-e.submit(fn).done
}

// doDurable is do for a durable op: it returns once fn committed, or with
// ErrClosed when the engine closed first.
func (e *Engine) doDurable(fn func(b *batch) error) error {
	return <-e.submitDurable(fn).done
}

func (e *Engine) take() ([]*op, bool) {
	for {
		e.qmu.Lock()
		if len(e.queue) > 0 {
			n := min(len(e.queue), e.cfg.MaxBatch)
			ops := make([]*op, n)
			copy(ops, e.queue)
			e.queue = append(e.queue[:0], e.queue[n:]...)
			e.qmu.Unlock()
			return ops, true
		}
		if e.qclosed {
			e.qmu.Unlock()
			return nil, false
		}
		e.qmu.Unlock()
		<-e.qsig
	}
}

// topUp adds queued ops to a batch, up to MaxBatch, without waiting.
func (e *Engine) topUp(ops []*op) []*op {
	e.qmu.Lock()
	defer e.qmu.Unlock()
	n := min(len(e.queue), e.cfg.MaxBatch-len(ops))
	if n <= 0 {
		return ops
	}
	ops = append(ops, e.queue[:n]...)
	e.queue = append(e.queue[:0], e.queue[n:]...)
	return ops
}

func (e *Engine) commitLoop() {
	defer e.commitWG.Done()
	for {
		ops, ok := e.take()
		if !ok {
			return
		}
		e.runBatch(ops)
	}
}

// stopCommitter lets the committer finish the queue (or, when dropping,
// fails what is queued) and waits for it.
func (e *Engine) stopCommitter(drop bool) {
	e.qmu.Lock()
	e.qclosed = true
	var dropped []*op
	if drop {
		dropped, e.queue = e.queue, nil
	}
	e.qmu.Unlock()
	for _, o := range dropped {
		o.done <- ErrClosed
	}
	select {
	case e.qsig <- struct{}{}:
	default:
	}
	e.commitWG.Wait()
}

// batch is the state of one group commit.
type batch struct {
	e      *Engine
	tx     taskdb.Tx
	after  []func()
	events []Event
	delta  int                  // change of the non-terminal task count
	adj    []adjust             // quota adjustments, in op order
	sums   map[counterKey]int64 // their sums per counter
	// Rows written by this batch's transitions, latest per task, applied
	// to Engine.rows once the batch commits. dirty: an op of the batch
	// failed (its writes were rolled back to a savepoint), so neither the
	// written rows nor the cache can be trusted for the rest of it.
	written map[string]taskdb.Task
	dirty   bool
}

// onCommit runs f after the batch commits, in the committer goroutine.
func (b *batch) onCommit(f func()) { b.after = append(b.after, f) }

func (b *batch) now() time.Time { return b.e.clock.Now().UTC() }

func (e *Engine) runBatch(ops []*op) {
	ctx := context.Background()
	tx, err := e.db.Begin(ctx)
	if err != nil {
		e.log.Error("tasks: begin failed", "err", err)
		for _, o := range ops {
			e.finish(o, err)
		}
		return
	}
	b := &batch{e: e, tx: tx}
	if err := b.serialize(); err != nil {
		e.log.Error("tasks: taking the cluster commit lock failed", "err", err)
		tx.Rollback()
		for _, o := range ops {
			e.finish(o, err)
		}
		return
	}
	if e.cl != nil {
		// Ops queued while this batch waited for the cluster commit lock
		// join it: under contention batches grow instead of queueing
		// one lock wait each.
		ops = e.topUp(ops)
	}
	errs := make([]error, len(ops))
	guarded := ops
	if len(ops) == 1 {
		// A batch of one needs no savepoint (two statements fewer, the
		// common case at low load): its failure rolls back the whole
		// transaction.
		if err := ops[0].fn(b); err != nil {
			e.log.Error("tasks: operation failed", "err", err)
			tx.Rollback()
			e.dropRows()
			e.finish(ops[0], err)
			return
		}
		guarded = nil
	}
	for i, o := range guarded {
		nAfter, nEvents, delta, nAdj := len(b.after), len(b.events), b.delta, len(b.adj)
		if err := tx.Savepoint(); err != nil {
			errs[i] = err
			b.dirty = true
			continue
		}
		if err := o.fn(b); err != nil {
			e.log.Error("tasks: operation failed", "err", err)
			errs[i] = err
			b.dirty = true
			b.after, b.events, b.delta = b.after[:nAfter], b.events[:nEvents], delta
			b.undoAdjust(nAdj)
			if rerr := tx.RollbackTo(); rerr != nil {
				e.log.Error("tasks: rollback to savepoint failed", "err", rerr)
			}
			continue
		}
		if err := tx.Release(); err != nil {
			errs[i] = err
			b.dirty = true
		}
	}
	if err := tx.Commit(); err != nil {
		e.log.Error("tasks: commit failed", "err", err)
		tx.Rollback()
		e.dropRows()
		for _, o := range ops {
			e.finish(o, fmt.Errorf("tasks: commit: %w", err))
		}
		return
	}
	e.active += b.delta
	e.applyAdjust(b.sums)
	b.applyRows()
	e.commits.Add(1)
	e.ops.Add(int64(len(ops)))
	for _, f := range b.after {
		f()
	}
	e.enqueueEvents(b.events)
	for i, o := range ops {
		e.finish(o, errs[i])
	}
}

func (e *Engine) enqueueEvents(evs []Event) {
	if len(evs) == 0 || e.cfg.Notifier == nil {
		return
	}
	e.nmu.Lock()
	if len(e.gated) == 0 {
		e.nqueue = append(e.nqueue, evs...)
	} else {
		for _, ev := range evs {
			if held, ok := e.gated[ev.TaskID]; ok {
				e.gated[ev.TaskID] = append(held, ev)
			} else {
				e.nqueue = append(e.nqueue, ev)
			}
		}
	}
	e.nmu.Unlock()
	e.wakeNotifier()
}

func (e *Engine) wakeNotifier() {
	select {
	case e.nsig <- struct{}{}:
	default:
	}
}

// gate holds the task's events from now on (after its admission commit,
// before that batch's events are queued): a task started in the commit
// that admitted it must not announce revision 1 before the caller has the
// <accepted/> of revision 0.
func (e *Engine) gate(id string) {
	e.nmu.Lock()
	if e.gated == nil {
		e.gated = map[string][]Event{}
	}
	e.gated[id] = nil
	e.nmu.Unlock()
}

// ungate queues the task's held events, in order, and lets later ones
// through; a no-op for a task that is not gated.
func (e *Engine) ungate(id string) {
	if id == "" {
		return
	}
	e.nmu.Lock()
	held, ok := e.gated[id]
	delete(e.gated, id)
	e.nqueue = append(e.nqueue, held...)
	e.nmu.Unlock()
	if ok && len(held) > 0 {
		e.wakeNotifier()
	}
}

func (e *Engine) notifyLoop() {
	defer e.notifWG.Done()
	for {
		e.nmu.Lock()
		evs := e.nqueue
		e.nqueue = nil
		closed := e.nclosed
		e.nmu.Unlock()
		for _, ev := range evs {
			_, sp := telemetry.StartTask(context.Background(), ev.TaskID, telemetry.EventSend)
			sp.Str(telemetry.AttrEvent, string(ev.Type))
			e.cfg.Notifier.Notify(ev)
			sp.End()
			if ev.Type == agentproto.EventCompleted || ev.Type == agentproto.EventFailed || ev.Type == agentproto.EventCancelled {
				telemetry.Forget(ev.TaskID)
			}
		}
		if len(evs) > 0 {
			continue
		}
		if closed {
			return
		}
		<-e.nsig
	}
}

func (e *Engine) stopNotifier() {
	e.nmu.Lock()
	e.nclosed = true
	e.nmu.Unlock()
	select {
	case e.nsig <- struct{}{}:
	default:
	}
	e.notifWG.Wait()
}

// armDeadline schedules the deadline settlement of a task.
func (e *Engine) armDeadline(id, deadline string, at time.Time) {
	d := at.Sub(e.clock.Now())
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing.Load() {
		return
	}
	if old, ok := e.deadlines[id]; ok {
		old.Stop()
	}
	e.deadlines[id] = e.clock.AfterFunc(max(d, 0), func() {
		e.submitDurable(func(b *batch) error { return b.deadlineFired(id) })
	})
}

func (e *Engine) disarmDeadline(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t, ok := e.deadlines[id]; ok {
		t.Stop()
		delete(e.deadlines, id)
	}
}

// purgeNow deletes expired tasks and schedules the next purge.
func (e *Engine) purgeNow() {
	e.submit(func(b *batch) error {
		n, err := b.purge()
		if err == nil && n > 0 {
			b.onCommit(func() { e.log.Debug("tasks: purged expired tasks", "count", n) })
		}
		return err
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing.Load() {
		return
	}
	e.purgeTimer = e.clock.AfterFunc(e.cfg.PurgeInterval, e.purgeNow)
}

// PurgeExpired deletes, now, every terminal task past its retention and
// replay window, with its events and input records.
func (e *Engine) PurgeExpired(ctx context.Context) (int64, error) {
	var n int64
	err := e.do(func(b *batch) error {
		var err error
		n, err = b.purge()
		return err
	})
	return n, err
}
