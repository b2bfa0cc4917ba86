package clock

import (
	"testing"
	"time"
)

func TestFakeFiresAtBoundary(t *testing.T) {
	start := time.Date(2026, 7, 27, 19, 14, 0, 0, time.UTC)
	c := NewFake(start)
	fired := make(chan struct{}, 1)
	c.AfterFunc(time.Second, func() { fired <- struct{}{} })
	c.Advance(time.Second - time.Nanosecond)
	select {
	case <-fired:
		t.Fatal("timer fired a nanosecond early")
	default:
	}
	c.Advance(time.Nanosecond)
	select {
	case <-fired:
	default:
		t.Fatal("timer did not fire at its instant")
	}
	stopped := c.AfterFunc(time.Second, func() { t.Error("stopped timer fired") })
	if !stopped.Stop() {
		t.Fatal("Stop reported the timer was not pending")
	}
	c.Advance(2 * time.Second)
}
