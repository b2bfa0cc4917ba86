package tasks

// Hooks for the external tests of this package.

// Abandon stops e as a crash would: nothing is settled.
func Abandon(e *Engine) { e.abandon() }

// SetNoPersist makes Admit stop right before the commit (benchmark
// baseline).
func SetNoPersist(e *Engine, on bool) { e.noPersist = on }

// HoldDispatch leaves newly admitted tasks accepted.
func HoldDispatch(e *Engine, on bool) { e.holdDispatch.Store(on) }

// Dispatch runs the dispatch of one task now and waits for its commit.
func Dispatch(e *Engine, id string) error {
	return e.do(func(b *batch) error { return b.dispatch(id) })
}

// CommitStats reports group commits and the operations they carried.
func CommitStats(e *Engine) (commits, ops int64) { return e.commits.Load(), e.ops.Load() }
