package taskstest

import "testing"

// The fake manifest is built like a registered one: the spec's vector for
// the tool-less weather manifest must come out.
func TestManifestMatchesSpecVector(t *testing.T) {
	m := Manifest("weather@agents.example", "1.4.0")
	if m.Hash != "K2/YdwvIBAlfUIeZHiNCyiYA4m4W2wrEOqXQDoQyXp4=" {
		t.Fatalf("hash %s of %s", m.Hash, m.Canonical)
	}
	m = Manifest("weather@agents.example", "1.4.0", ToolSpec{Name: "forecast.get",
		InputSchema: `{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`})
	tool, ok := m.Tool("forecast.get")
	if !ok || tool.InputHash != "XxGP62PwgOW9NLxx8ysunvuijMhSd0y4j1SSRTAbt7c=" {
		t.Fatalf("tool %+v", tool)
	}
}

func TestDirectoryAndPolicies(t *testing.T) {
	d := NewDirectory()
	m := Manifest("a@x.test", "1")
	d.Add(m, false)
	if !d.Exists("a@x.test") {
		t.Fatal("registered endpoint missing")
	}
	if _, ok := d.Active("a@x.test"); ok {
		t.Fatal("inactive version active")
	}
	d.Activate("a@x.test", "1")
	if a, ok := d.Active("a@x.test"); !ok || a != m {
		t.Fatal("activation")
	}
	d.Remove("a@x.test", "1")
	if d.Exists("a@x.test") {
		t.Fatal("removed endpoint exists")
	}
	p := NewPolicy([2]string{"u@x.test", "*"})
	if !p.CanInvoke("u@x.test", "any@x.test") || p.CanInvoke("v@x.test", "any@x.test") {
		t.Fatal("policy")
	}
	a := NewApprovals()
	if a.Approved("u", "e", "t") || a.HasPermission("u", "p") {
		t.Fatal("approvals grant by default")
	}
}
