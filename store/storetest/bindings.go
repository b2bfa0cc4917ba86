// This file is the conformance suite of bindingdb.Driver: every
// connector binding driver (store/sqlite now, a PostgreSQL
// driver later) runs Exercise from its tests and must pass it unchanged.

package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
)

// Open returns two drivers on one fresh, empty, migrated store, as two
// processes (the gateway and `agentgw connector auth`) would hold them.
type OpenBindings func(t *testing.T) (first, second bindingdb.Driver)

const (
	bindingEP  = "im@agents.example.test"
	bindingEP2 = "im2@agents.example.test"
	card       = "im.example"
	card2      = "im.other"
)

// Exercise runs every check of the suite against drivers from open.
func ExerciseBindings(t *testing.T, open OpenBindings) {
	t.Run("Absent", func(t *testing.T) { testAbsent(t, open) })
	t.Run("ChannelGeneration", func(t *testing.T) { testChannelGeneration(t, open) })
	t.Run("ConnectorIDKeepsGeneration", func(t *testing.T) { testConnectorID(t, open) })
	t.Run("SnapshotAndHealth", func(t *testing.T) { testSnapshotAndHealth(t, open) })
	t.Run("KeysAreIndependent", func(t *testing.T) { testKeys(t, open) })
	t.Run("Refusals", func(t *testing.T) { testBindingRefusals(t, open) })
	t.Run("OtherHandle", func(t *testing.T) { testBindingOtherHandle(t, open) })
	t.Run("Claims", func(t *testing.T) { testClaims(t, open) })
}

var bindingCtx = context.Background()

func get(t *testing.T, d bindingdb.Driver, endpoint, cardID string) bindingdb.Binding {
	t.Helper()
	b, err := d.Binding(bindingCtx, endpoint, cardID)
	if err != nil {
		t.Fatalf("Binding(%s, %s): %v", endpoint, cardID, err)
	}
	g, err := d.Generation(bindingCtx, endpoint, cardID)
	if err != nil {
		t.Fatalf("Generation(%s, %s): %v", endpoint, cardID, err)
	}
	if g != b.Generation {
		t.Fatalf("Generation = %d, Binding.Generation = %d", g, b.Generation)
	}
	return b
}

func setChannel(t *testing.T, d bindingdb.Driver, endpoint, cardID, ch string, auth bool) int64 {
	t.Helper()
	g, err := d.SetChannel(bindingCtx, endpoint, cardID, ch, auth)
	if err != nil {
		t.Fatalf("SetChannel(%s, %s, %q, %v): %v", endpoint, cardID, ch, auth, err)
	}
	return g
}

func testAbsent(t *testing.T, open OpenBindings) {
	d, _ := open(t)
	if b := get(t, d, bindingEP, card); b != (bindingdb.Binding{}) {
		t.Errorf("a missing binding reads %+v", b)
	}
}

func testChannelGeneration(t *testing.T, open OpenBindings) {
	d, _ := open(t)
	// The first write creates the row at generation 0 and then changes
	// it, so a bound channel is generation 1.
	if g := setChannel(t, d, bindingEP, card, "cch_1", true); g != 1 {
		t.Fatalf("first binding: generation %d, want 1", g)
	}
	if g := setChannel(t, d, bindingEP, card, "cch_1", true); g != 1 {
		t.Errorf("an unchanged binding moved the generation to %d", g)
	}
	if g := setChannel(t, d, bindingEP, card, "cch_1", false); g != 2 {
		t.Errorf("auth change: generation %d, want 2", g)
	}
	if g := setChannel(t, d, bindingEP, card, "cch_2", false); g != 3 {
		t.Errorf("channel change: generation %d, want 3", g)
	}
	if g := setChannel(t, d, bindingEP, card, "cch_3", true); g != 4 {
		t.Errorf("channel and auth change: generation %d, want 4 (one step per write)", g)
	}
	if b := get(t, d, bindingEP, card); b.ChannelID != "cch_3" || !b.Authenticated || b.Generation != 4 || b.ConnectorID != "" {
		t.Errorf("binding = %+v", b)
	}
	// Unbinding is a change too.
	if g := setChannel(t, d, bindingEP, card, "", false); g != 5 {
		t.Errorf("unbinding: generation %d, want 5", g)
	}
	// A fresh row that stays at the defaults does not move.
	if g := setChannel(t, d, bindingEP2, card, "", false); g != 0 {
		t.Errorf("a default binding: generation %d, want 0", g)
	}
}

