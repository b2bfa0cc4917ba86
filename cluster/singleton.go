package cluster

import (
	"context"
	"log/slog"
	"time"
)

// Singleton runs a resource that must exist on one instance at a time (a
// bridge's one connection per account or connector) while this instance
// holds its lease, and stops it when the lease is lost.
type Singleton struct {
	Leases Leases
	Name   string // the lease name, e.g. "connector:<base url>"
	Holder string // this instance
	TTL    time.Duration
	Log    *slog.Logger
	// Run runs the resource until ctx ends (the lease was lost or the
	// singleton stopped) or it fails; a failure is retried while the lease
	// is held.
	Run func(ctx context.Context) error
	// OnHolder, when set, learns every holder seen (for routing work to
	// it); "" when none could be read.
	OnHolder func(holder string)
}

// Serve competes for the lease until ctx ends: it acquires or renews every
// TTL/3, runs Run while held, and cancels Run the moment a renewal fails,
// before the lease can expire, so two holders never overlap while clocks
// agree within TTL/3. It releases the lease on return.
func (s *Singleton) Serve(ctx context.Context) {
	if s.TTL <= 0 {
		s.TTL = 10 * time.Second
	}
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	every := s.TTL / 3
	var (
		cancel context.CancelFunc
		done   chan struct{}
	)
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel, done = nil, nil
		}
	}
	defer func() {
		stop()
		rctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		s.Leases.Release(rctx, s.Name, s.Holder)
		c()
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		actx, c := context.WithTimeout(ctx, every)
		held, cur, err := s.Leases.Acquire(actx, s.Name, s.Holder, s.TTL)
		c()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("cluster: lease renewal failed; stopping the resource", "lease", s.Name, "err", err)
			held, cur = false, ""
		}
		if s.OnHolder != nil {
			s.OnHolder(cur)
		}
		switch {
		case held && cancel == nil:
			log.Info("cluster: lease acquired", "lease", s.Name, "holder", s.Holder)
			rctx, rcancel := context.WithCancel(ctx)
			cancel, done = rcancel, make(chan struct{})
			go func(ctx context.Context, done chan struct{}) {
				defer close(done)
				for ctx.Err() == nil {
					if err := s.Run(ctx); err != nil && ctx.Err() == nil {
						log.Warn("cluster: singleton resource failed; restarting", "lease", s.Name, "err", err)
					}
					select {
					case <-ctx.Done():
					case <-time.After(every):
					}
				}
			}(rctx, done)
		case !held && cancel != nil:
			log.Warn("cluster: lease lost", "lease", s.Name, "holder", cur)
			stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
