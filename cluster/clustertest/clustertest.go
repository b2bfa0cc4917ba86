// Package clustertest is the conformance suite of cluster.Bus and
// cluster.Leases: cluster.Local and store/pg run Exercise.
package clustertest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/cluster"
)

// Member is one instance's view of the shared store.
type Member interface {
	cluster.Bus
	cluster.Leases
}

// Open returns n members sharing one fresh store. Shared reports whether
// they are really separate instances (a single-instance implementation
// returns the same member n times and skips the exclusion checks).
type Open func(t *testing.T, n int) (members []Member, shared bool)

// Exercise runs the suite.
func Exercise(t *testing.T, open Open) {
	t.Run("BusDelivers", func(t *testing.T) { testBus(t, open) })
	t.Run("LargePayload", func(t *testing.T) { testLarge(t, open) })
	t.Run("LeaseExclusive", func(t *testing.T) { testLease(t, open) })
}

func recv(t *testing.T, ch <-chan []byte, want []byte) {
	t.Helper()
	select {
	case got := <-ch:
		if !bytes.Equal(got, want) {
			t.Fatalf("payload %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("notification not delivered")
	}
}

func testBus(t *testing.T, open Open) {
	ms, _ := open(t, 2)
	ctx := context.Background()
	a, b := make(chan []byte, 8), make(chan []byte, 8)
	other := make(chan []byte, 8)
	stopA := ms[0].Subscribe("tasks", func(p []byte) { a <- p })
	defer stopA()
	stopB := ms[1].Subscribe("tasks", func(p []byte) { b <- p })
	stopO := ms[1].Subscribe("grants", func(p []byte) { other <- p })
	defer stopO()
	if err := ms[0].Publish(ctx, "tasks", []byte("cancel task-1")); err != nil {
		t.Fatal(err)
	}
	recv(t, a, []byte("cancel task-1")) // the publisher's own subscribers too
	recv(t, b, []byte("cancel task-1"))
	stopB()
	if err := ms[1].Publish(ctx, "tasks", []byte("second")); err != nil {
		t.Fatal(err)
	}
	recv(t, a, []byte("second"))
	select {
	case p := <-b:
		t.Fatalf("stopped subscriber got %q", p)
	case p := <-other:
		t.Fatalf("other channel got %q", p)
	case <-time.After(200 * time.Millisecond):
	}
	if err := ms[0].Publish(ctx, "tasks", make([]byte, cluster.MaxPayload+1)); err == nil {
		t.Fatal("a payload over MaxPayload was accepted")
	}
}

func testLarge(t *testing.T, open Open) {
	ms, _ := open(t, 2)
	ch := make(chan []byte, 2)
	defer ms[1].Subscribe("input", func(p []byte) { ch <- p })()
	big := []byte(strings.Repeat("0123456789abcdef", 64<<10/16)) // 64 KiB
	if err := ms[0].Publish(context.Background(), "input", big); err != nil {
		t.Fatal(err)
	}
	recv(t, ch, big)
}

func testLease(t *testing.T, open Open) {
	ms, shared := open(t, 2)
	ctx := context.Background()
	// Leases that must stay live across a step get a long TTL: a loaded
	// machine can stall a few seconds between two calls. Only the lease
	// meant to expire gets a short one.
	const live = time.Minute
	held, cur, err := ms[0].Acquire(ctx, "connector:x", "gw-1", live)
	if err != nil || !held || cur != "gw-1" {
		t.Fatalf("first acquire: %v %q %v", held, cur, err)
	}
	// Renewal by the holder.
	if held, _, err := ms[0].Acquire(ctx, "connector:x", "gw-1", live); err != nil || !held {
		t.Fatalf("renew: %v %v", held, err)
	}
	ls, err := ms[1].List(ctx)
	if err != nil || len(ls) != 1 || ls[0].Holder != "gw-1" || !ls[0].Live {
		t.Fatalf("List: %+v %v", ls, err)
	}
	if !shared {
		return
	}
	held, cur, err = ms[1].Acquire(ctx, "connector:x", "gw-2", live)
	if err != nil || held || cur != "gw-1" {
		t.Fatalf("second holder while live: %v %q %v", held, cur, err)
	}
	// Another name is independent.
	if held, _, err := ms[1].Acquire(ctx, "connector:y", "gw-2", live); err != nil || !held {
		t.Fatalf("other lease: %v %v", held, err)
	}
	// After expiry the other instance takes it, and the old holder's
	// renewal then fails. The holder renews with a short TTL to let it
	// expire.
	if held, _, err := ms[0].Acquire(ctx, "connector:x", "gw-1", time.Second); err != nil || !held {
		t.Fatalf("short renew: %v %v", held, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		held, cur, err = ms[1].Acquire(ctx, "connector:x", "gw-2", live)
		if err != nil {
			t.Fatal(err)
		}
		if held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("expired lease never taken over")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if held, cur, err := ms[0].Acquire(ctx, "connector:x", "gw-1", live); err != nil || held || cur != "gw-2" {
		t.Fatalf("old holder renewed a taken lease: %v %q %v", held, cur, err)
	}
	// Release by a non-holder is a no-op; by the holder frees it at once.
	if err := ms[0].Release(ctx, "connector:x", "gw-1"); err != nil {
		t.Fatal(err)
	}
	if held, _, _ := ms[0].Acquire(ctx, "connector:x", "gw-1", time.Second); held {
		t.Fatal("release by a non-holder freed the lease")
	}
	if err := ms[1].Release(ctx, "connector:x", "gw-2"); err != nil {
		t.Fatal(err)
	}
	if held, _, err := ms[0].Acquire(ctx, "connector:x", "gw-1", time.Second); err != nil || !held {
		t.Fatalf("acquire after release: %v %v", held, err)
	}
}
