package backendkit

import (
	"context"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/internal/config"
)

type noSection struct{}

func (noSection) Validate(*config.Config, *config.Agent) []string { return nil }

func TestBridgesCheck(t *testing.T) {
	line := func(name string) Bridge {
		return Bridge{Section: name, Config: func() Section { return noSection{} },
			Build: func(context.Context, Host, Agent) error { return nil }}
	}
	if err := (Bridges{line("a"), line("b")}).Check(); err != nil {
		t.Fatal(err)
	}
	if err := (Bridges{line("a"), line("a")}).Check(); err == nil || !strings.Contains(err.Error(), "two lines for [agents.a]") {
		t.Errorf("duplicate: %v", err)
	}
	if err := (Bridges{{Section: "x"}}).Check(); err == nil {
		t.Error("a line without Config and Build passed")
	}
}

// FillStore hands out the first handle that implements the wanted driver
// interface, and nothing for a nil handle.
func TestFillStore(t *testing.T) {
	var r interface{ Ready() bool }
	var nilManifests *Manifests
	if FillStore(&r, nil, nilManifests) {
		t.Fatal("filled from nil handles")
	}
	m := NewManifests(nil)
	if !FillStore(&r, "not it", m) || r != Readiness(m) {
		t.Fatalf("got %v", r)
	}
}
