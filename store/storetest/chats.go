// This file is the conformance suite of chatdb.Driver: every chat
// queue driver (store/sqlite, store/pg)
// runs Exercise from its tests and must pass it unchanged.

package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentgw/agentgw/connectorbridge/chatdb"
)

// Open returns two drivers on one fresh, empty, migrated store, as a
// gateway and its restarted successor would hold them.
type OpenChats func(t *testing.T) (first, second chatdb.Driver)

const (
	chatEP  = "im@agents.example.test"
	chatEP2 = "im2@agents.example.test"
)

var chatCtx = context.Background()

// Exercise runs every check of the suite against drivers from open.
func ExerciseChats(t *testing.T, open OpenChats) {
	t.Run("EnqueueOnce", func(t *testing.T) { testEnqueueOnce(t, open) })
	t.Run("PendingOrderAndKeys", func(t *testing.T) { testPending(t, open) })
	t.Run("FinishIsTerminal", func(t *testing.T) { testFinish(t, open) })
	t.Run("ReopenDelivered", func(t *testing.T) { testReopen(t, open) })
	t.Run("Backlog", func(t *testing.T) { testBacklog(t, open) })
	t.Run("Purge", func(t *testing.T) { testChatPurge(t, open) })
	t.Run("Refusals", func(t *testing.T) { testChatRefusals(t, open) })
}

