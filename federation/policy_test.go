package federation

import "testing"

type fakeGrants map[string]Scope

func (f fakeGrants) Granted(principal, endpoint string, scope Scope) bool {
	return f[principal]&scope != 0 || f[DomainOf(principal)]&scope != 0
}

func TestDenyByDefault(t *testing.T) {
	p := New([]string{"example.test"}, []string{"admin@example.test"}, map[string]EndpointRule{
		"secret@agents.example.test": {VisibleTo: []string{"alice@example.test"}},
	})
	ep := "weather@agents.example.test"
	if !p.CanSee("bob@example.test", ep) || !p.CanInvoke("bob@example.test", ep) {
		t.Error("local principal denied by default")
	}
	if p.CanSee("eve@remote.test", ep) || p.CanInvoke("eve@remote.test", ep) {
		t.Error("remote principal allowed without a grant")
	}
	if p.CanSee("bob@example.test", "secret@agents.example.test") {
		t.Error("endpoint restriction ignored")
	}
	if !p.CanSee("alice@example.test", "secret@agents.example.test") {
		t.Error("listed principal denied")
	}
	if !p.IsAdmin("admin@example.test") || p.IsAdmin("bob@example.test") {
		t.Error("admin check wrong")
	}
	p.SetGrants(fakeGrants{"remote.test": ScopeVisibility})
	if !p.CanSee("eve@remote.test", ep) {
		t.Error("visibility grant ignored")
	}
	if p.CanInvoke("eve@remote.test", ep) {
		t.Error("visibility grant allowed invocation")
	}
}

func TestVisibleFuncAgreesWithCanSee(t *testing.T) {
	p := New([]string{"example.test"}, nil, map[string]EndpointRule{
		"secret@agents.example.test": {VisibleTo: []string{"alice@example.test"}},
	})
	p.SetGrants(fakeGrants{"remote.test": ScopeVisibility, "bot@other.test": ScopeInvocation})
	eps := []string{"weather@agents.example.test", "secret@agents.example.test"}
	for _, who := range []string{"alice@example.test", "bob@example.test", "eve@remote.test", "bot@other.test", "x@nowhere.test"} {
		f := p.VisibleFunc(who)
		for _, ep := range eps {
			if f(ep) != p.CanSee(who, ep) {
				t.Errorf("VisibleFunc(%s)(%s) = %v, CanSee = %v", who, ep, f(ep), p.CanSee(who, ep))
			}
		}
	}
}
