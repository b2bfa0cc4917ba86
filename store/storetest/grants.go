// This file is the conformance suite of federation.GrantStore:
// every grant driver (store/sqlite now, a PostgreSQL driver
// later) runs Exercise from its tests and must pass it unchanged.

package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentgw/agentgw/federation"
)

// Open returns two handles on one fresh, empty, migrated store, as two
// processes (the gateway and `agentgw trust`) would hold them.
type OpenGrants func(t *testing.T) (first, second federation.GrantStore)

const (
	vis  = federation.ScopeVisibility
	inv  = federation.ScopeInvocation
	both = vis | inv
)

// Exercise runs every check of the suite against stores from open.
func ExerciseGrants(t *testing.T, open OpenGrants) {
	t.Run("GrantListAndMerge", func(t *testing.T) { testGrantListAndMerge(t, open) })
	t.Run("InvalidScope", func(t *testing.T) { testInvalidScope(t, open) })
	t.Run("Revoke", func(t *testing.T) { testRevoke(t, open) })
	t.Run("ListOrder", func(t *testing.T) { testListOrder(t, open) })
	t.Run("Generation", func(t *testing.T) { testGeneration(t, open) })
}

func list(t *testing.T, s federation.GrantStore) []federation.Grant {
	t.Helper()
	gs, err := s.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return gs
}

func grantGen(t *testing.T, s federation.GrantStore) int64 {
	t.Helper()
	g, err := s.Generation(context.Background())
	if err != nil {
		t.Fatalf("Generation: %v", err)
	}
	return g
}

func grant(t *testing.T, s federation.GrantStore, principal, endpoint string, scope federation.Scope) {
	t.Helper()
	if err := s.Grant(context.Background(), federation.Grant{Principal: principal, Endpoint: endpoint, Scope: scope}); err != nil {
		t.Fatalf("Grant(%s, %q, %d): %v", principal, endpoint, scope, err)
	}
}

func testGrantListAndMerge(t *testing.T, open OpenGrants) {
	s, _ := open(t)
	if gs := list(t, s); len(gs) != 0 {
		t.Fatalf("a fresh store lists %+v", gs)
	}
	before := time.Now().Add(-time.Minute)
	grant(t, s, "remote.example", "", vis)
	gs := list(t, s)
	if len(gs) != 1 || gs[0].Principal != "remote.example" || gs[0].Endpoint != "" || gs[0].Scope != vis {
		t.Fatalf("after one grant: %+v", gs)
	}
	if gs[0].Created.Before(before) || gs[0].Created.After(time.Now().Add(time.Minute)) {
		t.Errorf("Created = %v, want about now", gs[0].Created)
	}
	// The same key merges scopes instead of adding a row.
	grant(t, s, "remote.example", "", inv)
	if gs := list(t, s); len(gs) != 1 || gs[0].Scope != both {
		t.Fatalf("merged grant: %+v", gs)
	}
	grant(t, s, "remote.example", "", vis)
	if gs := list(t, s); len(gs) != 1 || gs[0].Scope != both {
		t.Fatalf("granting a held bit again: %+v", gs)
	}
	// An endpoint grant is a separate row from the all-endpoints grant.
	grant(t, s, "remote.example", "weather@agents.example", inv)
	gs = list(t, s)
	if len(gs) != 2 || gs[0].Endpoint != "" || gs[1].Endpoint != "weather@agents.example" || gs[1].Scope != inv {
		t.Fatalf("endpoint grant: %+v", gs)
	}
}

func testInvalidScope(t *testing.T, open OpenGrants) {
	s, _ := open(t)
	ctx := context.Background()
	g0 := grantGen(t, s)
	for _, sc := range []federation.Scope{0, 4, both | 4, -1} {
		if err := s.Grant(ctx, federation.Grant{Principal: "bot@remote.example", Scope: sc}); err == nil {
			t.Errorf("scope %d accepted", sc)
		}
	}
	if gs := list(t, s); len(gs) != 0 {
		t.Errorf("a refused grant was stored: %+v", gs)
	}
	if g := grantGen(t, s); g != g0 {
		t.Errorf("a refused grant moved the generation %d -> %d", g0, g)
	}
}

