package backoff

import (
	"testing"
	"time"
)

func TestBackoffGrowsCapsAndResets(t *testing.T) {
	min, max := 250*time.Millisecond, 30*time.Second
	top := &Backoff{min: min, max: max, rnd: func(n int64) int64 { return n - 1 }}
	bottom := &Backoff{min: min, max: max, rnd: func(int64) int64 { return 0 }}
	want := []time.Duration{min, 2 * min, 4 * min, 8 * min, 16 * min, 32 * min, 64 * min, max, max, max}
	for i, w := range want {
		if got := top.Next(); got != w {
			t.Fatalf("attempt %d: upper bound %v, want %v", i, got, w)
		}
		if got := bottom.Next(); got != min {
			t.Fatalf("attempt %d: lower bound %v, want %v", i, got, min)
		}
	}
	top.Reset()
	if got := top.Next(); got != min {
		t.Fatalf("after reset: %v, want %v", got, min)
	}
}

func TestBackoffJitterStaysInRange(t *testing.T) {
	b := New(100*time.Millisecond, 2*time.Second)
	seen := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		if i%10 == 0 {
			b.Reset()
		}
		ceil := b.ceiling()
		d := b.Next()
		if d < 100*time.Millisecond || d > ceil {
			t.Fatalf("delay %v outside [100ms, %v]", d, ceil)
		}
		seen[d] = true
	}
	if len(seen) < 20 {
		t.Fatalf("only %d distinct delays in 200 draws: no jitter", len(seen))
	}
}

func TestBackoffNoOverflow(t *testing.T) {
	b := &Backoff{min: time.Hour, max: 1 << 62, rnd: func(n int64) int64 { return n - 1 }}
	for i := 0; i < 100; i++ {
		if d := b.Next(); d <= 0 || d > 1<<62 {
			t.Fatalf("attempt %d: delay %v", i, d)
		}
	}
}
