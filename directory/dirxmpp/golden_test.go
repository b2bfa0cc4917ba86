package dirxmpp

import (
	"testing"

	"github.com/agentgw/agentgw/testkit/goldentest"
)

// goldenDir holds request/reply pairs adapted from the spec's examples (see
// goldentest); its fixture attribute picks the directory contents:
//
//	weather   the spec's weather manifest plus a calendar agent (default)
//	toolless  the spec's tool-less weather manifest (the hash vector)
//	empty     nothing registered
const goldenDir = "../../testdata/golden"

func goldenFixture(t *testing.T, name string) *fakeDir {
	switch name {
	case "", "weather":
		return newFakeDir(t, weatherManifest, calendarManifest)
	case "toolless":
		return newFakeDir(t, toollessManifest)
	case "empty":
		return newFakeDir(t)
	}
	t.Fatalf("unknown fixture %q", name)
	return nil
}

func TestGolden(t *testing.T) {
	for _, ex := range goldentest.Load(t, goldenDir, 2, 10) {
		t.Run(ex.Name, func(t *testing.T) {
			h := newHarness(t, goldenFixture(t, ex.Fixture))
			got := h.router.DispatchIQ(t.Context(), goldentest.IQ(ex.Stanzas[0]))
			goldentest.Compare(t, got, ex.Stanzas[1])
		})
	}
}