func testRevoke(t *testing.T, open OpenGrants) {
	s, _ := open(t)
	ctx := context.Background()
	revoke := func(p, ep string, sc federation.Scope) bool {
		t.Helper()
		removed, err := s.Revoke(ctx, p, ep, sc)
		if err != nil {
			t.Fatalf("Revoke(%s, %q, %d): %v", p, ep, sc, err)
		}
		return removed
	}
	if revoke("nobody@remote.example", "", both) {
		t.Error("revoking a missing grant reported removal")
	}
	grant(t, s, "bot@remote.example", "", both)
	grant(t, s, "bot@remote.example", "weather@agents.example", vis)
	// Clearing one bit keeps the grant with the other.
	if !revoke("bot@remote.example", "", inv) {
		t.Error("revoking a held bit reported nothing removed")
	}
	gs := list(t, s)
	if len(gs) != 2 || gs[0].Endpoint != "" || gs[0].Scope != vis {
		t.Fatalf("after a partial revoke: %+v", gs)
	}
	if revoke("bot@remote.example", "", inv) {
		t.Error("revoking a bit no longer held reported removal")
	}
	// Revoke matches the exact endpoint: the endpoint grant is untouched.
	if !revoke("bot@remote.example", "", both) {
		t.Error("revoking the last bit reported nothing removed")
	}
	gs = list(t, s)
	if len(gs) != 1 || gs[0].Endpoint != "weather@agents.example" || gs[0].Scope != vis {
		t.Fatalf("revoking the all-endpoints grant touched another: %+v", gs)
	}
	if revoke("bot@remote.example", "other@agents.example", vis) {
		t.Error("revoking at another endpoint reported removal")
	}
	if !revoke("bot@remote.example", "weather@agents.example", vis) {
		t.Error("revoking the endpoint grant reported nothing removed")
	}
	if gs := list(t, s); len(gs) != 0 {
		t.Fatalf("a grant without scope was kept: %+v", gs)
	}
}

func testListOrder(t *testing.T, open OpenGrants) {
	s, _ := open(t)
	grant(t, s, "zed.example", "", vis)
	grant(t, s, "bot@a.example", "weather@agents.example", inv)
	grant(t, s, "a.example", "x@agents.example", vis)
	grant(t, s, "bot@a.example", "", vis)
	grant(t, s, "a.example", "", inv)
	want := [][2]string{{"a.example", ""}, {"a.example", "x@agents.example"}, {"bot@a.example", ""},
		{"bot@a.example", "weather@agents.example"}, {"zed.example", ""}}
	gs := list(t, s)
	if len(gs) != len(want) {
		t.Fatalf("List = %+v", gs)
	}
	for i, g := range gs {
		if g.Principal != want[i][0] || g.Endpoint != want[i][1] {
			t.Errorf("List[%d] = %s %q, want %s %q", i, g.Principal, g.Endpoint, want[i][0], want[i][1])
		}
	}
}

func testGeneration(t *testing.T, open OpenGrants) {
	gw, cli := open(t)
	g0 := grantGen(t, gw)
	if g := grantGen(t, cli); g != g0 {
		t.Fatalf("two handles disagree on the generation: %d, %d", g0, g)
	}
	grant(t, cli, "remote.example", "", vis)
	g1 := grantGen(t, gw)
	if g1 == g0 {
		t.Fatal("a grant through the other handle did not move the generation")
	}
	if gs := list(t, gw); len(gs) != 1 || gs[0].Principal != "remote.example" {
		t.Fatalf("the other handle's grant is not listed: %+v", gs)
	}
	if _, err := cli.Revoke(context.Background(), "remote.example", "", vis); err != nil {
		t.Fatal(err)
	}
	if g := grantGen(t, gw); g == g1 {
		t.Error("a revocation did not move the generation")
	}
}
