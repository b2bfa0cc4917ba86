package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
)

func TestGrantsSeparateScopesAndReloadAcrossHandles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gw.db")
	gwDB, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer gwDB.Close()
	// The CLI opens the same file separately, as `agentgw trust` does.
	cliDB, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer cliDB.Close()

	table, err := federation.NewGrantTable(ctx, sqlite.NewGrants(gwDB))
	if err != nil {
		t.Fatal(err)
	}
	policy := federation.New([]string{"b.test"}, nil, nil)
	policy.SetGrants(table)
	ep := "weather@agents.b.test"
	if policy.CanSee("alice@a.test", ep) {
		t.Fatal("remote principal sees without a grant")
	}

	cli := sqlite.NewGrants(cliDB)
	if err := cli.Grant(ctx, federation.Grant{Principal: "a.test", Scope: federation.ScopeVisibility}); err != nil {
		t.Fatal(err)
	}
	if err := table.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if !policy.CanSee("alice@a.test", ep) || policy.CanInvoke("alice@a.test", ep) {
		t.Fatal("visibility grant should allow seeing and nothing else")
	}

	if removed, err := cli.Revoke(ctx, "a.test", "", federation.ScopeVisibility); err != nil || !removed {
		t.Fatalf("revoke: %v %v", removed, err)
	}
	if err := cli.Grant(ctx, federation.Grant{Principal: "bot@a.test", Endpoint: ep, Scope: federation.ScopeInvocation}); err != nil {
		t.Fatal(err)
	}
	if err := table.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if policy.CanSee("alice@a.test", ep) || policy.CanSee("bot@a.test", ep) {
		t.Fatal("revoked visibility still effective")
	}
	if !policy.CanInvoke("bot@a.test", ep) || policy.CanInvoke("alice@a.test", ep) || policy.CanInvoke("bot@a.test", "other@agents.b.test") {
		t.Fatal("endpoint-scoped invocation grant wrong")
	}
	list, err := cli.List(ctx)
	if err != nil || len(list) != 1 || list[0].Scope != federation.ScopeInvocation {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if removed, _ := cli.Revoke(ctx, "nobody@a.test", "", federation.ScopeInvocation); removed {
		t.Fatal("revoking a missing grant reported removal")
	}
}

func TestGrantsConformance(t *testing.T) {
	storetest.ExerciseGrants(t, func(t *testing.T) (federation.GrantStore, federation.GrantStore) {
		a, b := storetest.OpenTwo(t)
		return sqlite.NewGrants(a), sqlite.NewGrants(b)
	})
}