func testConnectorID(t *testing.T, open OpenBindings) {
	d, _ := open(t)
	// On a missing row it creates one.
	if err := d.SetConnectorID(bindingCtx, bindingEP, card, "conn_1"); err != nil {
		t.Fatal(err)
	}
	if b := get(t, d, bindingEP, card); b.ConnectorID != "conn_1" || b.Generation != 0 || b.ChannelID != "" || b.Authenticated {
		t.Fatalf("after SetConnectorID: %+v", b)
	}
	setChannel(t, d, bindingEP, card, "cch_1", true)
	if err := d.SetConnectorID(bindingCtx, bindingEP, card, "conn_2"); err != nil {
		t.Fatal(err)
	}
	if b := get(t, d, bindingEP, card); b.ConnectorID != "conn_2" || b.Generation != 1 || b.ChannelID != "cch_1" || !b.Authenticated {
		t.Errorf("SetConnectorID changed the binding: %+v", b)
	}
}

func testSnapshotAndHealth(t *testing.T, open OpenBindings) {
	d, _ := open(t)
	if err := d.SaveSnapshot(bindingCtx, bindingEP, card, []byte(`{"connector_card_id":"im.example"}`), "# Skill"); err != nil {
		t.Fatal(err)
	}
	setChannel(t, d, bindingEP, card, "cch_1", true)
	if err := d.SaveSnapshot(bindingCtx, bindingEP, card, []byte(`{}`), ""); err != nil {
		t.Fatalf("a snapshot without Skill: %v", err)
	}
	for _, h := range []string{"unknown", "ok", "degraded", "offline", "unauthorized", "incompatible"} {
		if err := d.SetHealth(bindingCtx, bindingEP, card, h, "reason "+h); err != nil {
			t.Errorf("health %s: %v", h, err)
		}
	}
	if err := d.SetHealth(bindingCtx, bindingEP, card, "ok", strings.Repeat("é", bindingdb.MaxLastError)); err != nil {
		t.Errorf("a last error of MaxLastError characters: %v", err)
	}
	if err := d.SetHealth(bindingCtx, bindingEP2, card, "degraded", ""); err != nil {
		t.Errorf("health on a missing row: %v", err)
	}
	if b := get(t, d, bindingEP, card); b.Generation != 1 || b.ChannelID != "cch_1" || !b.Authenticated {
		t.Errorf("snapshots or health changed the binding: %+v", b)
	}
}

func testKeys(t *testing.T, open OpenBindings) {
	d, _ := open(t)
	setChannel(t, d, bindingEP, card, "cch_a", true)
	setChannel(t, d, bindingEP, card2, "cch_b", false)
	setChannel(t, d, bindingEP2, card, "cch_c", true)
	setChannel(t, d, bindingEP2, card, "cch_d", true)
	for _, c := range []struct {
		ep, card, ch string
		auth         bool
		gen          int64
	}{
		{bindingEP, card, "cch_a", true, 1},
		{bindingEP, card2, "cch_b", false, 1},
		{bindingEP2, card, "cch_d", true, 2},
	} {
		if b := get(t, d, c.ep, c.card); b.ChannelID != c.ch || b.Authenticated != c.auth || b.Generation != c.gen {
			t.Errorf("(%s, %s) = %+v", c.ep, c.card, b)
		}
	}
	if b := get(t, d, bindingEP2, card2); b != (bindingdb.Binding{}) {
		t.Errorf("an unwritten key reads %+v", b)
	}
}

