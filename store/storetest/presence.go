// This file is the conformance suite every presencedb.Driver must pass.

package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/agentgw/agentgw/directory/presencedb"
)

// ExercisePresence checks d's contract. open returns a new, empty driver
// and a function that opens a second driver on the same storage (as
// after a restart, or as another cluster member).
func ExercisePresence(t *testing.T, open func(t *testing.T) (d presencedb.Driver, reopen func() presencedb.Driver)) {
	ctx := context.Background()
	must := func(t *testing.T, ok bool, err error, want bool, what string) {
		t.Helper()
		if err != nil || ok != want {
			t.Fatalf("%s: %v %v, want %v", what, ok, err, want)
		}
	}
	list := func(t *testing.T, d presencedb.Driver, ep string) []string {
		t.Helper()
		s, err := d.Subscribers(ctx, ep)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("SubscribeUnsubscribe", func(t *testing.T) {
		d, reopen := open(t)
		ok, err := d.Subscribe(ctx, "a@gw.test", "zed@example.test", 10)
		must(t, ok, err, true, "subscribe")
		ok, err = d.Subscribe(ctx, "a@gw.test", "bob@example.test", 10)
		must(t, ok, err, true, "subscribe bob")
		ok, err = d.Subscribe(ctx, "a@gw.test", "bob@example.test", 10)
		must(t, ok, err, true, "subscribe bob again")
		ok, err = d.Subscribe(ctx, "b@gw.test", "bob@example.test", 10)
		must(t, ok, err, true, "subscribe bob to b")
		if got := list(t, d, "a@gw.test"); !slices.Equal(got, []string{"bob@example.test", "zed@example.test"}) {
			t.Fatalf("subscribers of a: %v", got)
		}
		// The set outlives the handle: a restart, or another member.
		d2 := reopen()
		if got := list(t, d2, "a@gw.test"); len(got) != 2 {
			t.Fatalf("subscribers of a after reopening: %v", got)
		}
		eps, err := d2.Endpoints(ctx)
		if err != nil || !slices.Equal(eps, []string{"a@gw.test", "b@gw.test"}) {
			t.Fatalf("endpoints %v %v", eps, err)
		}
		ok, err = d2.Unsubscribe(ctx, "a@gw.test", "bob@example.test")
		must(t, ok, err, true, "unsubscribe")
		ok, err = d2.Unsubscribe(ctx, "a@gw.test", "bob@example.test")
		must(t, ok, err, false, "unsubscribe again")
		if got := list(t, d, "a@gw.test"); !slices.Equal(got, []string{"zed@example.test"}) {
			t.Fatalf("subscribers of a after unsubscribe: %v", got)
		}
		if got := list(t, d, "b@gw.test"); !slices.Equal(got, []string{"bob@example.test"}) {
			t.Fatalf("b lost bob: %v", got)
		}
	})

	t.Run("Bound", func(t *testing.T) {
		d, reopen := open(t)
		d2 := reopen()
		// Two handles subscribing at once never pass the bound together.
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := d
				if i%2 == 1 {
					h = d2
				}
				if _, err := h.Subscribe(ctx, "a@gw.test", fmt.Sprintf("u%02d@example.test", i), 5); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got := list(t, d, "a@gw.test"); len(got) != 5 {
			t.Fatalf("%d subscribers with a bound of 5: %v", len(got), got)
		}
		ok, err := d.Subscribe(ctx, "a@gw.test", "late@example.test", 5)
		must(t, ok, err, false, "a subscriber past the bound")
		got := list(t, d, "a@gw.test")
		ok, err = d.Subscribe(ctx, "a@gw.test", got[0], 5)
		must(t, ok, err, true, "a remembered subscriber at the bound")
	})
}
