package mcpfront

import (
	"strings"
	"testing"
)

func TestNamesPlainAndCollisions(t *testing.T) {
	t.Parallel()
	refs := []toolRef{
		{"weather@agents.example.test", "forecast.get"},
		{"echo@agents.example.test", "echo"},
		{"echo@agents.other.test", "echo"},
		{"bot@agents.example.test", "say hello"},
		{"天気@agents.example.test", "get"},
	}
	got := assignNames(refs, NamesMCP)
	if got[refs[0]] != "weather.forecast.get" {
		t.Errorf("plain name = %q", got[refs[0]])
	}
	a, b := got[refs[1]], got[refs[2]]
	if a == b || !strings.HasPrefix(a, "echo.echo-") || !strings.HasPrefix(b, "echo.echo-") {
		t.Errorf("colliding names = %q, %q; want distinct echo.echo-<hash>", a, b)
	}
	if n := got[refs[3]]; !strings.HasPrefix(n, "bot.say_hello-") {
		t.Errorf("replaced characters must add a suffix: %q", n)
	}
	if n := got[refs[4]]; !strings.HasPrefix(n, "__.get-") {
		t.Errorf("non-ASCII localpart = %q", n)
	}
	seen := map[string]bool{}
	for _, r := range refs {
		n := got[r]
		if !validName(n, NamesMCP) {
			t.Errorf("%q is not a valid MCP tool name", n)
		}
		if seen[n] {
			t.Errorf("duplicate %q", n)
		}
		seen[n] = true
	}
}

func TestNamesDeterministic(t *testing.T) {
	t.Parallel()
	refs := []toolRef{{"a@x", "t"}, {"a@y", "t"}, {"b@x", "u"}}
	want := assignNames(refs, NamesMCP)
	rev := []toolRef{refs[2], refs[1], refs[0], refs[1]}
	got := assignNames(rev, NamesMCP)
	for _, r := range refs {
		if got[r] != want[r] {
			t.Errorf("%v: %q then %q", r, want[r], got[r])
		}
	}
}

func TestNamesStrictAndLong(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200)
	refs := []toolRef{{"weather@agents", "forecast.get"}, {"w@agents", long}, {"w@agents", long + "y"}}
	got := assignNames(refs, NamesStrict)
	if n := got[refs[0]]; !strings.HasPrefix(n, "weather_forecast_get-") {
		t.Errorf("strict names replace dots (and so are suffixed): %q", n)
	}
	if got[refs[1]] == got[refs[2]] {
		t.Error("long names that differ only after the cut collide")
	}
	for _, r := range refs {
		if !validName(got[r], NamesStrict) {
			t.Errorf("%q is not a valid strict name", got[r])
		}
	}
	mcp := assignNames(refs[1:], NamesMCP)
	for _, n := range mcp {
		if len(n) != 128 || !validName(n, NamesMCP) {
			t.Errorf("long name %q (%d)", n, len(n))
		}
	}
}

// A tool whose plain name looks like another's hashed name must not take
// it away.
func TestNamesLookalike(t *testing.T) {
	t.Parallel()
	x := []toolRef{{"echo@a", "echo"}, {"echo@b", "echo"}}
	first := assignNames(x, NamesMCP)
	look := toolRef{"echo@c", strings.TrimPrefix(first[x[0]], "echo.")}
	got := assignNames(append(x, look), NamesMCP)
	if got[look] != first[x[0]] {
		t.Errorf("lookalike plain name = %q, want it kept as %q", got[look], first[x[0]])
	}
	if got[x[0]] == got[look] || got[x[1]] == got[look] || got[x[0]] == got[x[1]] {
		t.Errorf("names not distinct: %v", got)
	}
}

// The MCP bridge recognizes the front's mirrors of its own endpoint's tools
// by this key (mcpbridge/manifest.go, frontToolMeta).
func TestMetaToolKeyIsTheBridgesMirrorKey(t *testing.T) {
	t.Parallel()
	if MetaTool != "agentgw/xmpp" {
		t.Fatalf("MetaTool = %q: update mcpbridge's frontToolMeta with it", MetaTool)
	}
}
