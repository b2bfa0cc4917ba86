// This file is the conformance suite every sessiondb.Driver must pass.

package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/console/sessiondb"
)

// ExerciseConsoleSessions checks d's contract. open returns a new, empty
// driver and a function that opens a second driver on the same storage
// (as after a restart, or as another cluster member).
func ExerciseConsoleSessions(t *testing.T, open func(t *testing.T) (d sessiondb.Driver, reopen func() sessiondb.Driver)) {
	ctx := context.Background()
	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	now := time.Now().Truncate(time.Microsecond)

	t.Run("SharedAndExpiring", func(t *testing.T) {
		d, reopen := open(t)
		s := sessiondb.Session{IDHash: hash("a"), User: "ops@example.test", ByToken: true, Expires: now.Add(time.Hour)}
		if err := d.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := d.Create(ctx, s); err == nil {
			t.Error("a second session with the same ID hash was stored")
		}
		// Another member (or a restart) sees it.
		d2 := reopen()
		got, err := d2.Get(ctx, s.IDHash, now)
		if err != nil || got == nil || got.User != s.User || !got.ByToken || !got.Expires.Equal(s.Expires) {
			t.Fatalf("get from another driver: %+v %v", got, err)
		}
		if got, err := d.Get(ctx, s.IDHash, s.Expires); err != nil || got != nil {
			t.Errorf("an expired session: %+v %v", got, err)
		}
		if got, err := d.Get(ctx, hash("nope"), now); err != nil || got != nil {
			t.Errorf("an absent session: %+v %v", got, err)
		}
		if err := d2.Delete(ctx, s.IDHash); err != nil {
			t.Fatal(err)
		}
		if got, _ := d.Get(ctx, s.IDHash, now); got != nil {
			t.Error("a deleted session is still there")
		}
		if err := d.Delete(ctx, s.IDHash); err != nil {
			t.Errorf("deleting an absent session: %v", err)
		}
	})

	t.Run("NoteTakenOnce", func(t *testing.T) {
		d, reopen := open(t)
		id := hash("n")
		if err := d.Create(ctx, sessiondb.Session{IDHash: id, User: "ops@example.test", Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := d.SetNote(ctx, id, "Granted <b>x</b>.", true); err != nil {
			t.Fatal(err)
		}
		d2 := reopen()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var taken []string
		for _, x := range []sessiondb.Driver{d, d2, d, d2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, ok, err := x.TakeNote(ctx, id)
				if err != nil {
					t.Error(err)
				}
				if n != "" {
					mu.Lock()
					taken = append(taken, n)
					mu.Unlock()
					if !ok {
						t.Error("the note lost its ok")
					}
				}
			}()
		}
		wg.Wait()
		if len(taken) != 1 || taken[0] != "Granted <b>x</b>." {
			t.Errorf("the note was taken %d times: %q", len(taken), taken)
		}
		if n, _, err := d.TakeNote(ctx, hash("absent")); n != "" || err != nil {
			t.Errorf("an absent session's note: %q %v", n, err)
		}
	})

	t.Run("Purge", func(t *testing.T) {
		d, _ := open(t)
		for i, exp := range []time.Duration{-time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour} {
			if err := d.Create(ctx, sessiondb.Session{IDHash: hash(string(rune('p' + i))), User: "ops@example.test", Expires: now.Add(exp)}); err != nil {
				t.Fatal(err)
			}
		}
		n, err := d.Purge(ctx, now, 2)
		if err != nil || n != 2 {
			t.Fatalf("purge: %d %v, want the expired one and the one expiring first", n, err)
		}
		for i, want := range []bool{false, false, true, true} {
			got, _ := d.Get(ctx, hash(string(rune('p'+i))), now)
			if (got != nil) != want {
				t.Errorf("session %d kept %v, want %v", i, got != nil, want)
			}
		}
	})
}