func testBindingRefusals(t *testing.T, open OpenBindings) {
	d, _ := open(t)
	setChannel(t, d, bindingEP, card, "cch_1", true)
	// An authenticated binding always names its channel.
	if _, err := d.SetChannel(bindingCtx, bindingEP, card, "", true); err == nil {
		t.Error("an authenticated binding without a channel was stored")
	}
	if _, err := d.SetChannel(bindingCtx, bindingEP2, card, "", true); err == nil {
		t.Error("a new authenticated binding without a channel was stored")
	}
	if err := d.SetHealth(bindingCtx, bindingEP, card, "sleepy", ""); err == nil {
		t.Error("an unknown health state was stored")
	}
	if err := d.SetHealth(bindingCtx, bindingEP, card, "ok", strings.Repeat("x", bindingdb.MaxLastError+1)); err == nil {
		t.Error("an over-long last error was stored")
	}
	if _, err := d.SetChannel(bindingCtx, bindingEP, "", "cch_1", false); err == nil {
		t.Error("an empty connector_card_id was stored")
	}
	if err := d.SetConnectorID(bindingCtx, "a", card, "conn_1"); err == nil {
		t.Error("a too-short endpoint was stored")
	}
	if err := d.SetConnectorID(bindingCtx, bindingEP, card, strings.Repeat("c", 257)); err == nil {
		t.Error("an over-long connector_id was stored")
	}
	// Refused writes change nothing, and create no row.
	if b := get(t, d, bindingEP, card); b.ChannelID != "cch_1" || !b.Authenticated || b.Generation != 1 || b.ConnectorID != "" {
		t.Errorf("a refused write changed the binding: %+v", b)
	}
	if b := get(t, d, bindingEP2, card); b != (bindingdb.Binding{}) {
		t.Errorf("a refused write left %+v", b)
	}
}

func testBindingOtherHandle(t *testing.T, open OpenBindings) {
	gw, cli := open(t)
	setChannel(t, gw, bindingEP, card, "cch_1", false)
	// `agentgw connector auth` authenticates through its own handle; the
	// gateway sees the generation move.
	if g := setChannel(t, cli, bindingEP, card, "cch_1", true); g != 2 {
		t.Fatalf("other handle: generation %d, want 2", g)
	}
	if b := get(t, gw, bindingEP, card); b.Generation != 2 || !b.Authenticated {
		t.Errorf("the gateway reads %+v", b)
	}
}

func testClaims(t *testing.T, open OpenBindings) {
	d, _ := open(t)
	claim := func(cardID, endpoint string) string {
		t.Helper()
		owner, err := d.Claim(bindingCtx, cardID, endpoint)
		if err != nil {
			t.Fatalf("Claim(%s, %s): %v", cardID, endpoint, err)
		}
		return owner
	}
	if o := claim(card, bindingEP); o != bindingEP {
		t.Fatalf("first claim: owner %s", o)
	}
	if o := claim(card, bindingEP); o != bindingEP {
		t.Errorf("claiming again: owner %s", o)
	}
	if o := claim(card, bindingEP2); o != bindingEP {
		t.Errorf("a second agent took the card: owner %s", o)
	}
	if o := claim(card2, bindingEP2); o != bindingEP2 {
		t.Errorf("another card: owner %s", o)
	}
	d.Release(card, bindingEP2) // not the owner: nothing happens
	if o := claim(card, bindingEP2); o != bindingEP {
		t.Errorf("a non-owner released the claim: owner %s", o)
	}
	d.Release(card, bindingEP)
	if o := claim(card, bindingEP2); o != bindingEP2 {
		t.Errorf("after release: owner %s", o)
	}
	d.Release("", bindingEP) // an empty card releases nothing
	if o := claim(card2, bindingEP); o != bindingEP2 {
		t.Errorf("card2 owner %s", o)
	}
}
