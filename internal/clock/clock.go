// Package clock is the injectable time source of agentgw. Everything that
// compares deadlines or expiry goes through a Clock, so tests can stop time
// exactly at a boundary.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a stoppable pending call.
type Timer interface {
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

func (Real) Now() time.Time { return time.Now() }

func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a manually advanced clock for tests.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Set moves the clock to t (forwards or backwards) and fires due timers.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	due := f.takeDue()
	f.mu.Unlock()
	for _, tm := range due {
		tm.f()
	}
}

// Advance moves the clock forward by d and fires due timers.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	f.mu.Lock()
	t := &fakeTimer{clock: f, at: f.now.Add(d), f: fn}
	f.timers = append(f.timers, t)
	due := f.takeDue()
	f.mu.Unlock()
	for _, tm := range due {
		tm.f()
	}
	return t
}

// takeDue removes and returns the timers due at f.now. Callers hold f.mu.
func (f *Fake) takeDue() []*fakeTimer {
	var due, keep []*fakeTimer
	for _, t := range f.timers {
		if !t.at.After(f.now) {
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	f.timers = keep
	return due
}

type fakeTimer struct {
	clock *Fake
	at    time.Time
	f     func()
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	for i, x := range t.clock.timers {
		if x == t {
			t.clock.timers = append(t.clock.timers[:i], t.clock.timers[i+1:]...)
			return true
		}
	}
	return false
}
