// This file is the conformance suite of oandb.Driver: every driver
// (store/sqlite, store/pg) runs Exercise from its tests.

package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentgw/agentgw/oanbridge/oandb"
)

// Exercise runs the suite. open returns two drivers over one database
// (two processes sharing a store).
func ExerciseOAN(t *testing.T, open func(t *testing.T) (oandb.Driver, oandb.Driver)) {
	ctx := context.Background()
	const acct = "gofers@agents.example.test"

	t.Run("Cursor", func(t *testing.T) {
		d, _ := open(t)
		if _, err := d.Cursor(ctx, acct); !errors.Is(err, oandb.ErrNoCursor) {
			t.Fatalf("fresh cursor: %v", err)
		}
		if c, err := d.InitCursor(ctx, acct, 9); err != nil || c != 9 {
			t.Fatalf("init: %d %v", c, err)
		}
		// A second init keeps the first: a restart never rewinds.
		if c, err := d.InitCursor(ctx, acct, 3); err != nil || c != 9 {
			t.Fatalf("second init: %d %v", c, err)
		}
		// Numeric order: 10 > 9 (as text "10" < "9").
		ok, err := d.Apply(ctx, acct, oandb.Event{Seq: 10, EventID: "e10", Type: "gofer_message"}, oandb.Effect{}, false)
		if err != nil || !ok {
			t.Fatalf("apply 10: %v %v", ok, err)
		}
		if c, _ := d.Cursor(ctx, acct); c != 10 {
			t.Fatalf("cursor %d, want 10", c)
		}
		ok, _ = d.Apply(ctx, acct, oandb.Event{Seq: 9, EventID: "e9", Type: "gofer_message"}, oandb.Effect{}, false)
		if ok {
			t.Fatal("an event at or below the cursor was applied")
		}
		if err := d.Skip(ctx, acct, 12); err != nil {
			t.Fatal(err)
		}
		if err := d.Skip(ctx, acct, 11); err != nil {
			t.Fatal(err)
		}
		if c, _ := d.Cursor(ctx, acct); c != 12 {
			t.Fatalf("cursor after skips %d, want 12 (monotonic)", c)
		}
		if _, err := d.Apply(ctx, acct, oandb.Event{Seq: 0, EventID: "z"}, oandb.Effect{}, false); err == nil {
			t.Fatal("seq 0 accepted")
		}
		if _, err := d.Apply(ctx, acct, oandb.Event{Seq: 1 << 63, EventID: "z"}, oandb.Effect{}, false); err == nil {
			t.Fatal("seq beyond bigint accepted")
		}
	})

	t.Run("ApplyOnceWithEffects", func(t *testing.T) {
		a, b := open(t)
		eff := oandb.Effect{
			Items:         []oandb.Item{{EventID: "q1", Seq: 5, Kind: oandb.KindQuestion, GoferID: "g1", ReplyPath: "/gofers/g1/chat/messages", Envelope: []byte(`{}`)}},
			Outbound:      []oandb.Outbound{{ID: "out-q1", GoferID: "g1", Body: "hello"}},
			Conversations: []oandb.Conversation{{ConversationID: "c1", GoferID: "g1"}},
		}
		// Two drivers race to apply the same event: exactly one wins.
		var wg sync.WaitGroup
		wins := make(chan bool, 2)
		for _, d := range []oandb.Driver{a, b} {
			wg.Add(1)
			go func(d oandb.Driver) {
				defer wg.Done()
				ok, err := d.Apply(ctx, acct, oandb.Event{Seq: 5, EventID: "q1", Type: "gofer_question"}, eff, false)
				if err != nil {
					t.Error(err)
				}
				wins <- ok
			}(d)
		}
		wg.Wait()
		close(wins)
		n := 0
		for w := range wins {
			if w {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d drivers applied the event, want 1", n)
		}
		// The same event id with another seq is a duplicate too.
		if ok, _ := a.Apply(ctx, acct, oandb.Event{Seq: 50, EventID: "q1", Type: "gofer_question"}, eff, false); ok {
			t.Fatal("a duplicate event id with another seq was applied")
		}
		if seq, ok, err := a.SeenSeq(ctx, acct, "q1"); err != nil || !ok || seq != 5 {
			t.Fatalf("SeenSeq %d %v %v", seq, ok, err)
		}
		items, err := b.Items(ctx, acct, oandb.StatePending)
		if err != nil || len(items) != 1 || items[0].EventID != "q1" || items[0].GoferID != "g1" || items[0].ReplyPath == "" {
			t.Fatalf("items %+v %v", items, err)
		}
		out, err := b.PendingOutbound(ctx, acct)
		if err != nil || len(out) != 1 || out[0].Body != "hello" {
			t.Fatalf("outbound %+v %v", out, err)
		}
		if err := a.Delivered(ctx, acct, "out-q1"); err != nil {
			t.Fatal(err)
		}
		if out, _ := b.PendingOutbound(ctx, acct); len(out) != 0 {
			t.Fatalf("delivered message still pending: %+v", out)
		}
		if c, ok, err := b.Conversation(ctx, acct, "c1"); err != nil || !ok || c.GoferID != "g1" {
			t.Fatalf("conversation %+v %v %v", c, ok, err)
		}
		if _, ok, _ := b.Conversation(ctx, acct, "c2"); ok {
			t.Fatal("unknown conversation found")
		}
		// Imported events (/events/unresolved) are older than the cursor
		// and are applied by event id, without moving the cursor.
		before, _ := a.Cursor(ctx, acct)
		ok, err := a.Apply(ctx, acct, oandb.Event{Seq: 2, EventID: "old"}, oandb.Effect{}, true)
		if err != nil || !ok {
			t.Fatalf("import: %v %v", ok, err)
		}
		if after, _ := a.Cursor(ctx, acct); after != before {
			t.Fatalf("import moved the cursor %d → %d", before, after)
		}
		if ok, _ := a.Apply(ctx, acct, oandb.Event{Seq: 2, EventID: "old"}, oandb.Effect{}, true); ok {
			t.Fatal("a repeated import was applied")
		}
	})

	t.Run("TransitionExactlyOnce", func(t *testing.T) {
		a, b := open(t)
		a.Apply(ctx, acct, oandb.Event{Seq: 1, EventID: "m1", Type: "match_request"}, oandb.Effect{
			Items: []oandb.Item{{EventID: "m1", Seq: 1, Kind: oandb.KindMatchRequest, GoferID: "g", ReplyPath: "/match-requests/r/decision", Envelope: []byte(`{}`)}},
		}, false)
		var wg sync.WaitGroup
		wins := make(chan bool, 8)
		for i := 0; i < 8; i++ {
			d := a
			if i%2 == 1 {
				d = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := d.Transition(ctx, acct, "m1", []string{oandb.StatePending, oandb.StateDeferred}, oandb.StatePosting, `"accept"`)
				if err != nil {
					t.Error(err)
				}
				wins <- ok
			}()
		}
		wg.Wait()
		close(wins)
		n := 0
		for w := range wins {
			if w {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d transitions pending→posting won, want 1", n)
		}
		it, ok, err := b.Item(ctx, acct, "m1")
		if err != nil || !ok || it.State != oandb.StatePosting || it.Decision != `"accept"` {
			t.Fatalf("item %+v %v %v", it, ok, err)
		}
		if ok, _ := a.Transition(ctx, acct, "m1", []string{oandb.StatePosting}, oandb.StatePosted, ""); !ok {
			t.Fatal("posting → posted refused")
		}
		it, _, _ = a.Item(ctx, acct, "m1")
		if it.Decision != `"accept"` {
			t.Fatalf("an empty decision cleared the recorded one: %q", it.Decision)
		}
		// Close only touches open items.
		a.Apply(ctx, acct, oandb.Event{Seq: 2, EventID: "m1-decided"}, oandb.Effect{Close: []string{"m1"}}, false)
		if it, _, _ := a.Item(ctx, acct, "m1"); it.State != oandb.StatePosted {
			t.Fatalf("Close changed a posted item to %s", it.State)
		}
	})

	t.Run("Prune", func(t *testing.T) {
		d, _ := open(t)
		for i := uint64(1); i <= 5; i++ {
			d.Apply(ctx, acct, oandb.Event{Seq: i, EventID: "p" + string(rune('0'+i))}, oandb.Effect{
				Outbound: []oandb.Outbound{{ID: "o" + string(rune('0'+i)), Body: "x"}},
			}, false)
		}
		d.Delivered(ctx, acct, "o1")
		if err := d.Prune(ctx, acct, 4); err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{false, false, false, true, true} {
			_, ok, _ := d.SeenSeq(ctx, acct, "p"+string(rune('1'+i)))
			if ok != want {
				t.Errorf("event p%d kept=%v after Prune(4), want %v", i+1, ok, want)
			}
		}
		// The cursor still refuses the forgotten events.
		if ok, _ := d.Apply(ctx, acct, oandb.Event{Seq: 2, EventID: "p2"}, oandb.Effect{}, false); ok {
			t.Error("a pruned event below the cursor was applied again")
		}
		out, _ := d.PendingOutbound(ctx, acct)
		if len(out) != 4 {
			t.Errorf("%d undelivered messages after Prune, want 4 (only delivered ones go)", len(out))
		}
	})

	t.Run("Status", func(t *testing.T) {
		a, b := open(t)
		if st, key, err := a.Status(ctx, acct); err != nil || st != oandb.StatusOK || key != "" {
			t.Fatalf("fresh status %q %q %v", st, key, err)
		}
		if err := a.SetStatus(ctx, acct, oandb.StatusRevoked, "fp1"); err != nil {
			t.Fatal(err)
		}
		if st, key, _ := b.Status(ctx, acct); st != oandb.StatusRevoked || key != "fp1" {
			t.Fatalf("status %q %q", st, key)
		}
		b.Apply(ctx, acct, oandb.Event{Seq: 1, EventID: "ban"}, oandb.Effect{Status: oandb.StatusBanned}, false)
		if st, key, _ := a.Status(ctx, acct); st != oandb.StatusBanned || key != "fp1" {
			t.Fatalf("status after ban %q %q", st, key)
		}
	})
}
