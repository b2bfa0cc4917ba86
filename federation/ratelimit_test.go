package federation

import (
	"testing"
	"time"
)

func TestLimiterPerJIDAndPerDomain(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := NewLimiter(map[Op]Rate{OpInvoke: {PerSecond: 1, Burst: 3}}, 2, func(p string) bool { return DomainOf(p) == "example.test" })
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
