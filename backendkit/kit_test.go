package backendkit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"
)

// The digest of one part is the plain SHA-256 prefix (the MCP bridge's
// versions before the kit); of several, the NUL-joined parts (the
// connector bridge's framing).
func TestVersionDigest(t *testing.T) {
	one := sha256.Sum256([]byte("manifest"))
	if got := VersionDigest([]byte("manifest")); got != hex.EncodeToString(one[:DigestBytes]) || len(got) != 16 {
		t.Errorf("one part: %s", got)
	}
	three := sha256.Sum256([]byte("m\x00b\x00p"))
	if got := VersionDigest([]byte("m"), []byte("b"), []byte("p")); got != hex.EncodeToString(three[:DigestBytes]) {
		t.Errorf("three parts: %s", got)
	}
}

type recPub struct{ n int }

func (p *recPub) Publish(_ context.Context, m []byte) (string, string, error) {
	p.n++
	return "v-" + string(m), "h", nil
}

func TestManifestsSkipIdenticalContent(t *testing.T) {
	p := &recPub{}
	m := NewManifests(p)
	if m.Ready() {
		t.Fatal("ready before publishing")
	}
	for i, c := range []string{"a", "a", "b"} {
		published, v, _, err := m.Publish(context.Background(), "own", []byte(c))
		if err != nil || published == (i == 1) || v != "v-"+c {
			t.Errorf("%d: %v %s %v", i, published, v, err)
		}
	}
	if p.n != 2 || !m.Ready() || string(m.Last()) != "b" {
		t.Errorf("published %d times, last %s", p.n, m.Last())
	}
}

type recAvail []bool

func (r *recAvail) SetAvailable(_ string, up bool) { *r = append(*r, up) }

func TestPresenceReportsChangesOnly(t *testing.T) {
	var r recAvail
	p := NewPresence("a@b", &r)
	for _, up := range []bool{false, false, true, true, false} {
		p.Set(up)
	}
	if len(r) != 3 || r[0] || !r[1] || r[2] {
		t.Errorf("reports %v", r)
	}
	NewPresence("a@b", nil).Set(true) // nil Availability: no report, no panic
}

// Failed attempts wait longer and longer (never below Min, never above
// Max); a session that stayed up StableAfter starts again from Min.
func TestSupervisorBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ups := []time.Duration{0, 0, 0, 0, time.Minute, 0}
	var waits []time.Duration
	n := 0
	Supervisor{
		Min: time.Second, Max: 4 * time.Second, StableAfter: 30 * time.Second,
		Sleep: func(_ context.Context, d time.Duration) bool { waits = append(waits, d); return true },
	}.Run(ctx, func(context.Context) (time.Duration, error) {
		up := ups[n]
		if n++; n == len(ups) {
			cancel()
		}
		return up, nil
	}, nil)
	if len(waits) != len(ups)-1 {
		t.Fatalf("waits %v", waits)
	}
	for i, w := range waits {
		if w < time.Second || w > 4*time.Second {
			t.Errorf("wait %d = %v", i, w)
		}
	}
	if waits[0] != time.Second || waits[4] != time.Second {
		t.Errorf("first wait %v, wait after a stable session %v; want Min", waits[0], waits[4])
	}
}
