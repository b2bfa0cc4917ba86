package config

import (
	"strings"
	"testing"
)

// The bridges' own tables are decoded and validated by the bridges (their
// tests are beside them: mcpbridge, connectorbridge, oanbridge, accbridge,
// a2abridge); here a stand-in table takes any keys of the same sections in
// the root table's order (gateway.Bridges, whose message gateway's tests
// check too).
type testSections struct{}

var testSectionNames = []string{"mcp", "connector", "oan", "acc", "a2a"}

type rawSection map[string]any

func (rawSection) Validate(*Config, *Agent) []string { return nil }

func (testSections) SectionNames() []string { return testSectionNames }
func (testSections) NewSection(name string) Section {
	for _, n := range testSectionNames {
		if n == name {
			return &rawSection{}
		}
	}
	return nil
}
func (testSections) CheckSections(*Config) []error { return nil }
func (testSections) Hosted() (names, needs []string) {
	return []string{"mcp"}, []string{"command or url"}
}

func load(path string) (*Config, error)   { return Load(path, testSections{}) }
func loadHost(path string) (*Host, error) { return LoadHost(path, testSections{}) }

// A key of an [[agents]] entry that is neither a common key nor a section
// of the table is refused, named as before the bridges owned their tables.
func TestUnknownAgentKeys(t *testing.T) {
	for body, want := range map[string]string{
		"titel = \"x\"\n":             "unknown keys: agents.titel",
		"[agents.mpc]\nurl = \"x\"\n": "unknown keys: agents.mpc.url",
	} {
		_, err := load(write(t, valid+"\n[[agents]]\njid = \"new@agents.example.test\"\nmanifest = \"m.json\"\n"+body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", body, err, want)
		}
	}
	// Two sections in one entry: exactly one backend.
	_, err := load(write(t, valid+"\n[[agents]]\njid = \"two@agents.example.test\"\n[agents.mcp]\nurl = \"http://x\"\n[agents.a2a]\nurl = \"http://y\"\n"))
	if err == nil || !strings.Contains(err.Error(), "[[agents]] #4: set exactly one backend") {
		t.Errorf("two sections: %v", err)
	}
}