func item(dir chatdb.Direction, id, conv string) chatdb.Item {
	now := time.Now()
	return chatdb.Item{Endpoint: chatEP, Direction: dir, MessageID: id, ChannelID: "cch_1", Conversation: conv,
		Payload: []byte(`{"id":"` + id + `"}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
}

func enqueue(t *testing.T, d chatdb.Driver, it chatdb.Item) (bool, chatdb.State) {
	t.Helper()
	ins, st, err := d.Enqueue(chatCtx, it)
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", it.MessageID, err)
	}
	return ins, st
}

func chatIDs(t *testing.T, d chatdb.Driver, endpoint string, dir chatdb.Direction) []string {
	t.Helper()
	items, err := d.Pending(chatCtx, endpoint, dir, 100)
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.MessageID)
	}
	return out
}

func testEnqueueOnce(t *testing.T, open OpenChats) {
	a, b := open(t)
	it := item(chatdb.Inbound, "m1", "c1")
	if ins, st := enqueue(t, a, it); !ins || st != chatdb.Pending {
		t.Fatalf("first Enqueue = %v %s, want true pending", ins, st)
	}
	// The same id from the other handle (a restarted gateway) is a no-op.
	it2 := it
	it2.Payload = []byte(`{"other":true}`)
	if ins, st := enqueue(t, b, it2); ins || st != chatdb.Pending {
		t.Fatalf("second Enqueue = %v %s, want false pending", ins, st)
	}
	got, err := b.Pending(chatCtx, chatEP, chatdb.Inbound, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("Pending = %v, %v; want one item", got, err)
	}
	g := got[0]
	if string(g.Payload) != string(it.Payload) || g.ChannelID != "cch_1" || g.Conversation != "c1" ||
		g.ExpiresAt.UnixMilli() != it.ExpiresAt.UnixMilli() || g.CreatedAt.UnixMilli() != it.CreatedAt.UnixMilli() ||
		g.State != chatdb.Pending || g.Attempts != 0 {
		t.Fatalf("Pending item = %+v, want the first enqueue's fields", g)
	}
	if st, found, err := b.Lookup(chatCtx, chatEP, chatdb.Inbound, "m1"); err != nil || !found || st != chatdb.Pending {
		t.Fatalf("Lookup = %s %v %v", st, found, err)
	}
	if _, found, err := b.Lookup(chatCtx, chatEP, chatdb.Outbound, "m1"); err != nil || found {
		t.Fatalf("Lookup(other direction) = %v %v", found, err)
	}
	if err := a.Finish(chatCtx, chatEP, chatdb.Inbound, "m1", chatdb.Delivered); err != nil {
		t.Fatal(err)
	}
	if st, found, _ := b.Lookup(chatCtx, chatEP, chatdb.Inbound, "m1"); !found || st != chatdb.Delivered {
		t.Fatalf("Lookup after Finish = %s %v", st, found)
	}
	// A redelivery after delivery is recognised and stays delivered.
	if ins, st := enqueue(t, b, it); ins || st != chatdb.Delivered {
		t.Fatalf("Enqueue after delivery = %v %s, want false delivered", ins, st)
	}
	if got := chatIDs(t, a, chatEP, chatdb.Inbound); len(got) != 0 {
		t.Fatalf("Pending after delivery = %v", got)
	}
}

func testPending(t *testing.T, open OpenChats) {
	a, b := open(t)
	for i := 0; i < 5; i++ {
		enqueue(t, a, item(chatdb.Inbound, fmt.Sprintf("m%d", i), "c"))
	}
	enqueue(t, a, item(chatdb.Outbound, "m1", "c")) // same id, other direction: another row
	other := item(chatdb.Inbound, "m1", "c")
	other.Endpoint = chatEP2
	enqueue(t, a, other)
	if got := fmt.Sprint(chatIDs(t, b, chatEP, chatdb.Inbound)); got != "[m0 m1 m2 m3 m4]" {
		t.Fatalf("inbound order = %s", got)
	}
	if got := fmt.Sprint(chatIDs(t, b, chatEP, chatdb.Outbound)); got != "[m1]" {
		t.Fatalf("outbound = %s", got)
	}
	if got := fmt.Sprint(chatIDs(t, b, chatEP2, chatdb.Inbound)); got != "[m1]" {
		t.Fatalf("other endpoint = %s", got)
	}
	lim, err := b.Pending(chatCtx, chatEP, chatdb.Inbound, 2)
	if err != nil || len(lim) != 2 || lim[0].MessageID != "m0" {
		t.Fatalf("Pending limit 2 = %v, %v", lim, err)
	}
	if err := a.Attempt(chatCtx, chatEP, chatdb.Inbound, "m2"); err != nil {
		t.Fatal(err)
	}
	if err := a.Attempt(chatCtx, chatEP, chatdb.Inbound, "m2"); err != nil {
		t.Fatal(err)
	}
	all, _ := b.Pending(chatCtx, chatEP, chatdb.Inbound, 10)
	if all[2].MessageID != "m2" || all[2].Attempts != 2 {
		t.Fatalf("attempts = %+v", all[2])
	}
}

func testFinish(t *testing.T, open OpenChats) {
	a, b := open(t)
	for _, id := range []string{"d", "e", "f"} {
		enqueue(t, a, item(chatdb.Outbound, id, ""))
	}
	for id, st := range map[string]chatdb.State{"d": chatdb.Delivered, "e": chatdb.Expired, "f": chatdb.Failed} {
		if err := a.Finish(chatCtx, chatEP, chatdb.Outbound, id, st); err != nil {
			t.Fatalf("Finish(%s, %s): %v", id, st, err)
		}
		if err := b.Finish(chatCtx, chatEP, chatdb.Outbound, id, chatdb.Delivered); !errors.Is(err, chatdb.ErrNotPending) {
			t.Fatalf("second Finish(%s) = %v, want ErrNotPending", id, err)
		}
		if _, got := enqueue(t, b, item(chatdb.Outbound, id, "")); got != st {
			t.Fatalf("state of %s = %s, want %s", id, got, st)
		}
	}
	if err := a.Finish(chatCtx, chatEP, chatdb.Outbound, "absent", chatdb.Delivered); !errors.Is(err, chatdb.ErrNotPending) {
		t.Fatalf("Finish(absent) = %v", err)
	}
	if err := a.Attempt(chatCtx, chatEP, chatdb.Outbound, "d"); !errors.Is(err, chatdb.ErrNotPending) {
		t.Fatalf("Attempt(delivered) = %v", err)
	}
	enqueue(t, a, item(chatdb.Outbound, "g", ""))
	if err := a.Finish(chatCtx, chatEP, chatdb.Outbound, "g", chatdb.Pending); err == nil {
		t.Fatal("Finish to pending accepted")
	}
}

func testReopen(t *testing.T, open OpenChats) {
	a, b := open(t)
	for _, id := range []string{"r1", "r2", "r3"} {
		enqueue(t, a, item(chatdb.Inbound, id, ""))
	}
	a.Finish(chatCtx, chatEP, chatdb.Inbound, "r1", chatdb.Delivered)
	a.Finish(chatCtx, chatEP, chatdb.Inbound, "r2", chatdb.Expired)
	if err := b.Reopen(chatCtx, chatEP, chatdb.Inbound, "r1"); err != nil {
		t.Fatalf("Reopen(delivered) = %v", err)
	}
	for id, want := range map[string]error{"r1": chatdb.ErrNotPending, "r2": chatdb.ErrNotPending, "r3": chatdb.ErrNotPending, "absent": chatdb.ErrNotPending} {
		if err := a.Reopen(chatCtx, chatEP, chatdb.Inbound, id); !errors.Is(err, want) {
			t.Fatalf("Reopen(%s) = %v, want %v", id, err, want)
		}
	}
	if err := a.Reopen(chatCtx, chatEP, chatdb.Outbound, "r1"); !errors.Is(err, chatdb.ErrNotPending) {
		t.Fatalf("Reopen in the other direction = %v", err)
	}
	// Back in its place: before r3, pending, counted, its attempts kept.
	items, err := b.Pending(chatCtx, chatEP, chatdb.Inbound, 10)
	if err != nil || len(items) != 2 || items[0].MessageID != "r1" || items[1].MessageID != "r3" {
		t.Fatalf("Pending after Reopen = %+v %v", items, err)
	}
	if n, _ := a.Backlog(chatCtx, chatEP, chatdb.Inbound, ""); n != 2 {
		t.Fatalf("Backlog after Reopen = %d", n)
	}
	if err := a.Attempt(chatCtx, chatEP, chatdb.Inbound, "r1"); err != nil {
		t.Fatalf("Attempt after Reopen = %v", err)
	}
}

func testBacklog(t *testing.T, open OpenChats) {
	a, b := open(t)
	enqueue(t, a, item(chatdb.Inbound, "1", "x"))
	enqueue(t, a, item(chatdb.Inbound, "2", "x"))
	enqueue(t, a, item(chatdb.Inbound, "3", "y"))
	enqueue(t, a, item(chatdb.Outbound, "4", "x"))
	check := func(conv string, want int) {
		t.Helper()
		n, err := b.Backlog(chatCtx, chatEP, chatdb.Inbound, conv)
		if err != nil || n != want {
			t.Fatalf("Backlog(%q) = %d, %v; want %d", conv, n, err, want)
		}
	}
	check("", 3)
	check("x", 2)
	check("y", 1)
	check("z", 0)
	a.Finish(chatCtx, chatEP, chatdb.Inbound, "1", chatdb.Delivered)
	check("x", 1)
	check("", 2)
}

func testChatPurge(t *testing.T, open OpenChats) {
	a, b := open(t)
	old := item(chatdb.Inbound, "old", "")
	old.CreatedAt = time.Now().Add(-48 * time.Hour)
	enqueue(t, a, old)
	oldPending := item(chatdb.Inbound, "oldpending", "")
	oldPending.CreatedAt = old.CreatedAt
	enqueue(t, a, oldPending)
	enqueue(t, a, item(chatdb.Inbound, "new", ""))
	a.Finish(chatCtx, chatEP, chatdb.Inbound, "old", chatdb.Delivered)
	a.Finish(chatCtx, chatEP, chatdb.Inbound, "new", chatdb.Delivered)
	n, err := b.Purge(chatCtx, time.Now().Add(-24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1", n, err)
	}
	// The purged id is new again; the recent one is still recognised.
	if ins, _ := enqueue(t, a, old); !ins {
		t.Fatal("a purged id was not enqueued again")
	}
	if ins, _ := enqueue(t, a, item(chatdb.Inbound, "new", "")); ins {
		t.Fatal("a recent terminal id was enqueued again")
	}
	if got := fmt.Sprint(chatIDs(t, b, chatEP, chatdb.Inbound)); got != "[oldpending old]" {
		t.Fatalf("pending after purge = %s", got)
	}
}

func testChatRefusals(t *testing.T, open OpenChats) {
	a, _ := open(t)
	big := item(chatdb.Inbound, "big", "")
	big.Payload = make([]byte, chatdb.MaxPayload+1)
	if _, _, err := a.Enqueue(chatCtx, big); err == nil {
		t.Fatal("oversize payload accepted")
	}
	bad := item("sideways", "x", "")
	if _, _, err := a.Enqueue(chatCtx, bad); err == nil {
		t.Fatal("unknown direction accepted")
	}
}
