// This file is the conformance suite every selfregdb.Driver
// must pass. A driver's own test calls Run with a factory of empty stores.

package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentgw/agentgw/directory/selfregdb"
)

// Run checks d's contract. open returns a new, empty driver; reopen (may be
// nil) returns a second driver on the same storage, as after a restart.
func ExerciseSelfReg(t *testing.T, open func(t *testing.T) (d selfregdb.Driver, reopen func() selfregdb.Driver)) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

	t.Run("records", func(t *testing.T) {
		d, _ := open(t)
		if rs, err := d.Records(ctx); err != nil || len(rs) != 0 {
			t.Fatalf("empty store: %v %v", rs, err)
		}
		mustSelfReg(t, d.Record(ctx, "zed@example.test", t0))
		mustSelfReg(t, d.Record(ctx, "bot@example.test", t0))
		mustSelfReg(t, d.Record(ctx, "bot@example.test", t0.Add(time.Hour)))
		rs, err := d.Records(ctx)
		mustSelfReg(t, err)
		if len(rs) != 2 || rs[0].Endpoint != "bot@example.test" || rs[1].Endpoint != "zed@example.test" {
			t.Fatalf("records %+v, want bot then zed", rs)
		}
		if !rs[0].First.Equal(t0) || !rs[0].Last.Equal(t0.Add(time.Hour)) {
			t.Fatalf("bot first %v last %v, want %v and an hour later", rs[0].First, rs[0].Last, t0)
		}
	})

	t.Run("bans", func(t *testing.T) {
		d, reopen := open(t)
		if b, err := d.Banned(ctx, "bot@example.test"); err != nil || b {
			t.Fatalf("banned before any ban: %v %v", b, err)
		}
		mustSelfReg(t, d.Ban(ctx, "bot@example.test", "spam", t0))
		mustSelfReg(t, d.Ban(ctx, "bot@example.test", "still spam", t0.Add(time.Hour)))
		if b, err := d.Banned(ctx, "bot@example.test"); err != nil || !b {
			t.Fatalf("not banned after Ban: %v %v", b, err)
		}
		if b, _ := d.Banned(ctx, "other@example.test"); b {
			t.Fatal("an unrelated endpoint is banned")
		}
		bans, err := d.Bans(ctx)
		mustSelfReg(t, err)
		if len(bans) != 1 || bans[0].Reason != "still spam" || !bans[0].At.Equal(t0) {
			t.Fatalf("bans %+v, want one with the new reason and the first time", bans)
		}
		if reopen != nil {
			d2 := reopen()
			if b, err := d2.Banned(ctx, "bot@example.test"); err != nil || !b {
				t.Fatalf("ban lost on reopen: %v %v", b, err)
			}
		}
		if ok, err := d.Unban(ctx, "bot@example.test"); err != nil || !ok {
			t.Fatalf("unban: %v %v", ok, err)
		}
		if ok, err := d.Unban(ctx, "bot@example.test"); err != nil || ok {
			t.Fatalf("second unban reported a ban: %v %v", ok, err)
		}
		if b, _ := d.Banned(ctx, "bot@example.test"); b {
			t.Fatal("still banned after Unban")
		}
	})
}

func mustSelfReg(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
