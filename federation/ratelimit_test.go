package federation

import (
	"fmt"
	"testing"
	"time"
)

func TestLimiterPerJIDAndPerDomain(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewLimiter(map[Op]Rate{OpInvoke: {PerSecond: 1, Burst: 3}}, nil, 2, func(p string) bool { return DomainOf(p) == "example.test" })
	l.now = func() time.Time { return now }
	for i := 0; i < 3; i++ {
		if !l.Allow("eve@remote.test", OpInvoke) {
			t.Fatalf("request %d within the burst was refused", i)
		}
	}
	if l.Allow("eve@remote.test", OpInvoke) {
		t.Fatal("request beyond the burst was allowed")
	}
	// The domain's budget (burst 6) is shared: three more from another JID
	// fit, the fourth does not.
	for i := 0; i < 3; i++ {
		if !l.Allow("mallory@remote.test", OpInvoke) {
			t.Fatalf("second JID request %d refused", i)
		}
	}
	if l.Allow("trent@remote.test", OpInvoke) {
		t.Fatal("domain budget not enforced")
	}
	now = now.Add(2 * time.Second)
	if !l.Allow("eve@remote.test", OpInvoke) {
		t.Fatal("tokens did not refill")
	}
	// Local principals have no domain bucket.
	for i := 0; i < 3; i++ {
		l.Allow("a@example.test", OpInvoke)
	}
	if !l.Allow("b@example.test", OpInvoke) {
		t.Fatal("local domain was limited as a whole")
	}
	if !l.Allow("eve@remote.test", OpDiscovery) {
		t.Fatal("operations do not have separate budgets")
	}
}

// A domain rotating JIDs creates a bucket per JID. Eviction must drop the
// least recently used buckets, not the oldest: the rotating domain's own
// bucket and an active principal's are in use all along, and dropping them
// would hand out fresh budgets.
func TestLimiterEvictsLeastRecentlyUsed(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewLimiter(map[Op]Rate{OpInvoke: {PerSecond: 0.000001, Burst: 1}}, nil, 3, func(string) bool { return false })
	l.now = func() time.Time { return now }
	if !l.Allow("victim@busy.test", OpInvoke) {
		t.Fatal("first request refused")
	}
	allowed, victimAllowed := 0, 0
	for i := 0; i < 2*maxBuckets; i++ {
		if l.Allow(fmt.Sprintf("m%d@evil.test", i), OpInvoke) {
			allowed++
		}
		if i%1000 == 0 && l.Allow("victim@busy.test", OpInvoke) {
			victimAllowed++
		}
	}
	// The domain bucket holds 3 tokens and earns none while the clock
	// stands still.
	if allowed != 3 {
		t.Errorf("rotating JIDs of one domain got %d requests through, want the domain budget of 3", allowed)
	}
	if victimAllowed != 0 {
		t.Errorf("the exhausted active principal was let through %d times after its buckets were flushed", victimAllowed)
	}
	if len(l.buckets) > maxBuckets {
		t.Errorf("%d buckets kept, bound is %d", len(l.buckets), maxBuckets)
	}
}

// Local principals get budgets of their own, sized for service accounts;
// remote ones keep DefaultRates. A config field left at zero takes its
// default alone.
func TestLimiterLocalBudgets(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	isLocal := func(p string) bool { return DomainOf(p) == "example.test" }
	count := func(l *Limiter, principal string, op Op) int {
		n := 0
		for n < 100000 && l.Allow(principal, op) {
			n++
		}
		return n
	}
	l := NewLimiter(nil, nil, 0, isLocal)
	l.now = func() time.Time { return now }
	if got, want := count(l, "svc@example.test", OpInput), DefaultLocalRates[OpInput].Burst; got != want {
		t.Errorf("local input burst %d, want %d", got, want)
	}
	if got, want := count(l, "eve@remote.test", OpInput), DefaultRates[OpInput].Burst; got != want {
		t.Errorf("remote input burst %d, want %d", got, want)
	}
	l = NewLimiter(map[Op]Rate{OpInput: {Burst: 7}}, map[Op]Rate{OpInput: {Burst: 11}}, 0, isLocal)
	l.now = func() time.Time { return now }
	if got := count(l, "svc@example.test", OpInput); got != 11 {
		t.Errorf("configured local burst: %d, want 11", got)
	}
	if got := count(l, "eve@remote.test", OpInput); got != 7 {
		t.Errorf("configured remote burst: %d, want 7", got)
	}
	// The rate was left at zero: the default refills the bucket.
	now = now.Add(time.Second)
	if got, want := count(l, "svc@example.test", OpInput), 11; got != want {
		t.Errorf("after 1 s at the default local rate: %d, want %d (burst-capped)", got, want)
	}
}
